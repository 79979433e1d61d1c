"""Pinning the timed workers is all or none: where the harness may not set one thread's affinity,
the threads pinned before it get back the CPUs each had (some sides pinned and others not would
time under different conditions; it used to leave them pinned)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from evoteam.servers.bench.measurement import pinning

THREADS = "import threading, time\nfor _ in range(2): threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\ntime.sleep(60)\n"


@pytest.fixture
def process():
    child = subprocess.Popen([sys.executable, "-c", THREADS])
    try:
        for _ in range(3000):  # its two threads started (a busy machine may take a while)
            if len(os.listdir(f"/proc/{child.pid}/task")) == 3:
                break
            time.sleep(0.01)
        assert len(os.listdir(f"/proc/{child.pid}/task")) == 3
        yield child.pid
    finally:
        child.kill()
        child.wait()


def affinities(pid: int) -> list[set[int]]:
    return [os.sched_getaffinity(int(tid)) for tid in sorted(os.listdir(f"/proc/{pid}/task"), key=int)]


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to pin to one")
def test_every_thread_is_pinned_or_none(process, monkeypatch):
    every = os.sched_getaffinity(0)
    one = [max(every)]
    assert pinning.pin_threads([process, 999_999_999], one)  # a process gone is skipped
    assert affinities(process) == [set(one)] * 3
    tids = sorted(map(int, os.listdir(f"/proc/{process}/task")))
    for tid in tids:
        os.sched_setaffinity(tid, every)
    own = {min(every)}
    os.sched_setaffinity(tids[1], own)  # one thread had its own set before: it gets that back

    real, calls = os.sched_setaffinity, []

    def refuse_the_third(tid, cpus):
        calls.append(tid)
        if len(calls) == 3:
            raise PermissionError("not allowed")
        real(tid, cpus)

    monkeypatch.setattr(pinning.os, "sched_setaffinity", refuse_the_third)
    assert pinning.pin_threads([process], one) is False
    monkeypatch.undo()
    assert affinities(process) == [every, own, every]  # the two pinned before the refusal got theirs back
