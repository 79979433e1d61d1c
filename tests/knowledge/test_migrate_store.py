"""`evoteam kb migrate-store SRC DST`: a whole store moves between SQLite and PostgreSQL, every
table verified by row count and content hash, and the moved store works as the old one did."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from evoteam.servers.knowledge.export import collect_bundle
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.errors import Invalid
from evoteam.servers.knowledge.migrate_store import migrate_store
from evoteam.servers.knowledge.models import (
    ArtifactCreate,
    CandidateCreate,
    CostCreate,
    HistoryEntryCreate,
    LearningCreate,
    RunCreate,
)
from evoteam.servers.knowledge.store import Actor
from evoteam.servers.retrieval.models import QueryCreate, RawResult
from evoteam.servers.retrieval.store import QueryResultsCreate, RetrievalStore


async def fill(store) -> str:
    """A store with a row in every kind of table: runs, learnings with a supersede chain,
    history, a text and a binary artifact, candidates with a parent, costs, an idempotency key,
    a token and retrieval documents."""
    run = await store.start_run(RunCreate(goal="moved store", budget_usd=3, x0=1.0, best_known=2.0))
    first = await store.add_learning(LearningCreate(run_id=run.id, text="tiles of 64 win", tags=["tiling"],
                                                    idempotency_key="k1"))
    await store.add_learning(LearningCreate(run_id=run.id, text="tiles of 128 win", supersedes=first.id))
    await store.add_history(HistoryEntryCreate(run_id=run.id, team_version=1, diagnosis="knowledge gap"))
    art = await store.put_artifact(ArtifactCreate(run_id=run.id, name="profile.txt", kind="profile", text="hot loop"))
    await store.put_artifact(ArtifactCreate(run_id=run.id, name="blob.bin", kind="data",
                                            content_base64="AAECAwT/"))
    bench = store.with_actor(store.actor.model_copy(update={"verifier": True}))
    parent = await bench.record_candidate(CandidateCreate(run_id=run.id, code="x = 1", status="PASSED", score=1.5,
                                                          verified=True, artifact_id=art.id))
    await store.record_candidate(CandidateCreate(run_id=run.id, code="x = 2", status="PASSED", score=1.7,
                                                 parent_id=parent.id))
    for role, usd in (("Profiler", 0.1), (None, 0.2)):
        await store.with_actor(store.actor.model_copy(update={"role": role})).record_cost(
            CostCreate(run_id=run.id, usd=usd, source="sdk_result"))
    from evoteam.servers.knowledge import auth

    await auth.add_token(store.db, "alice", None)
    rs = RetrievalStore(store)
    await rs.record_query_results(QueryResultsCreate(
        query=QueryCreate(run_id=run.id, search_id=None, round=1, text="tiling kernels", backend="local",
                          results=1, new_documents=0),
        results=[RawResult(url="https://a.org/tiles", title="Tiles", content="tiling for shared memory",
                           backend="local")]))
    return run.id


@pytest.mark.parametrize("direction", ["sqlite-to-postgres", "postgres-to-sqlite"])
async def test_a_store_moves_between_backends_verified_and_working(direction, tmp_path, postgres_server):
    file, url = tmp_path / "kb.db", postgres_server.new_database()
    source, destination = (file, url) if direction == "sqlite-to-postgres" else (url, file)
    if direction == "postgres-to-sqlite":
        # An empty store file with its schema as the destination.
        async with LocalKnowledgeStore.open(file):
            pass
    actor = Actor(user="tester", client="pytest")
    async with LocalKnowledgeStore.open(source, actor) as store:
        run_id = await fill(store)
        before = (await collect_bundle(store, run_id)).model_dump()
        before_run = await store.get_run(run_id)
        before_hits = await store.search("tiles", run_id=run_id)
    report = await migrate_store(source, destination)
    counts = {t.table: t.rows for t in report.tables}
    assert counts["learnings"] == 2 and counts["candidates"] == 2 and counts["blobs"] == 2
    assert counts["run_counters"] == 1 and counts["run_spend"] == 2 and counts["tokens"] == 1
    assert counts["retrieval_documents"] == 1 and counts["search_index"] >= 7
    async with LocalKnowledgeStore.open(destination, actor) as moved:
        assert (await collect_bundle(moved, run_id)).model_dump() == before
        got = await moved.get_run(run_id)
        assert (got.learnings, got.candidates, got.spent_usd, got.best_score) == \
            (before_run.learnings, before_run.candidates, before_run.spent_usd, before_run.best_score)
        hits = await moved.search("tiles", run_id=run_id)
        assert {h.id for h in hits.items} == {h.id for h in before_hits.items}
        # The idempotency key moved with its row: a retry still replays.
        again = await moved.add_learning(LearningCreate(run_id=run_id, text="tiles of 64 win", tags=["tiling"],
                                                        idempotency_key="k1"))
        assert again.id == before["learnings"][0]["id"]


async def test_a_destination_with_data_is_refused_and_left_alone(tmp_path, postgres_server):
    url = postgres_server.new_database()
    async with LocalKnowledgeStore.open(tmp_path / "a.db") as a:
        await fill(a)
    async with LocalKnowledgeStore.open(url) as b:
        await b.start_run(RunCreate(goal="already here"))
    with pytest.raises(Invalid, match="holds data already"):
        await migrate_store(tmp_path / "a.db", url)
    async with LocalKnowledgeStore.open(url) as b:
        assert (await b.list_runs()).total == 1


def test_the_command_reports_each_table_and_exits_by_the_rules(tmp_path, postgres_server):
    url = postgres_server.new_database()
    env = {**os.environ, "HOME": str(tmp_path)}
    missing = subprocess.run([sys.executable, "-m", "evoteam.cli", "kb", "migrate-store", str(tmp_path / "no.db"),
                              url], capture_output=True, text=True, env=env)
    assert missing.returncode == 3 and "no store at" in missing.stderr and "Traceback" not in missing.stderr

    import asyncio

    async def make():
        async with LocalKnowledgeStore.open(tmp_path / "kb.db") as s:
            await fill(s)

    asyncio.run(make())
    done = subprocess.run([sys.executable, "-m", "evoteam.cli", "kb", "migrate-store", str(tmp_path / "kb.db"), url,
                           "--json"], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["total_rows"] == sum(t["rows"] for t in report["tables"]) > 0
    again = subprocess.run([sys.executable, "-m", "evoteam.cli", "kb", "migrate-store", str(tmp_path / "kb.db"), url],
                           capture_output=True, text=True, env=env)
    assert again.returncode == 2 and "holds data already" in again.stderr
    # Back into a new file, by a process that made no store before: the new file gets every
    # component's schema, not only those the command happened to import.
    back = subprocess.run([sys.executable, "-m", "evoteam.cli", "kb", "migrate-store", url, str(tmp_path / "back.db"),
                           "--json"], capture_output=True, text=True, env=env)
    assert back.returncode == 0, back.stderr
    assert json.loads(back.stdout)["tables"] == report["tables"]


async def test_an_export_bundle_moves_across_backends_unchanged(tmp_path, postgres_server):
    from evoteam.servers.knowledge.export import export_run, import_run

    url = postgres_server.new_database()
    actor = Actor(user="tester", client="pytest")
    async with LocalKnowledgeStore.open(tmp_path / "a.db", actor) as a:
        run_id = await fill(a)
        before = (await collect_bundle(a, run_id)).model_dump()
        await export_run(a, run_id, tmp_path / "tree")
    async with LocalKnowledgeStore.open(url, actor) as b:
        await import_run(b, tmp_path / "tree", trust_scores=True)
        assert (await collect_bundle(b, run_id)).model_dump() == before
        await export_run(b, run_id, tmp_path / "back")
    async with LocalKnowledgeStore.open(tmp_path / "c.db", actor) as c:
        await import_run(c, tmp_path / "back", trust_scores=True)
        assert (await collect_bundle(c, run_id)).model_dump() == before
