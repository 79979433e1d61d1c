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
    waits = iter([{"1": 100}, {"1": 400_100, "2": 50}])  # before and after: thread 1 waited 400 us
    monkeypatch.setattr(callclock, "run_queue_waits", lambda pid: next(waits))
    begun = callclock.start(7, cpu_ns=1_000_000)
    # Wall 1,000 us, of which 400 waiting for a CPU; the cgroup used 500 us: 600 us.
    assert callclock.call_ns(begun, 7, cpu_ns=1_500_000, wall_ns=1_000_000) == 600_000
    waits = iter([{"1": 0}, {"1": 900_000}])
    begun = callclock.start(7, cpu_ns=0)
    # Waited 900 us while another thread of the worker used 800 us: the CPU time is the floor.
    assert callclock.call_ns(begun, 7, cpu_ns=800_000, wall_ns=1_000_000) == 800_000
    # Nothing to read (no cgroup): the wall time.
    assert callclock.call_ns(None, 7, cpu_ns=None, wall_ns=1_000_000) == 1_000_000
    assert callclock.start(7, cpu_ns=None) is None


@pytest.mark.parametrize("asked", ["", "wall"])
async def test_an_evaluation_says_which_clock_read_it(asked, fast_kit, fast_settings, monkeypatch):
    monkeypatch.setenv(callclock.CLOCK_ENV, asked)
    e = await evaluate_candidate(fast_settings, str(fast_kit), code=RMSNORM)
    assert e.status == "PASSED", e.message
    expected = "cpu-guarded" if asked != "wall" and cgroup_root() is not None else "wall"
    assert e.metrics["clock"] == expected


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
# GIL let go: each stands runnable while the others run, so a clock that left out the longest wait
# for a CPU alone read it several times faster (measured); the cgroup's CPU time counts it all.
POOL = WORK + """
_go = [threading.Event() for _ in range(8)]
_done = threading.Barrier(9)

def _loop(i):
    while True:
        _go[i].wait()
        _go[i].clear()
        _share(1)
        _done.wait()

for _i in range(8):
    threading.Thread(target=_loop, args=(_i,), daemon=True).start()

def run(hidden_states, weight, eps):
    for go in _go:
        go.set()
    _done.wait()
    return _math(hidden_states, weight, eps)
"""


async def test_work_split_over_waiting_threads_is_counted(fast_kit, fast_settings):
    """Side by side, the work done by 8 threads that wait for the one CPU in turn is not faster
    than the same work in one thread (without the cgroup's CPU time as its floor, the clock read
    it several times faster)."""
    from evoteam.servers.bench.evaluation.compare import compare_candidates

    if cgroup_root() is None:
        pytest.skip("no cgroup for the workers here: the wall time is the clock")
    c = await compare_candidates(fast_settings, str(fast_kit), {"code": ONE_THREAD}, {"code": POOL})
    assert c.b_speedup_over_a is not None, c.verdict
    assert c.b_speedup_over_a < 1.3, c.verdict
