"""Timed workers on chosen CPUs: every thread of every given process, all or none."""

from __future__ import annotations

import os
from collections.abc import Iterable
from contextlib import suppress


def pin_threads(pids: Iterable[int], cpus: list[int]) -> bool:
    """Every thread of each process in ``pids`` on ``cpus``, each thread on its own (one gone
    meanwhile leaves the others to pin; a process gone is skipped). Where the harness may not set
    a thread's affinity, those pinned so far get back the CPUs each had and the answer is False:
    some sides pinned and others not would time under different conditions."""
    done: list[tuple[int, set[int]]] = []
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:  # gone
            continue
        for tid in map(int, tids):
            try:
                before = os.sched_getaffinity(tid)
                os.sched_setaffinity(tid, cpus)
                done.append((tid, before))
            except ProcessLookupError:
                continue
            except OSError:
                for pinned, had in done:
                    with suppress(OSError):
                        os.sched_setaffinity(pinned, had)
                return False
    return True
