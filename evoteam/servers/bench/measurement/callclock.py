"""How long one timed call took, as the harness reads it.

The harness's wall clock from SIGCONT to the stopped worker counts the time the worker waited for
a CPU: on a busy machine another process's time slice lands inside a call, and a kernel's long
calls collect more of it than short ones. With two busy loops it moved `examples/better.py`'s
score ×1.15–1.25 on `pairwise_distance_cpu` and ×1.11–1.12 on `rmsnorm_cpu`, where the time below
moved it ×1.016 and ×0.99–1.00 (benchmarks/bench_clock.py; results/2026-12-05-bench_clock.txt).

Where every timed worker has a cgroup of its own and all of them run on one pinned CPU, a call's
time is the larger of
- the wall time less the run-queue wait of the worker's main thread during the call, the thread
  that reads the request, calls the kernel and replies (/proc/PID/task/PID/schedstat, kept by the
  kernel: time runnable but not running), which keeps everything the worker did or waited for
  itself (a kernel that sleeps is counted), and
- the CPU time the worker's whole cgroup used (cpu.stat), which guards the first: a thread or a
  child process that did the work while the main thread stood runnable in the queue would
  otherwise take its own work out of the time. Every process a worker starts is in its cgroup.
The main thread's alone: other threads' waits would let old waits in (a thread that first shows up
during a call brings all it waited before; an idle helper thread woken behind the main one took the
path's own wait out of the call but not out of the empty calls subtracted from it; adversarial
review, 2026-12-05). One CPU: on several, a cgroup's CPU time is their sum, not a duration.
Elsewhere (no cgroup, a GPU, workers on several CPUs or none pinned) the wall time alone.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from evoteam.servers.bench.measurement.owntime import thread_wait

CLOCK_ENV = "EVOTEAM_BENCH_CLOCK"  # "wall": the wall time alone, everywhere (to compare the two)


def cpu_guarded_wanted() -> bool:
    return os.environ.get(CLOCK_ENV, "").strip().lower() != "wall"


def main_thread_wait(pid: int) -> int | None:
    """Nanoseconds the worker's main thread has waited for a CPU so far; None where unreadable."""
    return thread_wait(pid, pid)


@dataclass
class CallStart:
    """The worker's counters before a timed call, read while it is stopped."""

    cpu_ns: int
    waited_ns: int


def start(cpu_ns: int | None, waited_ns: int | None) -> CallStart | None:
    """The counters before a call (the main thread's wait: what the request's deadline read of it,
    the worker stopped since), or None where either is missing."""
    return None if cpu_ns is None or waited_ns is None else CallStart(cpu_ns, waited_ns)


def call_ns(begun: CallStart | None, pid: int, cpu_ns: int | None, wall_ns: int) -> int:
    """The call's time (module docstring) from the counters before it and now, the worker stopped
    again; the wall time where there is nothing to read."""
    waited = main_thread_wait(pid) if begun is not None else None
    if begun is None or cpu_ns is None or waited is None:
        return wall_ns
    own = wall_ns - min(max(0, waited - begun.waited_ns), wall_ns)
    return max(cpu_ns - begun.cpu_ns, own)
