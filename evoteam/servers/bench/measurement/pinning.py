"""Timed workers on chosen CPUs: every thread of every given process, all or none."""

from __future__ import annotations

import os
from collections.abc import Iterable
from contextlib import suppress


def pin_threads(pids: Iterable[int], cpus: list[int]) -> bool:
    """Every thread of each process in ``pids`` on ``cpus``, each thread on its own (one gone
    meanwhile leaves the others to pin; a process gone is skipped). Where the harness may not set
    a thread's affinity, those pinned so far are given every CPU back and the answer is False:
    some sides pinned and others not would time under different conditions."""
    every, done = sorted(os.sched_getaffinity(0)), []
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:  # gone
            continue
        for tid in map(int, tids):
            try:
                os.sched_setaffinity(tid, cpus)
                done.append(tid)
            except ProcessLookupError:
                continue
            except OSError:
                for pinned in done:
                    with suppress(OSError):
                        os.sched_setaffinity(pinned, every)
                return False
    return True
