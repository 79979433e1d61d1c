"""The state a timed call starts from: the timed CPU kept awake by a lowest-priority keeper that
yields to the worker (awake.py), the trusted worker off the timed CPU, and no page faults in a
timed call once the worker has warmed up (the workers' fixed allocator policy, workerenv.py)."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal

import pytest

from evoteam.servers.bench.evaluation.core import _workload_specs
from evoteam.servers.bench.measurement import arena
from evoteam.servers.bench.measurement.workerproc import WorkerFailure
from tests.bench.conftest import kernel_session

GOOD = """
import numpy as np

def run(hidden_states, weight, eps):
    x = hidden_states.astype(np.float64)
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight
    return y.astype(np.float32)
"""

# Three 8 MiB temporaries alive at once on every call, written whole. Under glibc's defaults the
# trim threshold follows the adaptive mmap threshold (twice a freed block's size, here ~16 MiB),
# so the 24 MiB they leave at the top of the heap go back to the kernel after each call and the
# next call faults them in again (thousands of pages); under the workers' fixed policy
# (MALLOC_TRIM_THRESHOLD_ of 1 GiB) the heap keeps them.
BIG_TEMPORARY = """
import numpy as np

def run(hidden_states, weight, eps):
    a, b, c = np.ones(1 << 20), np.ones(1 << 20), np.ones(1 << 20)
    x = hidden_states.astype(np.float64)
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight
    return (y + (a[0] + b[0] + c[0] - 3.0)).astype(np.float32)
"""

needs_two_cpus = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2 or not hasattr(os, "SCHED_IDLE"),
                                    reason="a timed CPU apart from the harness's needs two usable CPUs and Linux")


def _minflt(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as fh:
        text = fh.read()
    return int(text[text.rindex(")") + 2:].split()[7])


@needs_two_cpus
async def test_the_timed_cpu_is_kept_awake_by_an_idle_priority_process_that_ends_with_the_session(
        fast_kit, fast_settings):
    kit, cand, session = kernel_session(fast_settings, fast_kit, GOOD)
    try:
        await asyncio.to_thread(session.start)
        session.keeper.ready()
        assert session.pinned and len(session.keeper.procs) == len(session.pinned)
        keepers = [p.pid for p in session.keeper.procs]
        for pid, cpu in zip(keepers, session.pinned):
            assert os.sched_getscheduler(pid) == os.SCHED_IDLE
            assert os.sched_getaffinity(pid) == {cpu}
            assert os.getsid(pid) == pid  # a session (and scheduling group) of its own
            if os.path.exists(f"/proc/{pid}/autogroup"):
                assert "nice 19" in open(f"/proc/{pid}/autogroup").read()
        # The trusted worker makes inputs between timed calls: never on a timed CPU.
        trusted = session.trusted.proc.pid
        for tid in os.listdir(f"/proc/{trusted}/task"):
            assert not os.sched_getaffinity(int(tid)) & set(session.pinned)
    finally:
        await asyncio.to_thread(session.close)
        shutil.rmtree(cand.folder, ignore_errors=True)
    for pid in keepers:
        assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split(")")[1].split()[0] == "Z"


@needs_two_cpus
async def test_a_keeper_killed_during_the_evaluation_flags_it(fast_kit, fast_settings):
    """Without a uid of its own a candidate could kill the keeper to change the state the
    following calls start from; the scheduling checks between calls catch it."""
    kit, cand, session = kernel_session(fast_settings, fast_kit, GOOD)
    try:
        await asyncio.to_thread(session.start)
        session.keeper.ready()
        session._check_sched()  # alive: nothing to say
        os.kill(session.keeper.procs[0].pid, signal.SIGKILL)
        session.keeper.procs[0].wait()
        with pytest.raises(WorkerFailure) as caught:
            session._check_sched()
        assert caught.value.flagged and "awake" in caught.value.message
    finally:
        await asyncio.to_thread(session.close)
        shutil.rmtree(cand.folder, ignore_errors=True)


async def test_a_timed_call_on_fresh_inputs_takes_no_page_faults_after_warm_up(fast_kit, fast_settings):
    """The worker reuses its memory from call to call: its shared area stays mapped, and freed
    blocks stay in its heap (MALLOC_MMAP_THRESHOLD_ fixed at 32 MiB, MALLOC_TRIM_THRESHOLD_ at
    1 GiB). A first touch of fresh pages inside the clock would be timed as kernel work."""
    kit, cand, session = kernel_session(fast_settings, fast_kit, BIG_TEMPORARY)
    spec = _workload_specs(kit, "dev", fast_settings)[0][0]

    def faults() -> list[int]:
        side = session.sides[1]
        out = []
        for payload in session._stage(spec, 6):  # fresh inputs for every call
            arena.fill(side.worker, session._layout(side, payload, spec), payload, outputs=side.dps)
            before = _minflt(side.worker.proc.pid)
            session._request(side, {"cmd": "tcall", "calibrate": False, "send": False}, "a call", timed=True)
            out.append(_minflt(side.worker.proc.pid) - before)
        return out

    try:
        await asyncio.to_thread(session.start)
        env = open(f"/proc/{session.sides[1].worker.proc.pid}/environ", "rb").read().split(b"\0")
        assert b"MALLOC_MMAP_THRESHOLD_=33554432" in env and b"MALLOC_TRIM_THRESHOLD_=1073741824" in env
        counts = await asyncio.to_thread(faults)
    finally:
        await asyncio.to_thread(session.close)
        shutil.rmtree(cand.folder, ignore_errors=True)
    # The first two calls may grow the heap. After them, with glibc's defaults, every call took
    # 2,409 faults here (the heap trimmed after each); a few of the interpreter's own are allowed.
    assert max(counts[2:]) < 64, counts
