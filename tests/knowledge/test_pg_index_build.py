"""knowledge.search v2 on a PostgreSQL store written before it, while other servers use the store:
the bucketed index is built with CREATE INDEX CONCURRENTLY outside the migration's transaction
(pgschema.py `build_bucket_index`, pg.py `migrate_url`), so writes go on during the build; one
server builds while the others wait; a build killed midway leaves an INVALID index that the next
open drops and builds again; the version moves to 2 only with the swap.

The build is held where PostgreSQL's own rules hold it, never by a clock: CREATE INDEX
CONCURRENTLY waits for the write transactions open on the table when it starts (here: another
server's write left open), and, before marking the index valid, for every transaction whose
snapshot is older than its last one (here: a REPEATABLE READ transaction). The tests read where
it waits from pg_stat_activity and pg_index."""

from __future__ import annotations

import asyncio
import concurrent.futures

import pytest

from evoteam.servers.knowledge import pg, pgschema, pgwords
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.models import LearningCreate, RunCreate
from evoteam.servers.knowledge.pg import migrate_url
from evoteam.servers.knowledge.pgschema import BUCKETED_TSV
from tests.support.polling import wait_until

psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed (pip install 'evoteam[postgres]')")

WAIT_S = 60.0  # the longest a test waits for the build to reach a point before it fails
# The build's statement waiting on a lock (main's plain CREATE INDEX as well, so the tests fail
# there on what they check, not on finding no build).
BUILD = ("FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' "
         "AND query LIKE 'CREATE INDEX%search_index_tsv_v2%'")
HELD_ENTRY = ("INSERT INTO search_index (title, body, filters, kind, ref_id, run_id, project) "
              "VALUES ('observation: ', 'held write about tiles', '', 'learning', 'lrn_held', %s, 'default')")


def query_rows(url: str, sql: str, params: tuple | None = None) -> list[tuple]:
    """Rows of one statement in PostgreSQL's own dialect (`%s`), on a connection of its own."""
    with psycopg.connect(url, autocommit=True) as conn:
        return [tuple(r) for r in conn.execute(sql, params).fetchall()]


def versions(url: str) -> dict[str, int]:
    return dict(query_rows(url, "SELECT component, version FROM schema_versions"))


def as_before_v2(url: str) -> None:
    """Turn the store back into one from before knowledge.search v2 (its index as v1 left it)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP INDEX search_index_tsv")
        conn.execute("CREATE INDEX search_index_tsv ON search_index USING GIN (tsv) WITH (fastupdate = off)")
        conn.execute("UPDATE schema_versions SET version = 1 WHERE component = 'knowledge.search'")


async def old_store(postgres_server, learnings: int = 20) -> tuple[str, str]:
    url = postgres_server.new_database()
    async with LocalKnowledgeStore.open(url) as store:
        run = await store.start_run(RunCreate(goal="old"))
        for i in range(learnings):
            await store.add_learning(LearningCreate(run_id=run.id, text=f"fact {i} about tiles"))
    as_before_v2(url)
    return url, run.id


def build_waits(url: str) -> bool:
    return query_rows(url, f"SELECT count(*) {BUILD}") == [(1,)]


def new_index(url: str) -> tuple | None:
    """search_index_tsv_v2's (oid, ready, valid), or None when there is none."""
    rows = query_rows(url, "SELECT indexrelid::bigint, indisready, indisvalid FROM pg_index "
                           "WHERE indexrelid = to_regclass('search_index_tsv_v2')")
    return rows[0] if rows else None


def searched_through_the_index(url: str, word: str) -> int:
    """Entries matching `word` as found through search_index_tsv alone (no table scan allowed),
    after checking that the index is the bucketed one, valid, and the only one of either name."""
    with psycopg.connect(url, autocommit=True) as conn:
        ((definition, valid),) = conn.execute(
            "SELECT pg_get_indexdef(i.indexrelid), i.indisvalid FROM pg_index i "
            "WHERE i.indexrelid = to_regclass('search_index_tsv')").fetchall()
        assert "'bucket '::text" in definition and valid, definition
        assert conn.execute("SELECT to_regclass('search_index_tsv_v2')").fetchone() == (None,)
        conn.execute("SET enable_seqscan = off")
        sql = f"SELECT count(*) FROM search_index WHERE {BUCKETED_TSV} @@ plainto_tsquery('evoteam', %s)"
        plan = "\n".join(r[0] for r in conn.execute("EXPLAIN " + sql, (word,)))
        assert "search_index_tsv" in plan, plan
        return conn.execute(sql, (word,)).fetchone()[0]


async def test_writes_go_on_while_the_bucketed_index_is_built(postgres_server, monkeypatch):
    """A replica already running writes (add_learning: a learning and its search entry) while
    another server upgrades the store: once while the build waits for a write in progress (its
    index made, not yet ready), once while it waits, index built, to be marked valid. Both writes
    finish during the build, and the index holds them. (Built inside the migration's transaction,
    as before, the build's SHARE lock made every write wait for it: 'busy' after the timeout.)"""
    monkeypatch.setattr(pg, "BUSY_TIMEOUT_MS", 5000)  # a write stuck behind the build fails in 5 s, not 30
    url = postgres_server.new_database()
    async with LocalKnowledgeStore.open(url) as replica:
        run = await replica.start_run(RunCreate(goal="old"))
        for i in range(20):
            await replica.add_learning(LearningCreate(run_id=run.id, text=f"fact {i} about tiles"))
        as_before_v2(url)
        holder = psycopg.connect(url)  # another server's write, its transaction still open
        older = psycopg.connect(url)
        older.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        pool = concurrent.futures.ThreadPoolExecutor(1)
        try:
            holder.execute(HELD_ENTRY, (run.id,))
            build = pool.submit(migrate_url, url)
            assert wait_until(lambda: build_waits(url), WAIT_S)
            await replica.add_learning(LearningCreate(run_id=run.id, text="written while the build waits, tiles"))
            assert new_index(url)[1:] == (False, False)  # the build had not got past the write in progress

            older.execute("SELECT count(*) FROM runs")  # a snapshot older than the build's last one
            holder.commit()
            assert wait_until(lambda: (new_index(url) or (0,))[1:] == (True, False) and build_waits(url), WAIT_S)
            await replica.add_learning(LearningCreate(run_id=run.id, text="written while the index is checked, tiles"))
            assert new_index(url)[1:] == (True, False)
            older.commit()
            build.result(timeout=WAIT_S)
        finally:
            holder.close()
            older.close()
            pool.shutdown(wait=True)
        assert versions(url)["knowledge.search"] == 2
        assert searched_through_the_index(url, "tiles") == 23
        assert (await replica.search("written", run_id=run.id)).total == 2


async def test_a_build_killed_midway_is_dropped_and_built_again_on_the_next_open(postgres_server):
    """The server building the index is cut off midway (its connection ended, as when the server
    or the database dies): the half-made index is left INVALID and the version stays 1; the
    next open drops that index, builds it again, swaps it in and records v2."""
    url, run_id = await old_store(postgres_server)
    holder = psycopg.connect(url)
    pool = concurrent.futures.ThreadPoolExecutor(1)
    try:
        holder.execute(HELD_ENTRY, (run_id,))
        build = pool.submit(migrate_url, url)
        assert wait_until(lambda: build_waits(url), WAIT_S)
        query_rows(url, f"SELECT pg_terminate_backend(pid) {BUILD}")
        with pytest.raises(psycopg.OperationalError):
            build.result(timeout=WAIT_S)
    finally:
        holder.close()
        pool.shutdown(wait=True)
    leftover = new_index(url)
    assert leftover is not None and leftover[2] is False, leftover  # INVALID
    assert versions(url)["knowledge.search"] == 1
    async with LocalKnowledgeStore.open(url) as store:
        assert versions(url)["knowledge.search"] == 2
        assert query_rows(url, "SELECT count(*) FROM pg_class WHERE oid = %s", (leftover[0],)) == [(0,)]
        assert searched_through_the_index(url, "tiles") == 20
        assert (await store.search("tiles", run_id=run_id)).total == 20


async def test_an_index_built_whole_before_a_crash_is_swapped_in_not_built_again(postgres_server, monkeypatch, capsys):
    """A server died after its build finished but before the swap (or its database session
    outlived it and finished the build alone): the next open swaps that valid index in as it is."""
    url, run_id = await old_store(postgres_server)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(pgschema.SEARCH_GIN.format(name="CONCURRENTLY search_index_tsv_v2"))
    built = new_index(url)
    assert built[1:] == (True, True)
    monkeypatch.setattr(pgschema, "_LONG_INDEX", 0)
    capsys.readouterr()
    async with LocalKnowledgeStore.open(url) as store:
        assert "rebuilding" not in capsys.readouterr().err
        assert versions(url)["knowledge.search"] == 2
        assert query_rows(url, "SELECT to_regclass('search_index_tsv')::oid::bigint") == [(built[0],)]
        assert (await store.search("tiles", run_id=run_id)).total == 20


def _open_and_write(url: str, run_id: str, name: str) -> int:
    """A server opening the store: it writes a learning and finds it."""
    async def go() -> int:
        async with LocalKnowledgeStore.open(url) as store:
            await store.add_learning(LearningCreate(run_id=run_id, text=f"written by {name} about tiles"))
            return (await store.search(name, run_id=run_id)).total

    return asyncio.run(go())


async def test_two_servers_opening_an_old_store_at_once_build_once(postgres_server, monkeypatch, capsys):
    """Two servers open a store from before v2 at once: one builds the index, the other waits
    for it (saying so on stderr) instead of building too or failing; both then work, and v2 is
    recorded once."""
    url, run_id = await old_store(postgres_server)
    with psycopg.connect(url, autocommit=True) as conn:  # every write of a version, kept
        conn.execute("CREATE TABLE version_writes (component TEXT, version INTEGER)")
        conn.execute("CREATE FUNCTION note_version() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                     "INSERT INTO version_writes VALUES (NEW.component, NEW.version); RETURN NEW; END $$")
        conn.execute("CREATE TRIGGER note_version AFTER INSERT OR UPDATE ON schema_versions "
                     "FOR EACH ROW EXECUTE FUNCTION note_version()")
    monkeypatch.setattr(pgschema, "_LONG_INDEX", 0)  # the builder says so on stderr
    capsys.readouterr()
    said: list[str] = []

    def heard(text: str) -> bool:
        said.append(capsys.readouterr().err)
        return text in "".join(said)

    holder = psycopg.connect(url)  # holds the first server's build until both are in
    pool = concurrent.futures.ThreadPoolExecutor(2)
    try:
        holder.execute(HELD_ENTRY, (run_id,))
        first = pool.submit(_open_and_write, url, run_id, "alpha")
        assert wait_until(lambda: build_waits(url), WAIT_S)
        second = pool.submit(_open_and_write, url, run_id, "bravo")
        assert wait_until(lambda: heard("another server is upgrading"), WAIT_S)
        holder.commit()
        assert (first.result(timeout=WAIT_S), second.result(timeout=WAIT_S)) == (1, 1)
    finally:
        holder.close()
        pool.shutdown(wait=True)
    heard("")
    err = "".join(said)
    assert err.count("rebuilding the full-text index") == 1 and err.count("another server is upgrading") == 1, err
    assert query_rows(url, "SELECT component, version FROM version_writes") == [("knowledge.search", 2)]
    assert searched_through_the_index(url, "tiles") == 23


async def test_a_server_left_running_on_a_newer_search_index_says_so_once(postgres_server, monkeypatch, capsys):
    """A server of this version still running after another upgraded the store's search index
    past what it knows says so once on stderr (with the pass it reads again in the background),
    and goes on answering."""
    monkeypatch.setattr(pgwords, "SMALL", 1)  # this small store's pass kept, as a big store's is
    monkeypatch.setattr(pgwords, "STATS_TTL_S", -1.0)  # and read again after every search
    url = postgres_server.new_database()
    async with LocalKnowledgeStore.open(url) as store:
        run = await store.start_run(RunCreate(goal="left running"))
        for i in range(3):
            await store.add_learning(LearningCreate(run_id=run.id, text=f"fact {i} about tiles"))
        await store.search("tiles", run_id=run.id)
        await pgwords.settled()
        assert "newer than this server knows" not in capsys.readouterr().err
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("UPDATE schema_versions SET version = 3 WHERE component = 'knowledge.search'")
        for _ in range(3):
            assert (await store.search("tiles", run_id=run.id)).total == 3
            await pgwords.settled()
        err = capsys.readouterr().err
        assert err.count("has knowledge.search schema v3, newer than this server knows (v2)") == 1, err


def _whole_step_as_an_earlier_evoteam(url: str) -> None:
    """knowledge.search v2 as the evoteam before this one did it: the whole step in one
    transaction (its own index built inside it, swapped in, the version recorded)."""
    with psycopg.connect(url) as conn:  # one transaction, committed on leaving
        conn.execute(pgschema.SEARCH_GIN.format(name="search_index_tsv_v2"))
        conn.execute("DROP INDEX search_index_tsv")
        conn.execute("ALTER INDEX search_index_tsv_v2 RENAME TO search_index_tsv")
        conn.execute("UPDATE schema_versions SET version = 2 WHERE component = 'knowledge.search'")


async def test_an_index_built_while_an_earlier_evoteam_did_the_step_is_not_left_behind(postgres_server,
                                                                                      monkeypatch):
    """An earlier evoteam may take the migration lock while this one builds, and do the whole step
    itself: the index this server built is then left over, and every write would update two GIN
    indexes for good. It is dropped; the earlier one's index serves."""
    url, _ = await old_store(postgres_server)
    real = pgschema.build_bucket_index

    def overtaken(conn) -> None:
        _whole_step_as_an_earlier_evoteam(url)  # got in before this server's build started
        real(conn)

    from evoteam.servers.knowledge import migrations

    monkeypatch.setitem(migrations._PG_FORMS["knowledge.search"], 1, migrations.OutsideTransaction(
        overtaken, pgschema.swap_bucket_index, pgschema.discard_bucket_index))
    await asyncio.to_thread(migrate_url, url)
    assert versions(url)["knowledge.search"] == 2
    names = [n for (n,) in query_rows(url, "SELECT indexrelid::regclass::text FROM pg_index "
                                           "WHERE indrelid = 'search_index'::regclass")]
    assert "search_index_tsv_v2" not in names and "search_index_tsv" in names, names


async def test_a_build_ended_as_a_deadlock_is_tried_again(postgres_server, monkeypatch, capfd):
    """An earlier evoteam that takes the migration lock while this one builds builds inside its own
    transaction, and PostgreSQL may end this server's build as a deadlock: the server looks
    again and builds again (or finds the step done), instead of failing to start."""
    from evoteam.servers.knowledge import migrations

    url, _ = await old_store(postgres_server)
    tries = []

    def deadlocked_once(conn) -> None:
        tries.append(1)
        if len(tries) == 1:
            raise psycopg.errors.DeadlockDetected("deadlock detected (as PostgreSQL ends one of two builds)")
        pgschema.build_bucket_index(conn)

    monkeypatch.setitem(migrations._PG_FORMS["knowledge.search"], 1, migrations.OutsideTransaction(
        deadlocked_once, pgschema.swap_bucket_index, pgschema.discard_bucket_index))
    await asyncio.to_thread(migrate_url, url)
    assert len(tries) == 2 and versions(url)["knowledge.search"] == 2
    assert "looking again" in capfd.readouterr().err
    assert searched_through_the_index(url, "tiles") == 20
