"""`evoteam kb export` / `kb import`: a round trip loses nothing."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evoteam.servers.knowledge.errors import Invalid
from evoteam.servers.knowledge.export import collect_bundle, export_run, import_run
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.models import (
    ArtifactCreate,
    CandidateCreate,
    CostCreate,
    HistoryEntryCreate,
    LearningCreate,
    RunCreate,
    WorkloadResult,
)
from evoteam.servers.knowledge.store import Actor


async def populate(store) -> str:
    run = await store.start_run(RunCreate(goal="minimise overlap", direction="minimize", x0=0.5,
                                          best_known=0.380859, budget_usd=3, kit="erdos"))
    role = store.with_actor(store.actor.model_copy(update={"role": "Profiler", "team_version": 1}))
    art = await role.put_artifact(ArtifactCreate(run_id=run.id, name="profile.txt", text="step 2 dominates"))
    blob = await role.put_artifact(ArtifactCreate(run_id=run.id, name="plot.png",
                                                  content_base64=base64.b64encode(b"\x89PNG\x00\xff").decode()))
    parent = await role.record_candidate(CandidateCreate(
        run_id=run.id, code="def h(x):\n    return x\n", status="PASSED", score=0.45,
        workloads=[WorkloadResult(workload="n=50", status="PASSED", speedup=None)], notes="baseline"))
    await role.record_candidate(CandidateCreate(
        run_id=run.id, artifact_id=blob.id, status="PASSED", score=0.41, parent_id=parent.id,
        documents_used=["doc_a"], metrics={"overlap": 0.41}, cost_usd=0.2))
    first = await role.add_learning(LearningCreate(run_id=run.id, text="smoothing helps", kind="technique",
                                                   evidence=[parent.id, art.id], tags=["smooth"]))
    await role.add_learning(LearningCreate(run_id=run.id, text="smoothing helps below n=100",
                                           kind="technique", supersedes=first.id))
    await store.add_history(HistoryEntryCreate(run_id=run.id, team_version=1, diagnosis="knowledge gap",
                                               design_change="add a Literature Scout"))
    await role.record_cost(CostCreate(run_id=run.id, usd=0.3, source="sdk_result", detail={"turns": 4}))
    return run.id


async def test_round_trip_loses_nothing(tmp_path: Path, new_location):
    async with LocalKnowledgeStore.open(new_location("a.db"), Actor(user="alice", client="t")) as a:
        run_id = await populate(a)
        before = await collect_bundle(a, run_id)
        await export_run(a, run_id, tmp_path / "tree")
    tree = tmp_path / "tree"
    assert {p.name for p in tree.iterdir()} >= {"run.json", "LEARNINGS.md", "HISTORY.md", "artifacts", "candidates"}
    assert "smoothing helps below n=100" in (tree / "LEARNINGS.md").read_text()
    assert "Literature Scout" in (tree / "HISTORY.md").read_text()
    assert any(p.suffix == ".py" for p in (tree / "candidates").iterdir())
    async with LocalKnowledgeStore.open(new_location("b.db"), Actor(user="bob", client="t")) as b:
        await import_run(b, tree)
        after = await collect_bundle(b, run_id)
        # Imported provenance is the original writer's, not the importer's.
        assert after.learnings[0].provenance.user == "alice"
        assert (await b.search("smoothing", run_id=run_id)).total >= 1
        with pytest.raises(Invalid, match="exists already"):
            await import_run(b, tree)
    assert after.model_dump() == before.model_dump()


async def test_export_refuses_a_non_empty_folder(tmp_path: Path):
    async with LocalKnowledgeStore.open(tmp_path / "a.db") as a:
        run_id = await populate(a)
        (tmp_path / "busy").mkdir()
        (tmp_path / "busy" / "keep.txt").write_text("mine")
        with pytest.raises(Invalid, match="not empty"):
            await export_run(a, run_id, tmp_path / "busy")
    assert (tmp_path / "busy" / "keep.txt").read_text() == "mine"


async def test_damaged_export_is_refused_whole(tmp_path: Path, new_location):
    async with LocalKnowledgeStore.open(new_location("a.db")) as a:
        run_id = await populate(a)
        await export_run(a, run_id, tmp_path / "tree")
    art = next(p for p in (tmp_path / "tree" / "artifacts").iterdir() if p.name.endswith("profile.txt"))
    art.write_text("tampered")
    async with LocalKnowledgeStore.open(new_location("b.db")) as b:
        with pytest.raises(Invalid, match="sha256"):
            await import_run(b, tmp_path / "tree")
        assert (await b.list_runs()).total == 0  # nothing half-imported
    (tmp_path / "tree" / "run.json").unlink()
    async with LocalKnowledgeStore.open(tmp_path / "c.db") as c:
        with pytest.raises(Invalid, match="run.json"):
            await import_run(c, tmp_path / "tree")


def test_cli_round_trip(tmp_path: Path):
    env = {**os.environ, "HOME": str(tmp_path), "EVOTEAM_DB": str(tmp_path / "a.db")}
    env.pop("EVOTEAM_KNOWLEDGE_URL", None)

    def cli(*args, db=None, check=True):
        e = dict(env, EVOTEAM_DB=str(db or tmp_path / "a.db"))
        return subprocess.run([sys.executable, "-m", "evoteam.cli", *args], env=e, capture_output=True,
                              text=True, check=check)

    run_id = cli("kb", "start", "a goal", "--x0", "1").stdout.strip()
    assert run_id.startswith("run_")
    out = cli("kb", "export", run_id, str(tmp_path / "tree"))
    assert "exported" in out.stdout
    out = cli("kb", "import", str(tmp_path / "tree"), db=tmp_path / "b.db")
    assert run_id in out.stdout
    assert run_id in cli("kb", "runs", db=tmp_path / "b.db").stdout
    bad = cli("kb", "import", str(tmp_path / "tree"), db=tmp_path / "b.db", check=False)
    assert bad.returncode == 2 and "exists already" in bad.stderr  # exit 2: bad input (evoteam --help) and "Traceback" not in bad.stderr


async def test_an_imported_run_ranks_its_candidates_as_the_store_did(tmp_path: Path, new_location):
    """Import recomputed each candidate's rank from the interval shown, which for a candidate with
    unresolved rounds is wider than its rounds' own: the imported run named another best (review,
    2026-12-03)."""
    bench = Actor(user="alice", client="t", verifier=True)
    async with LocalKnowledgeStore.open(new_location("a.db"), bench) as a:
        run = await a.start_run(RunCreate(goal="g", kit="k", direction="maximize", x0=1.0))
        fast = {"w": [2.4 + i / 100 for i in range(20)]}
        await a.record_candidate(CandidateCreate(run_id=run.id, code="a = 1\n", status="PASSED", score=2.4,
                                                 samples=fast, sample_ranges={"w": ([0.5] * 20, [6.0] * 20)},
                                                 verified=True, code_hash="h1"))
        await a.record_candidate(CandidateCreate(run_id=run.id, code="a = 2\n", status="PASSED", score=1.5,
                                                 samples={"w": [1.5 + i / 1000 for i in range(20)]}, verified=True,
                                                 code_hash="h2"))
        order = [c.id for c in await a.best_candidates(run.id)]
        await export_run(a, run.id, tmp_path / "tree")
    async with LocalKnowledgeStore.open(new_location("b.db"), bench) as b:
        await import_run(b, tmp_path / "tree", trust_scores=True)
        assert [c.id for c in await b.best_candidates(run.id)] == order


async def test_an_untrusted_import_keeps_the_benchs_artifacts_as_claims(tmp_path: Path):
    """A measurement set or a comparison decides version gains, and only the bench may store one;
    a bundle is anyone's file, so unless the importer vouches for it they arrive as claims
    (``claimed_<kind>``), content intact, which nothing reads as the bench's."""
    bench = Actor(user="alice", client="t", verifier=True)
    async with LocalKnowledgeStore.open(tmp_path / "a.db", bench) as a:
        run = await a.start_run(RunCreate(goal="g", kit="k", direction="maximize", x0=1.0))
        for kind in ("measurement_set", "comparison", "file"):
            await a.put_artifact(ArtifactCreate(run_id=run.id, name=f"{kind}.json", kind=kind, text='{"x": 1}'))
        await export_run(a, run.id, tmp_path / "tree")
    for trusted, kinds in ((False, {"claimed_measurement_set", "claimed_comparison", "file"}),
                           (True, {"measurement_set", "comparison", "file"})):
        async with LocalKnowledgeStore.open(tmp_path / f"b{trusted}.db", bench) as b:
            await import_run(b, tmp_path / "tree", trust_scores=trusted)
            items = (await b.list_artifacts(run.id, limit=10)).items
            assert {i.kind for i in items} == kinds
            assert {(await b.get_artifact(i.id)).text for i in items} == {'{"x": 1}'}
