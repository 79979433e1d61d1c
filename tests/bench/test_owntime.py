"""A request's timeout counts the worker's own time: time it waited for a CPU (other jobs on a
busy machine) moves the deadline out, up to a bound; a hang still meets it (owntime.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from evoteam.servers.bench.measurement import owntime, protocol

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="needs Linux /proc schedstat")

SPIN = "import os, sys; os.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True: pass"


def _spinner(cpu: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", SPIN, str(cpu)])


def test_a_starved_worker_gets_the_time_it_waited_for_a_cpu_up_to_the_bound():
    cpu = min(os.sched_getaffinity(0))
    worker = _spinner(cpu)  # the "worker": always runnable, sharing its one CPU with three others
    others = [_spinner(cpu) for _ in range(3)]
    try:
        deadline = owntime.OwnTimeDeadline(worker.pid, 0.3)
        first = deadline.limit
        time.sleep(1.5)
        moved = deadline()
        # about three quarters of 1.5 s runnable-but-waiting; far more than the 0.3 s timeout
        assert deadline.waited > 0.3 and moved > first
        assert moved <= deadline.start + 0.3 * (1 + owntime.MAX_STRETCH) + 1e-6
    finally:
        for p in [worker, *others]:
            p.kill()
            p.wait()


def test_a_sleeping_worker_meets_its_deadline_unmoved():
    hang = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(0.5)  # let it start and fall asleep
        deadline = owntime.OwnTimeDeadline(hang.pid, 0.2)
        time.sleep(0.4)
        assert deadline() < time.monotonic() and deadline.waited < 0.1
    finally:
        hang.kill()
        hang.wait()


def test_the_reader_waits_on_while_the_deadline_moves_then_times_out():
    read_fd, write_fd = os.pipe()
    try:
        start = time.monotonic()
        calls = []

        def moving() -> float:
            calls.append(time.monotonic())
            return start + (0.6 if time.monotonic() >= start + 0.3 else 0.3)  # moves once, at 0.3 s

        with pytest.raises(protocol.PeerTimeout):
            protocol.FrameReader(read_fd).read(moving)
        assert time.monotonic() - start >= 0.6 and len(calls) >= 3
    finally:
        os.close(read_fd)
        os.close(write_fd)
