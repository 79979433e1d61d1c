"""The bench on Ray: a local cluster of a head and two device nodes (all on 127.0.0.1), devices
declared as a custom resource, the CPU kit as the workload. Started once per test run
(tests/support/ray_cluster.py, the ``ray_cluster`` fixture)."""

from __future__ import annotations

import asyncio
import fcntl
import os
import textwrap
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'evoteam[ray]' (.ci/run does)")

from evoteam.config import Settings  # noqa: E402
from evoteam.errors import DomainError  # noqa: E402
from evoteam.servers.bench.scheduling.dispatch import close_backends, evaluate_scheduled  # noqa: E402
from tests.bench.conftest import RMSNORM, _tree_hash, slow_rmsnorm  # noqa: E402
from tests.bench.test_bench_hostile import _hostile  # noqa: E402
from tests.support.ray_cluster import TYPED_KIT, make_kit  # noqa: E402

GOOD = RMSNORM
# Slow enough that four overlap, and that a node can be killed while it runs.
SLOW = slow_rmsnorm(0.4)
@pytest.fixture
def ray_settings(ray_cluster, tmp_path):
    yield Settings(db=tmp_path / "state" / "kb.db", kits_dirs=[ray_cluster.kits], bench_backend="ray")
    close_backends()


async def test_four_evaluations_run_at_once_on_four_devices_each_recorded_once(ray_settings, store):
    codes = [SLOW + f"\nVARIANT = {i}\n" for i in range(4)]
    results = await asyncio.gather(*[evaluate_scheduled(ray_settings, "rmsnorm_ray", code=c, store=store)
                                     for c in codes])
    assert all(r.status == "PASSED" and r.recorded for r in results), [r.message for r in results]
    places = [r.metrics["placement"] for r in results]
    assert len({(p["node"], p["device"]) for p in places}) == 4
    assert len({p["node"] for p in places}) == 2
    assert all(p["backend"] == "ray" and not p["retried"] and p["fingerprint"]["host"] for p in places)
    assert max(p["started_at"] for p in places) < min(p["finished_at"] for p in places), "not all four at once"
    page = await store.list_candidates(results[0].run_id, limit=10)
    assert sorted(c.id for c in page.items) == sorted(r.candidate_id for r in results)
    stored = [await store.get_candidate(c.id) for c in page.items]
    assert sorted(c.code for c in stored) == sorted(codes)


async def test_two_runs_competing_share_the_cluster_fairly(ray_settings):
    bad = "def run(:\n"  # a quick evaluation: only the turn order matters here
    jobs = [evaluate_scheduled(ray_settings, "rmsnorm_ray", code=bad + f"# a{i}\n", run_key="run-A")
            for i in range(8)]
    first = [asyncio.ensure_future(j) for j in jobs]
    await asyncio.sleep(0)
    later = [asyncio.ensure_future(evaluate_scheduled(ray_settings, "rmsnorm_ray", code=bad + f"# b{i}\n",
                                                      run_key="run-B")) for i in range(2)]
    results = await asyncio.gather(*first, *later)
    assert all(r.status == "COMPILE_ERROR" for r in results)
    from evoteam.servers.bench.scheduling.dispatch import backend_for

    grants = [key for key, _ in backend_for(ray_settings).queue.grants]
    assert grants[:4] == ["run-A"] * 4  # the cluster's four devices, taken by the run that came first
    # then B, though it queued behind six more of A's, is served every other turn
    assert grants[4:8] == ["run-A", "run-B", "run-A", "run-B"]


async def test_a_worker_refuses_a_kit_whose_hash_differs(ray_cluster, tmp_path):
    mine = make_kit(tmp_path / "kits")
    (mine / "baseline.py").write_text((mine / "baseline.py").read_text() + "\n# edited here only\n")
    settings = Settings(db=tmp_path / "state" / "kb.db", kits_dirs=[mine.parent], bench_backend="ray")
    try:
        with pytest.raises(DomainError, match="refuses kit rmsnorm_ray: its copy has content hash"):
            await evaluate_scheduled(settings, "rmsnorm_ray", code=GOOD)
    finally:
        close_backends()


async def test_a_kit_that_names_a_gpu_model_runs_only_on_nodes_of_that_type(ray_settings, ray_cluster):
    typed = ray_cluster.nodes[0].node_id  # the one node that declares the accelerator type
    results = await asyncio.gather(*[evaluate_scheduled(ray_settings, TYPED_KIT, code=GOOD + f"\nVARIANT = {i}\n")
                                     for i in range(3)])
    assert all(r.status == "PASSED" for r in results), [r.message for r in results]
    assert {r.metrics["placement"]["node"] for r in results} == {typed}


FLAGGED = ("reads_reference_quietly", "writes_into_kit", "patches_perf_counter", "returns_input",
           "lies_after_correctness")  # as tests/bench/test_bench_hostile.py expects locally


async def test_the_hostile_suite_is_caught_remotely_as_locally(ray_settings, ray_cluster):
    """Every case of the local hostile suite, evaluated on the cluster's nodes: the same status,
    the same message, the same flags, and the nodes' kit folder unchanged."""
    kit = ray_cluster.kits / "rmsnorm_ray"
    before = _tree_hash(kit)
    cases = _hostile(kit)
    results = await asyncio.gather(*[evaluate_scheduled(ray_settings, "rmsnorm_ray", code=textwrap.dedent(code))
                                     for _, _, code in cases.values()])
    for case, result in zip(cases, results):
        status, needle, _ = cases[case]
        assert result.metrics["placement"]["backend"] == "ray"
        assert result.status == status, (case, result.status, result.message)
        assert result.score is None
        text = (result.message or "") + " ".join(w.message or "" for w in result.workloads)
        assert needle.lower() in text.lower(), (case, text)
        if case in FLAGGED:
            assert result.flagged, case
    assert _tree_hash(kit) == before, "a hostile candidate changed the node's kit folder"


def _held_slot(locks: Path, node_id: str) -> bool:
    for path in locks.glob(f"cpu{node_id[:8]}-*.lock"):
        fd = os.open(path, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_UN)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
    return False


async def test_a_node_killed_mid_evaluation_loses_nothing(ray_settings, ray_cluster, store):
    task = asyncio.ensure_future(evaluate_scheduled(ray_settings, "rmsnorm_ray", code=SLOW, store=store))
    victim = None
    for _ in range(600):  # until one node's slot lock is held (by the harness, mid-evaluation)
        await asyncio.sleep(0.1)
        victim = next((n for n in ray_cluster.nodes if _held_slot(ray_cluster.locks, n.node_id)), None)
        if victim is not None or task.done():
            break
    assert victim is not None, "the evaluation never started"
    ray_cluster.kill(victim)
    try:
        result = await task
    finally:
        ray_cluster.restore()  # the cluster is the whole test run's: give the devices back
    place = result.metrics["placement"]
    assert result.status == "PASSED" and result.recorded
    assert place["retried"] is True and place["node"] != victim.node_id
    assert place["first_attempt"]  # what killed the first attempt, in words
    page = await store.list_candidates(result.run_id, limit=10)
    assert [c.id for c in page.items] == [result.candidate_id]  # once: not lost, not twice
    stored = await store.get_candidate(result.candidate_id)
    assert stored.n_measurements == 1 and stored.samples  # the retried attempt's rounds, recorded once
