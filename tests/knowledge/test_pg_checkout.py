"""The pool hands out a PostgreSQL connection without a round trip to check it, unless the
connection may be dead (its socket readable: the server wrote to it or hung up), and then it is
checked and replaced before use (knowledge/pg.py `_checkout`)."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from evoteam.servers.knowledge import pg

from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.models import RunCreate


@pytest.fixture
def empty_queries(monkeypatch) -> list[str]:
    """The empty statements (the liveness check) the store's connections send, as they go."""
    sent: list[str] = []
    execute = psycopg.AsyncConnection.execute

    async def spying(self, query, *args, **kwargs):
        if query == "":
            sent.append(query)
        return await execute(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.AsyncConnection, "execute", spying)
    return sent


async def test_a_live_connection_goes_out_unchecked_and_one_the_server_ended_is_replaced(postgres_url, empty_queries):
    name = postgres_url.rsplit("/", 1)[1]
    async with LocalKnowledgeStore.open(postgres_url) as store:
        run = await store.start_run(RunCreate(goal="checkout"))
        for _ in range(5):
            assert (await store.get_run(run.id)).goal == "checkout"
        assert empty_queries == []  # five reads, and no round trip spent on checking their connection
        # The server ends every connection of this database (as a restart or an administrator
        # does): each backend writes its termination notice and closes the socket.
        with psycopg.connect(postgres_url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
            for _ in range(500):  # until the backends are gone (no clock decides the outcome)
                if not admin.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s",
                                     (name,)).fetchone()[0]:
                    break
                admin.execute("SELECT pg_sleep(0.01)")
        # The next calls find their connection dead before using it, and get a working one.
        for _ in range(3):
            assert (await store.get_run(run.id)).goal == "checkout"
        assert empty_queries  # the dead connection was checked, not used blind


async def test_a_connection_idle_past_the_threshold_is_checked_although_its_socket_is_quiet(postgres_url, empty_queries,
                                                                                          monkeypatch):
    """A middlebox (load balancer, NAT, firewall) may drop an idle flow without a byte: the quiet
    socket then says nothing, and only a round trip finds out before the caller's statement does.
    The threshold is lowered here so that the test waits a fraction of a second, not 30 s."""
    monkeypatch.setattr(pg, "IDLE_CHECK_S", 0.2)
    async with LocalKnowledgeStore.open(postgres_url) as store:
        run = await store.start_run(RunCreate(goal="idle"))
        assert (await store.get_run(run.id)).goal == "idle"
        assert empty_queries == []  # used moments ago: no check
        await asyncio.sleep(0.5)  # idle past the threshold (what is asserted is the check, not a time)
        assert (await store.get_run(run.id)).goal == "idle"
        assert len(empty_queries) == 1, empty_queries
        assert (await store.get_run(run.id)).goal == "idle"
        assert len(empty_queries) == 1  # and fresh again once used


async def test_every_pooled_connection_asks_for_tcp_keepalives(postgres_url):
    """So that an idle flow carries traffic a middlebox sees, and a dead peer shows as an error:
    read from the connection libpq actually opened, not from our constant."""
    async with pg.PgDatabase(postgres_url) as db:
        async with db.read() as conn:
            options = {o.keyword.decode(): (o.val or b"").decode() for o in conn.raw.pgconn.info}
    assert options["keepalives"] == "1" and 0 < int(options["keepalives_idle"]) <= pg.IDLE_CHECK_S, options
