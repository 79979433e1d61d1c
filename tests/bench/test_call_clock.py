"""The clock a timed call is read by (measurement/callclock.py): where every timed worker has a
cgroup, the wall time less the worker's waits for a CPU, never below its cgroup's CPU time; the wall
time alone elsewhere, on a GPU, or when EVOTEAM_BENCH_CLOCK=wall asks for it."""

from __future__ import annotations

import pytest

from evoteam.servers.bench.confinement.jail import cgroup_root
from evoteam.servers.bench.evaluation.core import evaluate_candidate
from evoteam.servers.bench.measurement import callclock
from tests.bench.conftest import RMSNORM


def test_the_waits_come_out_and_the_cpu_time_is_a_floor(monkeypatch):
    after = iter([400_100, 900_000, 5_000_000])  # the main thread's waits for a CPU after each call
    monkeypatch.setattr(callclock, "main_thread_wait", lambda pid: next(after))
    begun = callclock.start(cpu_ns=1_000_000, waited_ns=100)
    # Wall 1,000 us, of which 400 waiting for a CPU; the cgroup used 500 us: 600 us.
    assert callclock.call_ns(begun, 7, cpu_ns=1_500_000, wall_ns=1_000_000) == 600_000
    begun = callclock.start(cpu_ns=0, waited_ns=0)
    # Waited 900 us while another thread of the worker used 800 us: the CPU time is the floor.
    assert callclock.call_ns(begun, 7, cpu_ns=800_000, wall_ns=1_000_000) == 800_000
    begun = callclock.start(cpu_ns=0, waited_ns=0)  # more wait than wall (a counter's quirk): never below zero
    assert callclock.call_ns(begun, 7, cpu_ns=100_000, wall_ns=1_000_000) == 100_000
    # Nothing to read (no cgroup, or the main thread's counters): the wall time.
    assert callclock.call_ns(None, 7, cpu_ns=None, wall_ns=1_000_000) == 1_000_000
    assert callclock.start(cpu_ns=None, waited_ns=0) is None and callclock.start(cpu_ns=0, waited_ns=None) is None
    monkeypatch.setattr(callclock, "main_thread_wait", lambda pid: None)
    assert callclock.call_ns(callclock.start(0, 0), 7, cpu_ns=5, wall_ns=1_000) == 1_000


def test_only_the_main_threads_wait_counts(monkeypatch):
    """Another thread's waits would let old waits in (a thread that first showed up during a call
    brought all it had waited at import, and the call read its bare CPU time; an idle helper woken
    behind the main thread took the path's own wait out of the call but not out of the empty calls:
    adversarial review, 2026-12-05): the clock reads the main thread's schedstat alone, after the
    call, and before it takes the main thread's entry of what the request's deadline read."""
    import os
    import threading

    from evoteam.servers.bench.measurement.owntime import OwnTimeDeadline

    pid = os.getpid()
    stop = threading.Event()
    helper = threading.Thread(target=stop.wait)
    helper.start()
    try:
        deadline = OwnTimeDeadline(pid, 1.0)
        assert len(deadline.start_waits) >= 2 and str(pid) in deadline.start_waits  # every thread's, read once
        seen = []
        real = open
        caller = threading.get_ident()

        def spy(path, *args, **kwargs):
            # This thread's opens only: a thread an earlier test left (a spare worker's reader) may
            # open a file meanwhile, which is not the clock's doing (a CI run failed so, 2026-12-07).
            if threading.get_ident() == caller:
                seen.append(str(path))
            return real(path, *args, **kwargs)

        monkeypatch.setattr("builtins.open", spy)
        begun = callclock.start(0, deadline.start_waits.get(str(pid)))
        assert begun is not None and begun.waited_ns == deadline.start_waits[str(pid)]
        callclock.call_ns(begun, pid, cpu_ns=0, wall_ns=1_000)
    finally:
        stop.set()
        helper.join()
    assert seen == [f"/proc/{pid}/task/{pid}/schedstat"]


@pytest.mark.parametrize("asked", ["", "wall"])
async def test_an_evaluation_says_which_clock_read_it(asked, fast_kit, fast_settings, monkeypatch):
    monkeypatch.setenv(callclock.CLOCK_ENV, asked)
    e = await evaluate_candidate(fast_settings, str(fast_kit), code=RMSNORM)
    assert e.status == "PASSED", e.message
    one_cpu = len(e.metrics.get("pinned_cpus") or []) == 1
    expected = "cpu-guarded" if asked != "wall" and cgroup_root() is not None and one_cpu else "wall"
    assert e.metrics["clock"] == expected


async def test_workers_on_several_cpus_are_read_by_the_wall_clock(fast_kit, fast_settings):
    """On several CPUs a cgroup's CPU time is their sum, not a duration (a kernel on 4 threads would
    read 4x its time; adversarial review, 2026-12-05): the wall time there."""
    import json
    import os

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU here: no kit can spread over several")
    manifest = json.loads((fast_kit / "kit.json").read_text())
    manifest["threads"] = 2
    (fast_kit / "kit.json").write_text(json.dumps(manifest))
    e = await evaluate_candidate(fast_settings, str(fast_kit), code=RMSNORM)
    assert e.status == "PASSED", e.message
    assert len(e.metrics["pinned_cpus"]) == 2 and e.metrics["clock"] == "wall"


WORK = """
import numpy as np, threading, time

def _math(hidden_states, weight, eps):
    x = hidden_states.astype(np.float64)
    return (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight).astype(np.float32)

_X = np.ones((512, 1024))  # work of its own size, whatever the kit's inputs

def _share(n):
    for _ in range(n):
        np.sqrt(_X * _X + 1.0)
"""

ONE_THREAD = WORK + """
def run(hidden_states, weight, eps):
    _share(8)
    return _math(hidden_states, weight, eps)
"""

# The same work over a pool of 8 threads kept alive on the worker's one CPU, each in numpy with the
# GIL let go, while the main thread yields the CPU in a loop: it stands runnable behind them, so a
# clock that left out the main thread's wait for a CPU alone read it several times faster (measured);
# the cgroup's CPU time counts it all.
POOL = WORK + """
import os

_go = [threading.Event() for _ in range(8)]
_finished = [0]
_lock = threading.Lock()

def _loop(i):
    while True:
        _go[i].wait()
        _go[i].clear()
        _share(1)
        with _lock:
            _finished[0] += 1

for _i in range(8):
    threading.Thread(target=_loop, args=(_i,), daemon=True).start()

def run(hidden_states, weight, eps):
    _finished[0] = 0
    for go in _go:
        go.set()
    while _finished[0] < 8:
        os.sched_yield()
    return _math(hidden_states, weight, eps)
"""


async def test_work_split_over_waiting_threads_is_counted(fast_kit, fast_settings):
    """Side by side, the work done by 8 threads while the main thread waits runnable behind them is
    not faster than the same work in one thread (without the cgroup's CPU time as its floor, the
    clock read it several times faster)."""
    from evoteam.servers.bench.evaluation.compare import compare_candidates

    if cgroup_root() is None:
        pytest.skip("no cgroup for the workers here: the wall time is the clock")
    c = await compare_candidates(fast_settings, str(fast_kit), {"code": ONE_THREAD}, {"code": POOL})
    assert c.b_speedup_over_a is not None, c.verdict
    assert c.b_speedup_over_a < 1.1, c.verdict
