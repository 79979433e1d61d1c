"""A PostgreSQL store whose database runs out of disk (issue 25): the server's answer to a write
it cannot make room for is the error `disk_full` (SQLSTATE 53100, "could not extend file ...: No
space left on device"). A disk or quota cannot be filled without privileges, so the database
itself gives that answer here: a trigger raising 53100 while a one-row table says the disk is
full, on the tables a learning and a run are written to. Everything above it is real: the MCP
server in process, the CLI in a subprocess, the store's pool and transactions.

Checked: one clear line (no traceback, not "unreachable"), CLI exit code 1, reads go on, nothing
acknowledged lost and nothing of the refused write kept (rows, search entries, counters), and the
same call succeeds once space returns, on the same open store, with its idempotency key keeping
one row."""

from __future__ import annotations

import psycopg
import pytest
from mcp import Client

from evoteam.config import load_settings
from evoteam.servers.knowledge.errors import StoreFailure
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.models import LearningCreate
from evoteam.servers.knowledge.server import build_server
from evoteam.servers.knowledge.store import Actor
from tests.knowledge.conftest import held, query_rows
from tests.knowledge.test_store_failures import cli, make_store, one_line_error

# The server's own words for a file it cannot extend, with its SQLSTATE (errcodes.txt: disk_full).
FULL_DISK = """
CREATE TABLE test_disk (full_ boolean NOT NULL);
INSERT INTO test_disk VALUES (false);
CREATE FUNCTION test_disk_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF (SELECT full_ FROM test_disk) THEN
    RAISE EXCEPTION 'could not extend file "base/16384/%": No space left on device', TG_RELID
      USING ERRCODE = 'disk_full', HINT = 'Check free disk space.';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER test_disk_search BEFORE INSERT ON search_index FOR EACH ROW EXECUTE FUNCTION test_disk_refuse();
CREATE TRIGGER test_disk_runs BEFORE INSERT ON runs FOR EACH ROW EXECUTE FUNCTION test_disk_refuse();
"""


def disk(url: str, full: bool) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE test_disk SET full_ = %s", (full,))


def kept(url: str, run_id: str) -> tuple:
    """What the database holds for the run: learnings, their search entries, the counter."""
    return (sorted(r[0] for r in query_rows(url, "SELECT text FROM learnings WHERE run_id = ?", (run_id,))),
            query_rows(url, "SELECT count(*) FROM search_index WHERE run_id = ? AND kind = 'learning'", (run_id,)),
            query_rows(url, "SELECT learnings FROM run_counters WHERE run_id = ?", (run_id,)))


async def test_a_full_database_disk_is_one_line_loses_nothing_and_recovers(postgres_url, tmp_path):
    url = postgres_url
    run_id = await make_store(url)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(FULL_DISK)
    async with LocalKnowledgeStore.open(url, Actor(user="a", client="t")) as store:
        async with held(Client(build_server(load_settings(), store))) as client:
            for i in range(3):  # acknowledged before the disk fills
                done = await client.call_tool("add_learning", {"run_id": run_id, "text": f"fact {i} about tiles",
                                                               "idempotency_key": f"k{i}"})
                assert not done.is_error, done.content
            before = kept(url, run_id)
            assert before == ([f"fact {i} about tiles" for i in range(3)], [(3,)], [(3,)])

            disk(url, full=True)
            refused = await client.call_tool("add_learning", {"run_id": run_id, "text": "fact 3 about warps",
                                                              "idempotency_key": "k3"})
            assert refused.is_error
            text = refused.content[0].text
            assert "out of disk space" in text and "free space" in text and "\n" not in text, text
            assert "Traceback" not in text and "reachable" not in text
            # The learning row went in before its search entry failed: the transaction took it back,
            # and the counter trigger's update with it.
            assert kept(url, run_id) == before
            # Reads go on while the disk is full.
            found = await client.call_tool("search", {"query": "tiles", "run_id": run_id})
            assert not found.is_error and found.structured_content["total"] == 3
            # The CLI: one line on stderr, exit code 1 (an error, not bad input or not found).
            refused_cli = cli(url, "kb", "start", "another goal", home=tmp_path)
            one_line_error(refused_cli, "out of disk space")
            assert refused_cli.returncode == 1
            assert query_rows(url, "SELECT count(*) FROM runs") == [(1,)]

            # Space returns: the same call, on the same open store and server, goes through once.
            disk(url, full=False)
            again = await client.call_tool("add_learning", {"run_id": run_id, "text": "fact 3 about warps",
                                                            "idempotency_key": "k3"})
            assert not again.is_error, again.content
            replay = await client.call_tool("add_learning", {"run_id": run_id, "text": "fact 3 about warps",
                                                             "idempotency_key": "k3"})
            assert replay.structured_content["id"] == again.structured_content["id"]
    assert kept(url, run_id) == ([*before[0], "fact 3 about warps"], [(4,)], [(4,)])
    assert cli(url, "kb", "start", "another goal", home=tmp_path).returncode == 0


async def test_the_store_names_a_full_disk_in_process_too(postgres_url):
    """The store API (what hooks and the CLI call) raises the same one-line StoreFailure."""
    url = postgres_url
    run_id = await make_store(url)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(FULL_DISK)
    disk(url, full=True)
    async with LocalKnowledgeStore.open(url) as store:
        with pytest.raises(StoreFailure, match="out of disk space") as info:
            await store.add_learning(LearningCreate(run_id=run_id, text="refused"))
        assert "\n" not in str(info.value) and "127.0.0.1" in str(info.value)
        disk(url, full=False)
        await store.add_learning(LearningCreate(run_id=run_id, text="kept"))
    assert kept(url, run_id) == (["kept"], [(1,)], [(1,)])
