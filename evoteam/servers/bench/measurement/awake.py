"""The timed CPUs kept awake while an evaluation runs: one lowest-priority spinning process per CPU
the timed workers are pinned to.

Why: between two timed calls a worker is stopped, and its CPU has nothing to run while the
harness writes the next inputs and reads the last outputs (milliseconds). An idle CPU halts —
in a virtual machine the vCPU exits to the host, which may run something else on that core or
let it sleep (a sleeping core may lose its caches) — so the next call starts on a CPU that has
to be woken first. A process that calls a kernel in a loop (a real application, or the minimal
harness of benchmarks/bench_harness.py) never lets its CPU idle. Measured on the 2-core
development VM (`benchmarks/results/2026-12-02-call_state_m21e.txt`, sessions alternating):
`rmsnorm_cpu`'s empty call took a median 1,161–2,673 µs on the harness's clock without a keeper
and 422–540 µs with one, with the worker's own CPU time per call about the same: the rest was
time in which the worker did not run at all. The keeper is part of the state every timed call
starts from, for every side alike.

The keeper is trusted code of a few lines, never candidate code: a process of the harness's
user at ``SCHED_IDLE``, so any other runnable thread on its CPU — the timed worker first — takes
the CPU from it at once (a wake-up preempts an idle-policy task), and it gets nothing on a busy
machine. A candidate with a uid of its own cannot signal it; one without (no root) could kill it
to tilt the next calls, so the session checks that it lives with the scheduling checks
(session._check_sched) and flags the evaluation otherwise.
"""

from __future__ import annotations

import os
import subprocess
import sys

# The child pins itself and drops to SCHED_IDLE before it spins: nothing of it ever runs on
# another CPU or at a normal priority for longer than its interpreter's start.
SPIN = ("import os, sys\n"
        "os.sched_setaffinity(0, {int(sys.argv[1])})\n"
        "os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))\n"
        "sys.stdout.write('1'); sys.stdout.flush()\n"
        "while True:\n"
        "    pass\n")


def _lowest_group(pid: int) -> None:
    """Where the scheduler groups processes by session (autogroup), a task's policy counts only
    inside its group, and the keeper's group would compete with a timed worker's as an equal:
    measured, a 15 ms call waited 14 ms for its CPU. The keeper has a session of its own, and
    that group gets the lowest weight there is (nice 19, which any user may set)."""
    try:
        with open(f"/proc/{pid}/autogroup", "w") as fh:
            fh.write("19")
    except OSError:
        pass


class CpuKeeper:
    """One spinning SCHED_IDLE process per CPU in ``cpus`` (none where the platform has no
    SCHED_IDLE). ``alive()`` says whether all still run; ``close()`` ends them."""

    def __init__(self, cpus: list[int]):
        self.procs: list[subprocess.Popen] = []
        self.waited = False
        if not cpus or not hasattr(os, "SCHED_IDLE"):
            return
        for cpu in cpus:
            try:
                # -S -I: no site, no user paths; nothing but the few lines above is imported.
                proc = subprocess.Popen([sys.executable, "-S", "-I", "-c", SPIN, str(cpu)],
                                        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, close_fds=True, start_new_session=True)
            except OSError:
                continue  # no keeper on that CPU: it is timed as it was before keepers existed
            self.procs.append(proc)
            _lowest_group(proc.pid)

    def ready(self) -> None:
        """Wait until every keeper spins at its place (its one byte on stdout). One that could not
        start (a platform that refuses SCHED_IDLE, say) is dropped: its CPU is then timed as
        before, which the harness can live with; only a keeper that dies later is suspicious."""
        if self.waited:
            return
        self.waited = True
        running = []
        for p in self.procs:
            try:
                ok = p.stdout is not None and p.stdout.read(1) == b"1"
            except (OSError, ValueError):
                ok = False
            if ok:
                running.append(p)
            else:
                p.kill()
                p.wait()
        self.procs = running

    def alive(self) -> bool:
        return all(p.poll() is None for p in self.procs)

    def close(self) -> None:
        for p in self.procs:
            try:
                p.kill()
            except OSError:
                pass
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            if p.stdout is not None:
                p.stdout.close()
        self.procs = []
