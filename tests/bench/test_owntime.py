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


async def test_a_request_makes_its_deadline_before_the_clock_starts(fast_kit, fast_settings, monkeypatch):
    """Reading the threads' counters costs more for a worker with more threads: done inside the
    timed window it would charge one side more than the other, so it happens while the worker is
    still stopped, before the resume that starts the clock."""
    from evoteam.servers.bench.confinement.jail import Jail
    from evoteam.servers.bench.evaluation.core import evaluate_candidate
    from evoteam.servers.bench.measurement import workerproc
    from tests.bench.test_bench_hostile import GOOD

    events: list[str] = []

    class Recording(owntime.OwnTimeDeadline):
        def __init__(self, *args, **kwargs):
            events.append("deadline")
            super().__init__(*args, **kwargs)

    real_resume, real_request = Jail.resume, workerproc.WorkerProc.request

    def resume(self):
        events.append("resume")
        return real_resume(self)

    def request(self, *args, **kwargs):
        events.append("begin")
        try:
            return real_request(self, *args, **kwargs)
        finally:
            events.append("end")

    monkeypatch.setattr(workerproc, "OwnTimeDeadline", Recording)
    monkeypatch.setattr(Jail, "resume", resume)
    monkeypatch.setattr(workerproc.WorkerProc, "request", request)
    result = await evaluate_candidate(fast_settings, str(fast_kit), code=GOOD)
    assert result.status == "PASSED", result.message
    segments, current = [], None
    for event in events:
        if event == "begin":
            current = []
        elif event == "end" and current is not None:
            segments.append(current)
            current = None
        elif current is not None:
            current.append(event)
    timed = [s for s in segments if "resume" in s]
    assert len(timed) > 10  # every call of the evaluation went through request()
    # one deadline per request, made before the resume (none read inside the window)
    assert all(s.count("deadline") == 1 and s.index("deadline") < s.index("resume") for s in timed), timed[:3]


def test_a_thread_first_seen_after_the_request_began_brings_no_old_waits(monkeypatch):
    """Every thread's waits were read from zero when a thread was not there at the start, so a
    thread pool started at import, whose threads showed up in the listing later, stretched a
    deadline to its cap with waits from before the request (adversarial review, 2026-12-05)."""
    reads = iter([{"100": 5_000}, {"100": 6_000, "101": 9_000_000_000}])
    monkeypatch.setattr(owntime, "run_queue_waits", lambda pid: next(reads))
    deadline = owntime.OwnTimeDeadline(100, 0.001)
    time.sleep(0.01)
    assert deadline() == pytest.approx(deadline.start + 0.001 + 1e-6) and deadline.waited == pytest.approx(1e-6)
