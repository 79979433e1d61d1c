"""How long one timed call took, as the harness reads it.

The harness's wall clock from SIGCONT to the stopped worker counts the time the worker waited for
a CPU: on a busy machine another process's time slice lands inside a call, and a kernel's long
calls collect more of it than short ones. That moved `examples/better.py`'s score +9..+31% on
`pairwise_distance_cpu` with two busy loops running, where the time below moved it +2..+8%
(benchmarks/results/2026-12-05-clock_busy.txt).

Where every timed worker has a cgroup of its own, a call's time is the larger of
- the wall time less the longest run-queue wait of any of the worker's threads during the call
  (/proc/PID/task/TID/schedstat, kept by the kernel: time runnable but not running), which keeps
  everything the worker did or waited for itself (a kernel that sleeps is counted), and
- the CPU time the worker's whole cgroup used (cpu.stat), which guards the first: a thread or a
  child process that did the work while the main thread stood runnable in the queue would
  otherwise take its own work out of the time. Every process a worker starts is in its cgroup.
Without a cgroup, or on a GPU, the wall time alone (a child's work could not be seen).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from evoteam.servers.bench.measurement.owntime import run_queue_waits

CLOCK_ENV = "EVOTEAM_BENCH_CLOCK"  # "wall": the wall time alone, everywhere (to compare the two)


def cpu_guarded_wanted() -> bool:
    return os.environ.get(CLOCK_ENV, "").strip().lower() != "wall"


@dataclass
class CallStart:
    """The worker's counters before a timed call, read while it is stopped."""

    cpu_ns: int
    waits: dict[str, int]


def start(pid: int, cpu_ns: int | None) -> CallStart | None:
    return None if cpu_ns is None else CallStart(cpu_ns, run_queue_waits(pid))


def call_ns(begun: CallStart | None, pid: int, cpu_ns: int | None, wall_ns: int) -> int:
    """The call's time (module docstring) from the counters before it and now, the worker stopped
    again; the wall time where there is nothing to read."""
    if begun is None or cpu_ns is None:
        return wall_ns
    waits = run_queue_waits(pid)
    waited = max((w - begun.waits.get(tid, 0) for tid, w in waits.items()), default=0)
    own = wall_ns - max(0, waited)
    return max(cpu_ns - begun.cpu_ns, min(own, wall_ns))
