"""Several `evoteam serve knowledge --http` replicas on one PostgreSQL database: what one replica
acknowledges, every replica (and every local process on the database) sees; retries may land on
another replica; a token revoked once is revoked everywhere; projects stay apart; a replica
killed with SIGKILL mid-load loses no acknowledged write."""

from __future__ import annotations

import asyncio
import signal
import uuid
from collections.abc import Iterator

import pytest
from mcp import MCPError

from evoteam.servers.knowledge import auth
from evoteam.servers.knowledge.backend import open_database
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from tests.knowledge.conftest import KnowledgeServer, connect, free_port, held, make_token, query_rows


@pytest.fixture(scope="module")
def replicas(postgres_server, tmp_path_factory) -> Iterator[tuple[str, KnowledgeServer, KnowledgeServer]]:
    """Two servers (two HOMEs) on one fresh database."""
    url = postgres_server.new_database()
    make_token(url, "bootstrap", None)  # a server refuses to start without any token
    started = []
    try:
        for name in ("a", "b"):
            home = tmp_path_factory.mktemp(f"replica-{name}")
            started.append(KnowledgeServer(db=url, port=free_port(), home=home).start())
        yield url, started[0], started[1]
    finally:
        for server in started:
            server.kill()


async def test_two_replicas_share_one_store_through_32_writers_and_cross_replica_retries(replicas):
    url, a, b = replicas
    project = f"team-{uuid.uuid4().hex[:6]}"
    tokens = [make_token(url, f"writer{i}", project) for i in range(32)]
    async with connect(a, tokens[0]) as c:
        run_id = (await c.call_tool("start_run", {"goal": "shared across replicas"})).structured_content["id"]

    acknowledged: dict[str, str] = {}

    async def writer(i: int) -> None:
        first, second = (a, b) if i % 2 else (b, a)
        async with connect(first, tokens[i]) as c1, connect(second, tokens[i]) as c2:
            for j in range(4):
                key = f"w{i}-{j}"
                args = {"run_id": run_id, "text": f"writer {i} fact {j}", "idempotency_key": key}
                got = await c1.call_tool("add_learning", args)
                assert not got.is_error, got.content
                # The retry after a lost reply reaches the other replica: it replays, never duplicates.
                again = await c2.call_tool("add_learning", args)
                assert again.structured_content["id"] == got.structured_content["id"]
                acknowledged[key] = got.structured_content["id"]
            cand = await c2.call_tool("record_candidate", {"run_id": run_id, "code": f"x = {i}", "status": "PASSED",
                                                           "score": float(i)})
            assert not cand.is_error, cand.content

    await asyncio.gather(*(writer(i) for i in range(32)))
    assert len(acknowledged) == 32 * 4
    # Both replicas report the same run; a third machine opening the database directly agrees.
    views = []
    for server in (a, b):
        async with connect(server, tokens[1]) as c:
            views.append((await c.call_tool("get_run", {"run_id": run_id})).structured_content)
    assert [(v["learnings"], v["candidates"]) for v in views] == [(128, 32), (128, 32)]
    async with LocalKnowledgeStore.open(url) as store:
        page = await store.list_learnings(run_id, limit=200)
        assert page.total == 128 and {x.id for x in page.items} == set(acknowledged.values())
        assert {x.provenance.user for x in page.items} == {f"writer{i}" for i in range(32)}
        hits = await store.search("writer fact", run_id=run_id, kinds=["learning"], limit=5)
        assert hits.total == 128 and all(h.kind == "learning" for h in hits.items)


async def test_a_token_revoked_once_is_refused_by_every_replica(replicas):
    url, a, b = replicas
    token = make_token(url, "leaver", None)
    for server in (a, b):
        async with connect(server, token) as c:
            assert not (await c.call_tool("list_runs", {})).is_error
    async with open_database(url) as db:
        mine = [t for t in await auth.list_tokens(db) if t.user == "leaver"]
        await auth.revoke_token(db, mine[0].id)
    for server in (a, b):
        with pytest.raises(BaseException):  # the replica answers 401: the client cannot even start
            async with connect(server, token) as c:
                await c.call_tool("list_runs", {})


async def test_two_projects_on_two_replicas_see_nothing_of_each_other(replicas):
    url, a, b = replicas
    p1, p2 = f"p1-{uuid.uuid4().hex[:6]}", f"p2-{uuid.uuid4().hex[:6]}"
    t1, t2 = make_token(url, "alice", p1), make_token(url, "bob", p2)
    async with connect(a, t1) as c:
        run1 = (await c.call_tool("start_run", {"goal": "secret alpha kernel"})).structured_content["id"]
        await c.call_tool("add_learning", {"run_id": run1, "text": "alpha trick: swizzle the tiles"})
    async with connect(b, t2) as c:
        got = await c.call_tool("get_run", {"run_id": run1})
        assert got.is_error
        assert (await c.call_tool("list_runs", {})).structured_content["total"] == 0
        found = (await c.call_tool("search", {"query": "alpha swizzle tiles"})).structured_content
        assert found["total"] == 0
        denied = await c.call_tool("add_learning", {"run_id": run1, "text": "planted"})
        assert denied.is_error
    assert query_rows(url, "SELECT count(*) FROM learnings WHERE run_id = ?", (run1,))[0][0] == 1


async def test_sigkill_of_one_replica_mid_load_loses_and_duplicates_nothing(postgres_server, tmp_path):
    url = postgres_server.new_database()
    token = make_token(url, "crash", None)
    a = KnowledgeServer(db=url, port=free_port(), home=tmp_path / "a").start()
    b = KnowledgeServer(db=url, port=free_port(), home=tmp_path / "b").start()
    acknowledged: dict[str, str] = {}
    attempted: set[str] = set()
    try:
        async with connect(a, token) as c:
            run_id = (await c.call_tool("start_run", {"goal": "crash test"})).structured_content["id"]
        stop = asyncio.Event()

        async def writer(i: int) -> None:
            try:
                async with connect(a, token) as c:
                    for j in range(10_000):
                        if stop.is_set():
                            return
                        key = f"k{i}-{j}"
                        attempted.add(key)
                        r = await c.call_tool("record_candidate", {
                            "run_id": run_id, "code": f"x = {i * 10000 + j}", "status": "PASSED",
                            "score": float(j), "notes": "load " * 50, "idempotency_key": key})
                        if not r.is_error:
                            acknowledged[key] = r.structured_content["id"]
            except BaseException:  # the replica died under us: expected
                return

        tasks = [asyncio.create_task(writer(i)) for i in range(4)]
        while len(acknowledged) < 40:
            await asyncio.sleep(0.02)
        a.kill(signal.SIGKILL)
        stop.set()
        await asyncio.wait(tasks, timeout=30)
        # Every write the clients began is retried on the surviving replica with its key.
        async with connect(b, token) as c:
            for key in sorted(attempted):
                i, j = (int(x) for x in key[1:].split("-"))
                r = await c.call_tool("record_candidate", {
                    "run_id": run_id, "code": f"x = {i * 10000 + j}", "status": "PASSED",
                    "score": float(j), "notes": "load " * 50, "idempotency_key": key})
                assert not r.is_error, r.content
                if key in acknowledged:
                    assert r.structured_content["id"] == acknowledged[key]
            run = (await c.call_tool("get_run", {"run_id": run_id})).structured_content
    finally:
        a.kill(signal.SIGKILL)
        b.kill()
    assert run["candidates"] == len(attempted)
    rows = query_rows(url, "SELECT count(*), count(DISTINCT code) FROM candidates WHERE run_id = ?", (run_id,))
    assert rows[0] == (len(attempted), len(attempted))
    indexed = query_rows(url, "SELECT count(*) FROM search_index WHERE kind = 'candidate' AND run_id = ?", (run_id,))
    assert indexed[0][0] == len(attempted)


async def test_a_database_restart_mid_load_loses_and_duplicates_nothing(replicas, postgres_server):
    """PostgreSQL itself is killed (`pg_ctl stop -m immediate`) and started again under two
    replicas at work: writes fail while it is down (as tool errors, or as the JSON-RPC error that
    says the store is down when the token check itself cannot reach it), succeed again once it is
    back, and every acknowledged write is there exactly once."""
    url, a, b = replicas
    project = f"restart-{uuid.uuid4().hex[:6]}"
    token = make_token(url, "restarter", project)
    async with connect(a, token) as c:
        run_id = (await c.call_tool("start_run", {"goal": "restart test"})).structured_content["id"]
    acknowledged: dict[str, str] = {}
    failures = 0
    restarted = asyncio.Event()

    async def writer(i: int) -> None:
        nonlocal failures
        async with connect(a if i % 2 else b, token) as c:
            for j in range(30):
                key = f"r{i}-{j}"
                args = {"run_id": run_id, "text": f"restart fact {i} {j}", "idempotency_key": key}
                for _ in range(400):  # retried with the same key until the database is back
                    try:
                        got = await c.call_tool("add_learning", args)
                    except MCPError as exc:  # the token check could not reach the database
                        assert "PostgreSQL store" in str(exc) and "retry" in str(exc), exc
                        failures += 1
                        await asyncio.sleep(0.05)
                        continue
                    if not got.is_error:
                        acknowledged[key] = got.structured_content["id"]
                        break
                    failures += 1
                    await asyncio.sleep(0.05)
                if j == 10 and i == 0:
                    await asyncio.to_thread(postgres_server.restart)
                    restarted.set()

    await asyncio.gather(*(writer(i) for i in range(4)))
    assert restarted.is_set() and len(acknowledged) == 4 * 30
    rows = query_rows(url, "SELECT id FROM learnings WHERE run_id = ?", (run_id,))
    assert sorted(r[0] for r in rows) == sorted(acknowledged.values())
    async with connect(b, token) as c:
        assert (await c.call_tool("get_run", {"run_id": run_id})).structured_content["learnings"] == 120


async def test_a_store_that_is_down_is_named_in_the_answer_not_a_bare_500(replicas, postgres_server):
    """With the database down, a replica cannot even check a token: it answers 503 with a
    JSON-RPC error naming the store and saying to retry, which the MCP client raises with that
    text; once the database is back the same connection works again."""
    url, a, _ = replicas
    token = make_token(url, "downtime", f"down-{uuid.uuid4().hex[:6]}")
    async with connect(a, token) as c:
        await asyncio.to_thread(postgres_server.stop)
        try:
            with pytest.raises(MCPError) as raised:
                await c.call_tool("start_run", {"goal": "while the store is down"})
        finally:
            await asyncio.to_thread(postgres_server.resume)
        text = str(raised.value)
        assert "PostgreSQL store" in text and "retry" in text and "Traceback" not in text, text
        for _ in range(200):  # the pool reconnects within its own check interval
            try:
                got = await c.call_tool("start_run", {"goal": "after the store is back"})
            except MCPError:
                await asyncio.sleep(0.1)
                continue
            if not got.is_error:
                break
            await asyncio.sleep(0.1)
        assert not got.is_error and got.structured_content["goal"] == "after the store is back"


def test_a_browser_session_opened_on_one_replica_is_known_to_every_replica(replicas):
    """The live pages' login sessions live in the database: signed in on A, the browser is
    signed in on B; signing out on B, or revoking the token, ends it on A too."""
    import httpx

    url, a, b = replicas
    base_a, base_b = a.url.removesuffix("/mcp"), b.url.removesuffix("/mcp")

    def login() -> str:
        r = httpx.post(base_a + "/login", data={"token": make_token(url, "viewer", None)})
        assert r.status_code == 303
        return r.cookies["evoteam_session"]

    session = login()
    assert httpx.get(base_b + "/runs", cookies={"evoteam_session": session}, timeout=60).status_code == 200
    assert httpx.post(base_b + "/logout", cookies={"evoteam_session": session}).status_code == 303
    assert httpx.get(base_a + "/runs", cookies={"evoteam_session": session}, timeout=60).status_code == 401
    # Neither the session id nor the token is stored in the database.
    assert session not in str(query_rows(url, "SELECT * FROM browser_sessions"))

    session = login()
    assert httpx.get(base_b + "/runs", cookies={"evoteam_session": session}, timeout=60).status_code == 200
    for (token_id,) in query_rows(url, "SELECT id FROM tokens WHERE user = 'viewer' AND revoked_at IS NULL"):
        asyncio.run(_revoke(url, token_id))
    for base in (base_a, base_b):
        assert httpx.get(base + "/runs", cookies={"evoteam_session": session}, timeout=60).status_code == 401


async def _revoke(url: str, token_id: str) -> None:
    async with open_database(url) as db:
        await auth.revoke_token(db, token_id)


async def test_a_team_on_three_homes_shares_runs_learnings_and_candidates(replicas, tmp_path):
    """Three machines (three HOMEs): two reach the store through evoteam's own client (the
    `/store` endpoint, as every evoteam server and hook does with EVOTEAM_KNOWLEDGE_URL), each on
    another replica; the third uses the CLI. Each sees what the others wrote, with its author."""
    import json
    import os
    import subprocess
    import sys

    from evoteam.servers.knowledge.models import CandidateCreate, LearningCreate, RunCreate
    from evoteam.servers.knowledge.remote import RemoteKnowledgeStore
    from evoteam.servers.knowledge.store import Actor

    url, a, b = replicas
    project = f"three-{uuid.uuid4().hex[:6]}"
    alice, bob, carol = (make_token(url, name, project) for name in ("alice", "bob", "carol"))
    me = Actor(user="claimed-by-client", client="pytest", default_project=project)
    async with held(RemoteKnowledgeStore.connect(a.url, alice, me)) as home1:
        run = await home1.start_run(RunCreate(goal="three homes", x0=1.0, best_known=2.0))
        await home1.add_learning(LearningCreate(run_id=run.id, text="alice: unroll the inner loop by four"))
        first = await home1.record_candidate(CandidateCreate(run_id=run.id, code="x = 1", status="PASSED",
                                                             score=1.2))
    async with held(RemoteKnowledgeStore.connect(b.url, bob, me)) as home2:
        assert (await home2.get_run(run.id)).learnings == 1
        await home2.add_learning(LearningCreate(run_id=run.id, text="bob: the unrolled loop spills registers"))
        await home2.record_candidate(CandidateCreate(run_id=run.id, code="x = 2", status="PASSED", score=1.3,
                                                     parent_id=first.id))
    env = {**os.environ, "HOME": str(tmp_path / "home3"), "EVOTEAM_KNOWLEDGE_URL": b.url, "EVOTEAM_TOKEN": carol}
    env.pop("EVOTEAM_DB", None)

    def cli(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "evoteam.cli", "kb", *args], capture_output=True, text=True,
                              env=env, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout

    runs = json.loads(cli("runs", "--json"))["items"]
    assert [(r["id"], r["learnings"], r["candidates"]) for r in runs] == [(run.id, 2, 2)]
    learnings = json.loads(cli("learnings", run.id, "--json"))
    items = learnings["items"] if isinstance(learnings, dict) else learnings
    assert {(x["provenance"]["user"], x["text"].split(":")[0]) for x in items} == {("alice", "alice"), ("bob", "bob")}
    assert "spills" in cli("search", "unrolled registers", "--run", run.id)
