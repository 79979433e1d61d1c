"""A worker's deadline in its own time: the time it waited for a CPU does not count.

A request's timeout is there to stop a hang or a candidate far too slow. On a busy machine an
honest worker also spends time runnable but not running (other jobs hold the cores); counted
against it, that time turned honest candidates into TIMEOUTs under load. The kernel keeps, per
thread, how long it waited on a run queue (/proc/PID/task/TID/schedstat, second field): the
deadline moves out by the most any of the worker's threads (those there when the request began)
waited since then, up to MAX_STRETCH times the timeout, so a hang is still stopped in bounded
time (a candidate that starves its own threads buys itself at most that).
"""

from __future__ import annotations

import os
import time

MAX_STRETCH = 4.0  # the wait credited is at most this many timeouts
MAX_TASKS = 64  # threads read per check (a check happens only when the deadline is reached)


def thread_wait(pid: int, tid: int | str) -> int | None:
    """Nanoseconds one thread of ``pid`` has waited for a CPU so far; None where unreadable."""
    try:
        with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as fh:
            return int(fh.read(200).split()[1])
    except (OSError, IndexError, ValueError):
        return None


def run_queue_waits(pid: int) -> dict[str, int]:
    """Nanoseconds each thread of ``pid`` has waited for a CPU so far; {} where unreadable."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")[:MAX_TASKS]
    except OSError:
        return {}
    waits = {tid: thread_wait(pid, tid) for tid in tids}
    return {tid: w for tid, w in waits.items() if w is not None}


class OwnTimeDeadline:
    """Callable: the current deadline (time.monotonic). Cheap until the first limit is reached;
    from then on each call reads the worker's threads' waits once."""

    def __init__(self, pid: int | None, timeout: float):
        self.pid = pid
        self.timeout = timeout
        self.start = time.monotonic()
        self.limit = self.start + timeout
        self.waited = 0.0
        self.start_waits = run_queue_waits(pid) if pid else {}  # also the call clock's (callclock.py)

    def __call__(self) -> float:
        if self.pid is None or time.monotonic() < self.limit:
            return self.limit
        now = run_queue_waits(self.pid)
        # Threads there when the request began only: one first seen later would bring every wait of
        # its life (a pool started at import stretched a deadline to its cap; review, 2026-12-05).
        waited = max((w - self.start_waits[tid] for tid, w in now.items() if tid in self.start_waits), default=0) / 1e9
        self.waited = min(max(waited, self.waited), self.timeout * MAX_STRETCH)
        self.limit = self.start + self.timeout + self.waited
        return self.limit
