"""The trusted worker kept between evaluations of one process (measurement/trustedpool.py): one
interpreter start fewer per evaluation, and never a worker that failed, died or runs other kit
code. Real evaluations, real worker processes."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import time

import pytest

from evoteam.errors import DomainError
from evoteam.servers.bench.evaluation.core import _workload_specs, evaluate_candidate
from evoteam.servers.bench.measurement import trustedpool
from evoteam.servers.bench.measurement.workerproc import WorkerFailure
from tests.bench.conftest import RMSNORM, kernel_session


@pytest.fixture(autouse=True)
def no_idle_workers():
    """Each test starts and ends with no idle trusted worker (another test's kit copy can have
    the same content, and so the same key)."""
    trustedpool.expire_idle(0.0)
    yield
    trustedpool.expire_idle(0.0)


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def _gone(pid: int, within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if _state(pid) in ("gone", "Z"):
            return True
        time.sleep(0.05)
    return False


async def test_two_evaluations_of_a_kit_start_one_trusted_worker(fast_kit, fast_settings):
    before = trustedpool.started
    first = await evaluate_candidate(fast_settings, str(fast_kit), code=RMSNORM)
    idle = trustedpool.idle_pids()
    second = await evaluate_candidate(fast_settings, str(fast_kit), code=RMSNORM)
    assert first.status == second.status == "PASSED", (first.message, second.message)
    assert trustedpool.started - before == 1
    assert len(idle) == 1 and trustedpool.idle_pids() == idle
    # Idle means stopped, like every worker between requests.
    assert _state(idle[0]) in ("T", "t"), _state(idle[0])


async def test_a_kit_with_other_reference_code_gets_a_worker_of_its_own(fast_kit, fast_settings):
    before = trustedpool.started
    first = await evaluate_candidate(fast_settings, str(fast_kit), code=RMSNORM)
    definition = json.loads((fast_kit / "definition.json").read_text())
    definition["reference"] += "\n# edited\n"
    (fast_kit / "definition.json").write_text(json.dumps(definition))
    second = await evaluate_candidate(fast_settings, str(fast_kit), code=RMSNORM)
    assert first.status == second.status == "PASSED", (first.message, second.message)
    assert trustedpool.started - before == 2


async def test_an_idle_worker_that_died_is_replaced_not_used(fast_kit, fast_settings):
    before = trustedpool.started
    first = await evaluate_candidate(fast_settings, str(fast_kit), code=RMSNORM)
    [pid] = trustedpool.idle_pids()
    os.kill(pid, signal.SIGKILL)
    assert _gone(pid)
    second = await evaluate_candidate(fast_settings, str(fast_kit), code=RMSNORM)
    assert first.status == second.status == "PASSED", (first.message, second.message)
    assert trustedpool.started - before == 2
    assert pid not in trustedpool.idle_pids()


async def test_a_worker_whose_kit_code_failed_is_not_kept(fast_kit, fast_settings):
    definition = json.loads((fast_kit / "definition.json").read_text())
    definition["reference"] += "\n\ndef run(*args):\n    raise ValueError('the reference is broken')\n"
    (fast_kit / "definition.json").write_text(json.dumps(definition))
    before = trustedpool.started
    with pytest.raises(DomainError, match="broken"):
        await evaluate_candidate(fast_settings, str(fast_kit), code=RMSNORM)
    assert trustedpool.started > before
    assert trustedpool.idle_pids() == []


async def test_a_reniced_trusted_worker_is_not_kept(fast_kit, fast_settings):
    """A trusted worker whose scheduling changed during an evaluation (which fails it, flagged)
    is killed rather than handed to the next evaluation."""
    kit, cand, session = kernel_session(fast_settings, fast_kit, RMSNORM)
    try:
        await asyncio.to_thread(session.start)
        spec = _workload_specs(kit, "dev", fast_settings)[0][0]
        v = await asyncio.to_thread(session.check_correctness, spec)
        assert v.status == "PASSED", v.message
        pid = session.trusted.proc.pid
        os.setpriority(os.PRIO_PROCESS, pid, 15)
        with pytest.raises(WorkerFailure, match="scheduling"):
            await asyncio.to_thread(session.measure, spec, v)
    finally:
        await asyncio.to_thread(session.close)
        shutil.rmtree(cand.folder, ignore_errors=True)
    assert trustedpool.idle_pids() == []
    assert _gone(pid)


async def test_at_most_two_idle_workers_wait_and_expiry_kills_them(fast_kit, fast_settings):
    """Three kits in turn (other reference code each): the oldest kit's idle worker is killed so
    that at most MAX_IDLE wait; the idle ones die when they expire."""
    definition = json.loads((fast_kit / "definition.json").read_text())
    first_pid = None
    for k in range(trustedpool.MAX_IDLE + 1):
        edited = dict(definition, reference=definition["reference"] + f"\n# kit variant {k}\n")
        (fast_kit / "definition.json").write_text(json.dumps(edited))
        result = await evaluate_candidate(fast_settings, str(fast_kit), code=RMSNORM)
        assert result.status == "PASSED", result.message
        if first_pid is None:
            [first_pid] = trustedpool.idle_pids()
    idle = trustedpool.idle_pids()
    assert len(idle) == trustedpool.MAX_IDLE and first_pid not in idle
    assert _gone(first_pid)
    trustedpool.expire_idle(0.0)
    assert trustedpool.idle_pids() == [] and all(_gone(pid) for pid in idle)


async def test_a_cancelled_evaluation_does_not_hand_on_a_trusted_worker_still_busy(tmp_path):
    """An evaluation cancelled (a client's cancel, Esc) while its thread waits on the trusted
    worker: the worker is killed, not pooled — pooled, the next evaluation's requests crossed the
    abandoned thread's (a "kit broken" error, or a stall; a review of 2026-12-02)."""
    from evoteam.config import Settings
    from tests.bench.conftest import small_kit

    kit = small_kit(tmp_path / "kits" / "rmsnorm_slowref")
    delay, started = tmp_path / "delay", tmp_path / "reference-started"
    delay.write_text("0")
    definition = json.loads((kit / "definition.json").read_text())
    definition["reference"] = definition["reference"].replace(
        "def run(hidden_states, weight, eps):\n",
        "def run(hidden_states, weight, eps):\n"
        f"    import pathlib, time\n    s = float(pathlib.Path({str(delay)!r}).read_text())\n"
        f"    if s:\n        pathlib.Path({str(started)!r}).touch()\n        time.sleep(s)\n", 1)
    assert "reference-started" in definition["reference"]
    (kit / "definition.json").write_text(json.dumps(definition))
    settings = Settings(db=tmp_path / "state" / "kb.db", kits_dirs=[kit.parent])
    first = await evaluate_candidate(settings, str(kit), code=RMSNORM)
    assert first.status == "PASSED", first.message
    assert len(trustedpool.idle_pids()) == 1
    delay.write_text("5")
    task = asyncio.create_task(evaluate_candidate(settings, str(kit), code=RMSNORM))
    for _ in range(1200):  # until the reference is running in the kept worker
        if started.exists() or task.done():
            break
        await asyncio.sleep(0.05)
    assert started.exists() and not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert trustedpool.idle_pids() == []  # busy when its evaluation closed: killed, not kept
    delay.write_text("0")
    after = await evaluate_candidate(settings, str(kit), code=RMSNORM)
    assert after.status == "PASSED", after.message


async def test_a_kept_worker_starts_each_evaluation_with_a_clean_output_record(tmp_path):
    """What a kept worker printed counts toward one evaluation's output cap, and its tail (shown
    in "kit broken" messages) never carries an earlier evaluation's output into a later one."""
    from evoteam.config import Settings
    from tests.bench.conftest import small_kit

    kit = small_kit(tmp_path / "kits" / "rmsnorm_chatty")
    inputs = (kit / "inputs.py").read_text()
    (kit / "inputs.py").write_text(inputs.replace("    rng = np.random.default_rng(seed)\n",
                                                  "    print('made inputs for seed', seed)\n"
                                                  "    rng = np.random.default_rng(seed)\n", 1))
    settings = Settings(db=tmp_path / "state" / "kb.db", kits_dirs=[kit.parent])
    first = await evaluate_candidate(settings, str(kit), code=RMSNORM)
    assert first.status == "PASSED", first.message
    with trustedpool._lock:
        kept = [lease for lst in trustedpool._idle.values() for _, lease in lst]
    assert len(kept) == 1
    deadline = time.monotonic() + 5
    while kept[0].worker.printed == 0 and time.monotonic() < deadline:  # the drain thread reads it
        time.sleep(0.05)
    assert kept[0].worker.printed > 0 and b"made inputs" in bytes(kept[0].worker.tail)
    _, _, session = kernel_session(settings, kit, RMSNORM)
    try:
        assert session.lease is kept[0] and session.lease.reused
        assert session.trusted.printed == 0 and not session.trusted.tail
    finally:
        session.close()


async def test_a_cancelled_evaluations_thread_gets_no_request_to_its_kept_worker(fast_kit, fast_settings):
    """Cancelled between two requests, an evaluation's thread runs on after its session closed
    and handed the trusted worker back (asyncio cannot stop a thread). Its next request must be
    refused, not sent to the kept worker beside the next evaluation's (the two threads took each
    other's replies: a stall in CI, 2026-12-02)."""
    kit, cand, session = kernel_session(fast_settings, fast_kit, RMSNORM)
    spec = _workload_specs(kit, "dev", fast_settings)[0][0]
    try:
        await asyncio.to_thread(session.start)
        v = await asyncio.to_thread(session.check_correctness, spec)
        assert v.status == "PASSED", v.message
    finally:
        await asyncio.to_thread(session.close)
        shutil.rmtree(cand.folder, ignore_errors=True)
    [pid] = trustedpool.idle_pids()  # idle between requests: kept
    kept = session.trusted
    with pytest.raises(RuntimeError, match="closed"):
        await asyncio.to_thread(session._stage, spec, 1)  # what the abandoned thread does next
    assert kept.in_flight == 0 and _state(pid) in ("T", "t")
    result = await evaluate_candidate(fast_settings, str(fast_kit), code=RMSNORM)
    assert result.status == "PASSED", result.message
    assert trustedpool.idle_pids() == [pid]  # the next evaluation had it, undisturbed


async def test_a_session_closed_while_its_trusted_worker_is_in_use_does_not_keep_it(fast_kit, fast_settings):
    kit, cand, session = kernel_session(fast_settings, fast_kit, RMSNORM)
    try:
        await asyncio.to_thread(session.start)
        pid = session.trusted.proc.pid
        with session._trusted_lock:  # another thread is in a request to it
            await asyncio.to_thread(session.close)
    finally:
        shutil.rmtree(cand.folder, ignore_errors=True)
    assert trustedpool.idle_pids() == []
    assert _gone(pid)


def test_a_session_whose_trusted_worker_cannot_start_leaves_no_folders(fast_kit, fast_settings, monkeypatch):
    """The baseline's two scratch folders are made before the trusted worker is leased: when
    the lease fails, they go too."""
    import tempfile
    from pathlib import Path

    def refused(*args, **kwargs):
        raise OSError("no memory for a staging area")

    def baseline_folders() -> set[str]:
        return {p.name for p in Path(tempfile.gettempdir()).glob("evoteam-baseline-*")}

    before = baseline_folders()
    monkeypatch.setattr(trustedpool, "lease", refused)
    with pytest.raises(OSError, match="staging area"):
        kernel_session(fast_settings, fast_kit, RMSNORM)
    assert baseline_folders() - before == set()  # none of its own left (a sweep may take older ones)
