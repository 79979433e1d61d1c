"""An evaluation cancelled (a client's cancel, a tool timeout) while its session's workers are
being started: the thread that starts them cannot be stopped, so the session it builds must
close itself, or its workers and folders outlive the evaluation (an evaluation with repeats
starts eight of them)."""

from __future__ import annotations

import asyncio
import threading
import time

from evoteam.config import SOURCE_ROOT, Settings
from evoteam.servers.bench.evaluation.core import evaluate_candidate
from evoteam.servers.bench.measurement import session as session_module


async def test_a_session_built_for_a_cancelled_evaluation_closes_itself(tmp_path, monkeypatch):
    built: list = []
    building = threading.Event()
    init = session_module.KernelSession.__init__

    def slow_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        built.append(self)
        building.set()
        time.sleep(1.0)  # the caller is cancelled meanwhile, its workers started

    monkeypatch.setattr(session_module.KernelSession, "__init__", slow_init)
    settings = Settings(db=tmp_path / "kb.db")
    better = (SOURCE_ROOT / "task_kits" / "rmsnorm_cpu" / "examples" / "better.py").read_text()
    task = asyncio.create_task(evaluate_candidate(settings, "rmsnorm_cpu", code=better, repeats=2))
    for _ in range(600):
        if building.is_set() or task.done():
            break
        await asyncio.sleep(0.05)
    assert building.is_set() and not task.done()
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    for _ in range(200):  # the thread finishes building, then closes what it built
        if built:
            break
        await asyncio.sleep(0.05)
    assert built
    session = built[0]
    workers = [s.worker for s in session.sides] + [session.empty.worker]
    assert len(workers) == 7  # the baseline's three processes, the candidate's three, the empty-call worker

    def left() -> list:
        return [w for w in workers if w.proc.poll() is None] + [f for f in session._owned if f.exists()]

    for _ in range(200):  # close() marks the session closed first, then stops workers and removes folders
        if session.closed and not left():
            break
        await asyncio.sleep(0.05)
    assert session.closed and not left()


async def test_an_evaluation_cancelled_while_it_waits_for_the_device_leaves_no_lock_held(tmp_path):
    """Cancelled while another evaluation holds the device: the thread that waits for the lock
    takes it later, when no one is left to give it back; the device must still come free, or every
    later evaluation on it waits for ever. (It does: the abandoned lock's generator is closed, and
    its descriptors with it, once that thread drops it.)"""
    from evoteam.servers.bench.formats.kits import state_dir
    from tests.bench.conftest import lock_is_held
    from tests.bench.test_device_lock import _start, _stop

    settings = Settings(db=tmp_path / "kb.db")
    locks = state_dir(settings) / "locks"
    holder = _start(locks, "cpu", [])
    assert holder.got.wait(10)
    better = (SOURCE_ROOT / "task_kits" / "rmsnorm_cpu" / "examples" / "better.py").read_text()
    task = asyncio.create_task(evaluate_candidate(settings, "rmsnorm_cpu", code=better))
    for _ in range(400):  # until it waits for the device (holding the gate: harness.device_lock)
        if (locks / "cpu-gate.lock").exists() and lock_is_held(locks / "cpu-gate.lock") or task.done():
            break
        await asyncio.sleep(0.05)
    assert lock_is_held(locks / "cpu-gate.lock") and not task.done()
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    _stop(holder)
    for _ in range(100):
        if not lock_is_held(locks / "cpu.lock"):
            break
        await asyncio.sleep(0.05)
    assert not lock_is_held(locks / "cpu.lock")
    done = await asyncio.wait_for(evaluate_candidate(settings, "rmsnorm_cpu", code=better), 120)
    assert done.status == "PASSED", done.message
