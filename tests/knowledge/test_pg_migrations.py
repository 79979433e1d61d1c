"""The migration history on PostgreSQL: the same per-component versions as SQLite, applied once
under an advisory lock, forward from any older version, refused from a newer one."""

from __future__ import annotations

import asyncio
import concurrent.futures

import pytest

from evoteam.servers.knowledge import db as sqlite_db
from evoteam.servers.knowledge import pgschema
from evoteam.servers.knowledge.errors import StoreFailure
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.models import CostCreate, LearningCreate, RunCreate
from evoteam.servers.knowledge.pg import migrate_url
from evoteam.servers.knowledge.pgschema import BUCKETED_TSV
from tests.knowledge.conftest import query_rows

psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed (pip install 'evoteam[postgres]')")


def versions(url: str) -> dict[str, int]:
    return dict(query_rows(url, "SELECT component, version FROM schema_versions"))


def test_an_empty_database_gets_every_components_latest_version(postgres_server, tmp_path):
    url = postgres_server.empty_database()
    got = migrate_url(url)
    sqlite_file = tmp_path / "kb.db"
    assert got == versions(url) == sqlite_db.migrate(sqlite_file)  # one history, two backends
    assert set(got) >= {"knowledge", "knowledge.counters", "knowledge.idempotency", "knowledge.measurements",
                        "knowledge.verified", "retrieval", "team"}
    assert migrate_url(url) == got  # opening again changes nothing


def test_replicas_starting_together_migrate_once(postgres_server):
    url = postgres_server.empty_database()
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: migrate_url(url), range(4)))
    assert all(r == results[0] for r in results)
    tables = query_rows(url, "SELECT count(*) FROM pg_tables WHERE tablename = 'learnings'")
    assert tables == [(1,)]


async def test_an_older_database_is_brought_forward_and_its_counters_backfilled(postgres_server):
    url = postgres_server.new_database()
    async with LocalKnowledgeStore.open(url) as store:
        run = await store.start_run(RunCreate(goal="old"))
        for i in range(3):
            await store.add_learning(LearningCreate(run_id=run.id, text=f"fact {i}"))
        await store.record_cost(CostCreate(run_id=run.id, usd=0.5, source="sdk_result"))
    # Turn the database back into one from before the counters component existed.
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP TABLE run_counters, run_spend CASCADE")
        for fn in ("evoteam_counters_runs", "evoteam_counters_candidates", "evoteam_counters_history",
                   "evoteam_counters_learnings", "evoteam_counters_costs"):
            conn.execute(f"DROP FUNCTION {fn}() CASCADE")
        conn.execute("DROP FUNCTION evoteam_bump, evoteam_spend_line")
        conn.execute("DROP INDEX learnings_document, history_newest")
        conn.execute("DELETE FROM schema_versions WHERE component = 'knowledge.counters'")
    async with LocalKnowledgeStore.open(url) as store:
        got = await store.get_run(run.id)
        assert (got.learnings, got.spent_usd) == (3, 0.5)
        await store.add_learning(LearningCreate(run_id=run.id, text="after the upgrade"))
        assert (await store.get_run(run.id)).learnings == 4


async def test_a_database_from_a_newer_evoteam_is_refused_in_one_line(postgres_server):
    url = postgres_server.new_database()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE schema_versions SET version = 99 WHERE component = 'knowledge'")
    with pytest.raises(StoreFailure, match="newer than this evoteam knows") as err:
        async with LocalKnowledgeStore.open(url):
            pass
    assert "\n" not in str(err.value)


async def test_an_unreachable_database_is_one_line_without_the_password():
    url = "postgresql://someone:hunter2@127.0.0.1:9/nowhere"
    with pytest.raises(StoreFailure) as err:
        await asyncio.wait_for(LocalKnowledgeStore.open(url).__aenter__(), 60)
    assert "hunter2" not in str(err.value) and "\n" not in str(err.value)
    assert "postgresql://someone@127.0.0.1:9/nowhere" in str(err.value)


async def test_search_reads_its_gin_index_after_a_burst_of_writes(postgres_server):
    """The full-text indexes keep no GIN pending list (knowledge.search, retrieval.search): right
    after many writes, with no vacuum since, the planner still answers a search from the index
    (with a pending list it scanned the whole table). search_index's is on its tsv and bucket
    lexemes (knowledge.search v2), the expression search matches."""
    url = postgres_server.new_database()
    options = dict(query_rows(url, "SELECT c.relname, array_to_string(c.reloptions, ',') FROM pg_class c "
                                   "WHERE c.relname IN ('search_index_tsv', 'retrieval_documents_fts_tsv')"))
    assert options == {"search_index_tsv": "fastupdate=off", "retrieval_documents_fts_tsv": "fastupdate=off"}
    async with LocalKnowledgeStore.open(url) as store:
        run = await store.start_run(RunCreate(goal="burst"))
        async with store.db.write() as conn:
            await conn.executemany(
                "INSERT INTO search_index (title, body, filters, kind, ref_id, run_id, project) VALUES (?,?,?,?,?,?,?)",
                [("observation: ", f"note {i} about tiles and warps w{i % 500}", "", "learning", f"lrn_{i}", run.id,
                  "default") for i in range(5000)])
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE search_index")  # statistics, as autovacuum gathers them; no vacuum
        plan = "\n".join(r[0] for r in conn.execute(
            f"EXPLAIN SELECT count(*) FROM (SELECT 1 FROM search_index WHERE {BUCKETED_TSV} @@ "
            "plainto_tsquery('evoteam', 'w7') AND run_id = %s LIMIT 1001) AS m", (run.id,)))
    assert "search_index_tsv" in plan, plan


async def test_a_store_with_entries_gets_the_bucketed_search_index_and_says_so(postgres_server, monkeypatch, capsys):
    """knowledge.search v2 on a store written before it: the GIN index rebuilt over the bucket
    lexemes (no pending list still), the entries found as before, and, on a store big enough
    for the rebuild to take a while (here: any), a line before and after on stderr."""
    url = postgres_server.new_database()
    async with LocalKnowledgeStore.open(url) as store:
        run = await store.start_run(RunCreate(goal="old"))
        for i in range(30):
            await store.add_learning(LearningCreate(run_id=run.id, text=f"fact {i} about tiles" + " lattice" * (i == 3)))
    # Turn the database back into one from before knowledge.search v2 (its index as v1 left it).
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP INDEX search_index_tsv")
        conn.execute("CREATE INDEX search_index_tsv ON search_index USING GIN (tsv) WITH (fastupdate = off)")
        conn.execute("UPDATE schema_versions SET version = 1 WHERE component = 'knowledge.search'")
        conn.execute("ANALYZE search_index")
    monkeypatch.setattr(pgschema, "_LONG_INDEX", 0)
    capsys.readouterr()
    async with LocalKnowledgeStore.open(url) as store:
        err = capsys.readouterr().err
        assert "rebuilding the full-text index of up to 30 search entries" in err and "index rebuilt in" in err
        assert versions(url)["knowledge.search"] == 2
        ((definition, options),) = query_rows(
            url, "SELECT pg_get_indexdef(c.oid), array_to_string(c.reloptions, ',') FROM pg_class c "
                 "WHERE c.relname = 'search_index_tsv'")
        assert "'bucket '::text" in definition and options == "fastupdate=off", definition
        page = await store.search("lattice", run_id=run.id)
        assert [h.snippet for h in page.items] == ["fact 3 about tiles [lattice]"] and page.total == 1
        assert (await store.search("tiles", run_id=run.id)).total == 30


async def test_searches_go_on_while_the_bucketed_index_is_built(postgres_server, monkeypatch):
    """knowledge.search v2 builds its index beside the old one: another connection reads the
    table meanwhile (a lock wait would fail it at once), and the table is locked whole only for
    the swap at the end (review of 2026-12-02: dropping the old index first locked it for the
    whole build, and every replica's search waited)."""
    url = postgres_server.new_database()
    async with LocalKnowledgeStore.open(url) as store:
        run = await store.start_run(RunCreate(goal="old"))
        for i in range(20):
            await store.add_learning(LearningCreate(run_id=run.id, text=f"fact {i} about tiles"))
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP INDEX search_index_tsv")
        conn.execute("CREATE INDEX search_index_tsv ON search_index USING GIN (tsv) WITH (fastupdate = off)")
        conn.execute("UPDATE schema_versions SET version = 1 WHERE component = 'knowledge.search'")
    seen: list[int] = []
    execute = psycopg.Connection.execute

    def watching(self, query, *args, **kwargs):
        result = execute(self, query, *args, **kwargs)
        if isinstance(query, str) and query.startswith("CREATE INDEX") and "ON search_index " in query:
            # The new index built, not yet swapped in: read beside it.
            with psycopg.connect(url, autocommit=True) as reader:
                execute(reader, "SET lock_timeout = '300ms'")
                seen.append(execute(reader, "SELECT count(*) FROM search_index WHERE tsv @@ "
                                            "plainto_tsquery('evoteam', 'tiles')").fetchone()[0])
        return result

    monkeypatch.setattr(psycopg.Connection, "execute", watching)
    async with LocalKnowledgeStore.open(url) as store:
        monkeypatch.undo()
        assert versions(url)["knowledge.search"] == 2
        assert (await store.search("tiles", run_id=run.id)).total == 20
    assert seen == [20]
