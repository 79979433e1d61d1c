"""Spare workers (measurement/sparepool.py): a process that evaluates again and again starts its
timed workers ahead, and a spare, once told what it is, is the worker a fresh start would have
given: its own folder, uid and confinement, nothing left of the wait. Real evaluations, real
worker processes."""

from __future__ import annotations

import os
import signal
import textwrap
import time

import pytest

from evoteam.servers.bench.confinement.jail import can_drop_privileges
from evoteam.servers.bench.confinement.workerenv import tuning_env
from evoteam.servers.bench.evaluation.core import evaluate_candidate
from evoteam.servers.bench.measurement import sparepool
from tests.bench.conftest import RMSNORM

# A candidate that reports, by failing to import, where it runs and as whom.
PROBE = textwrap.dedent("""
    import os
    raise RuntimeError("PROBE cwd=%s home=%s tmp=%s uid=%d" % (os.getcwd(), os.environ.get("HOME"),
                                                               os.environ.get("TMPDIR"), os.getuid()))
""")


# Spares are kept only where workers get uids of their own (sparepool.refill).
pytestmark = pytest.mark.skipif(not can_drop_privileges(), reason="workers cannot get uids of their own here "
                                "(not root, or EVOTEAM_BENCH_NO_UID): no spares are kept")


@pytest.fixture(autouse=True)
def spares_kept(request):
    """Spares kept for the test (unless it starts a bench server, which keeps them itself), and
    none left after it."""
    if "own_server" not in request.keywords:
        sparepool.keep()
    yield
    sparepool.keep(False)


def _gone(pid: int, within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except OSError:
            return True
        time.sleep(0.05)
    return False


def _wait_for_spares(n: int, within_s: float = 30.0) -> None:
    deadline = time.monotonic() + within_s
    while sparepool.waiting() < n and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sparepool.waiting() >= n, sparepool.waiting()


def _probe(message: str) -> dict[str, str]:
    text = message[message.index("PROBE "):].splitlines()[0]
    return dict(part.split("=", 1) for part in text.split()[1:5])


async def test_a_spare_gets_its_own_folder_uid_and_confinement(fast_kit, fast_settings):
    first = await evaluate_candidate(fast_settings, str(fast_kit), code=PROBE)
    _wait_for_spares(3)  # the baseline's, the empty calls', the candidate's
    taken = sparepool.taken
    second = await evaluate_candidate(fast_settings, str(fast_kit), code=PROBE)
    assert sparepool.taken - taken == 3
    for e in (first, second):
        assert e.status == "COMPILE_ERROR", e.message
        got = _probe(e.message)
        # Its folder, named by every variable that names one: not the folder it waited in.
        assert got["cwd"] == got["home"] == got["tmp"], got
        assert "evoteam-spares-" not in got["cwd"] and "evoteam-cand-" in got["cwd"], got
        if can_drop_privileges():
            assert got["uid"] != "0", got
    assert _probe(first.message)["cwd"] != _probe(second.message)["cwd"]


async def test_an_evaluation_on_spares_measures_like_one_on_fresh_workers(fast_kit, fast_settings):
    first = await evaluate_candidate(fast_settings, str(fast_kit), code=RMSNORM)
    _wait_for_spares(3)
    taken = sparepool.taken
    second = await evaluate_candidate(fast_settings, str(fast_kit), code=RMSNORM)
    assert sparepool.taken - taken == 3
    assert first.status == second.status == "PASSED", (first.message, second.message)
    assert second.score_interval is not None and len(second.workloads) == len(first.workloads)
    # Confined alike: the same layers, in the same order, fresh or spare.
    layers = [[part for part in e.sandbox.split("+") if not part.startswith("uid")] for e in (first, second)]
    assert layers[0] == layers[1] and "seccomp" in layers[0] and "landlock" in second.sandbox, layers


def test_a_spare_is_taken_only_with_the_environment_it_started_with():
    env = tuning_env(1)
    sparepool.refill(env, 512, 1)
    _wait_for_spares(1)
    assert sparepool.take(tuning_env(2), 512) is None  # other thread counts
    assert sparepool.take(env, 1024) is None  # another memory cap
    w = sparepool.take(env, 512)
    assert w is not None and sparepool.waiting() == 0
    w.close()


def test_a_spare_that_died_is_not_taken():
    env = tuning_env(1)
    sparepool.refill(env, 512, 1)
    _wait_for_spares(1)
    [pid] = sparepool.pids()
    os.kill(pid, signal.SIGKILL)
    assert _gone(pid)
    assert sparepool.take(env, 512) is None
    assert sparepool.waiting() == 0


def test_spares_are_few_and_none_outlive_keeping_them():
    env = tuning_env(1)
    sparepool.refill(env, 512, 10)
    _wait_for_spares(sparepool.MAX_SPARES)
    time.sleep(0.3)  # nothing more is on its way
    assert sparepool.waiting() == sparepool.MAX_SPARES
    pids = sparepool.pids()
    sparepool.keep(False)
    assert all(_gone(pid) for pid in pids)
    assert sparepool.waiting() == 0
    sparepool.refill(env, 512, 1)  # not kept now: nothing starts
    time.sleep(0.3)
    assert sparepool.waiting() == 0


def test_a_process_that_does_not_keep_spares_starts_none():
    sparepool.keep(False)
    started = sparepool.started
    sparepool.refill(tuning_env(1), 512, 3)
    time.sleep(0.3)
    assert sparepool.started == started and sparepool.waiting() == 0


@pytest.mark.own_server
async def test_the_bench_server_keeps_spares_while_it_serves_and_kills_them_after(fast_settings, tmp_path):
    from mcp import Client

    from evoteam.servers.bench.server import build_server
    from evoteam.servers.knowledge.local import LocalKnowledgeStore
    from evoteam.servers.knowledge.store import Actor

    assert not sparepool.kept()
    actor = Actor(user="tester", client="pytest", role="Kernel Engineer", team_version=1)
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", actor) as kb:
        async with Client(build_server(fast_settings, kb)) as client:
            assert sparepool.kept()
            first = await client.call_tool("evaluate", {"kit": "rmsnorm_fast", "code": RMSNORM})
            _wait_for_spares(3)
            taken = sparepool.taken
            second = await client.call_tool("evaluate", {"kit": "rmsnorm_fast", "code": RMSNORM})
            assert not first.is_error and not second.is_error, (first.content, second.content)
            assert second.structured_content["status"] == "PASSED"
            assert sparepool.taken - taken == 3
            _wait_for_spares(3)
            pids = sparepool.pids()
    assert not sparepool.kept() and sparepool.waiting() == 0
    assert pids and all(_gone(pid) for pid in pids)


async def test_no_spare_starts_beside_timed_rounds(fast_kit, fast_settings, monkeypatch):
    """Spares asked for by an evaluation's close (of this or another environment) start while
    nothing is timed: the next evaluation waits for them before its first timed round."""
    from evoteam.servers.bench.measurement.session import KernelSession

    seen: list[int] = []
    measure = KernelSession._measure_sides

    def watched(self, *args, **kwargs):
        seen.append(sparepool.starting())
        return measure(self, *args, **kwargs)

    monkeypatch.setattr(KernelSession, "_measure_sides", watched)
    await evaluate_candidate(fast_settings, str(fast_kit), code=RMSNORM)
    sparepool.refill(tuning_env(3), 700, 3)  # another environment's spares, asked for just now
    assert sparepool.starting() > 0
    e = await evaluate_candidate(fast_settings, str(fast_kit), code=RMSNORM)
    assert e.status == "PASSED", e.message
    assert seen and set(seen) == {0}, seen


async def test_every_side_on_a_spare_is_confined_in_its_own_folder(fast_kit, fast_settings):
    """The baseline and the empty-call worker too (the evaluation reports only a candidate's
    confinement): each taken spare runs under a uid of its own, with seccomp and no new
    privileges, in its side's folder."""
    import shutil

    from tests.bench.conftest import kernel_session

    await evaluate_candidate(fast_settings, str(fast_kit), code=RMSNORM)
    _wait_for_spares(3)
    _kit, cand, session = kernel_session(fast_settings, fast_kit, RMSNORM)
    try:
        session.start()
        assert session.spares_taken == 3
        uids = set()
        for side in session._called():
            pid = side.worker.proc.pid
            status = dict(line.split(":", 1) for line in open(f"/proc/{pid}/status") if ":" in line)
            assert status["Seccomp"].strip() == "2" and status["NoNewPrivs"].strip() == "1", side.label
            uid = status["Uid"].split()[0]
            if can_drop_privileges():
                assert uid != "0", side.label
            uids.add(uid)
            assert "evoteam-spares-" not in os.readlink(f"/proc/{pid}/cwd"), side.label
        if can_drop_privileges():
            assert len(uids) == 3, uids  # no two sides share a uid
    finally:
        session.close()
        shutil.rmtree(cand.folder, ignore_errors=True)


def test_a_stopped_spare_is_not_taken():
    env = tuning_env(1)
    sparepool.refill(env, 512, 1)
    _wait_for_spares(1)
    [pid] = sparepool.pids()
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + 10  # asleep on its pipe, it stops once it next gets a CPU
    while open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "T" and time.monotonic() < deadline:
        time.sleep(0.02)
    assert sparepool.take(env, 512) is None
    assert _gone(pid) and sparepool.waiting() == 0


def test_settle_waits_for_every_spare_still_starting(monkeypatch):
    """settle returns only once no spare is still importing (their start held here until the
    test lets it go), and says so; after its timeout it says they were still starting."""
    import threading

    from evoteam.servers.bench.measurement.workerproc import WorkerProc

    gate = threading.Event()
    ready = WorkerProc.wait_ready

    def held(self, timeout):
        gate.wait(20)
        return ready(self, timeout)

    monkeypatch.setattr(WorkerProc, "wait_ready", held)
    sparepool.refill(tuning_env(1), 512, 2)
    assert sparepool.starting() == 2
    assert sparepool.settle(timeout=0.5) is False and sparepool.starting() == 2
    timer = threading.Timer(0.3, gate.set)
    timer.start()
    assert sparepool.settle(timeout=20) is True
    assert sparepool.starting() == 0 and sparepool.waiting() == 2


def test_keep_off_kills_spares_still_starting(monkeypatch):
    import threading

    from evoteam.servers.bench.measurement.workerproc import WorkerProc

    gate = threading.Event()
    ready = WorkerProc.wait_ready
    monkeypatch.setattr(WorkerProc, "wait_ready", lambda self, timeout: (gate.wait(20), ready(self, timeout)))
    before = sparepool.started
    sparepool.refill(tuning_env(1), 512, 1)
    deadline = time.monotonic() + 10
    while sparepool.started == before and time.monotonic() < deadline:
        time.sleep(0.02)
    [w] = list(sparepool._starting)
    sparepool.keep(False)
    gate.set()
    assert _gone(w.proc.pid)
    assert sparepool.settle(timeout=10) and sparepool.waiting() == 0
