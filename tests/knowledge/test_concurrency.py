"""Many writers over HTTP at once, retries, and a server killed with SIGKILL mid-load."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import uuid

import pytest

from evoteam.servers.knowledge.local import LocalKnowledgeStore
from tests.knowledge.conftest import KnowledgeServer, connect, free_port, make_token


async def test_sixteen_concurrent_http_writers_lose_and_duplicate_nothing(knowledge_server: KnowledgeServer):
    project = f"conc-{uuid.uuid4().hex[:6]}"
    tokens = [make_token(knowledge_server.db, f"writer{i}", project) for i in range(16)]
    async with connect(knowledge_server, tokens[0]) as c:
        run_id = (await c.call_tool("start_run", {"goal": "concurrency"})).structured_content["id"]

    acknowledged: dict[str, str] = {}

    async def writer(i: int) -> None:
        async with connect(knowledge_server, tokens[i]) as c:
            for j in range(12):
                key = f"w{i}-{j}"
                args = {"run_id": run_id, "text": f"writer {i} fact {j}", "idempotency_key": key}
                first = await c.call_tool("add_learning", args)
                assert not first.is_error, first.content
                # A retry of the same write, as a client would after a lost reply.
                again = await c.call_tool("add_learning", args)
                assert again.structured_content["id"] == first.structured_content["id"]
                acknowledged[key] = first.structured_content["id"]

    await asyncio.gather(*(writer(i) for i in range(16)))
    assert len(acknowledged) == 16 * 12
    async with LocalKnowledgeStore.open(knowledge_server.db) as store:
        page = await store.list_learnings(run_id, limit=200)
        rest = await store.list_learnings(run_id, limit=200, cursor=page.next_cursor)
        stored = {item.id for item in page.items + rest.items}
        assert page.total == 16 * 12
        assert stored == set(acknowledged.values())
        users = {item.provenance.user for item in page.items + rest.items}
        assert users == {f"writer{i}" for i in range(16)}


async def test_sigkill_mid_load_keeps_every_acknowledged_write(tmp_path):
    db = tmp_path / "kb.db"
    token = make_token(db, "crash", None)
    server = KnowledgeServer(db=db, port=free_port(), home=tmp_path).start()
    acknowledged: list[str] = []
    try:
        async with connect(server, token) as c:
            run_id = (await c.call_tool("start_run", {"goal": "crash test"})).structured_content["id"]

        stop = asyncio.Event()

        async def writer(i: int) -> None:
            try:
                async with connect(server, token) as c:
                    for j in range(10_000):
                        if stop.is_set():
                            return
                        r = await c.call_tool("record_candidate", {
                            "run_id": run_id, "code": f"x = {i * 10000 + j}", "status": "PASSED",
                            "score": float(j), "notes": "load " * 50})
                        if not r.is_error:
                            acknowledged.append(r.structured_content["id"])
            except BaseException:  # the server died under us: expected
                return

        tasks = [asyncio.create_task(writer(i)) for i in range(4)]
        while len(acknowledged) < 60:
            await asyncio.sleep(0.02)
        server.kill(signal.SIGKILL)
        stop.set()
        await asyncio.wait(tasks, timeout=30)
    finally:
        server.kill(signal.SIGKILL)

    assert len(acknowledged) >= 60
    server = KnowledgeServer(db=db, port=free_port(), home=tmp_path).start()
    try:
        async with connect(server, token) as c:
            run = (await c.call_tool("get_run", {"run_id": run_id})).structured_content
            assert run["candidates"] >= len(acknowledged)
            for cand_id in acknowledged:
                got = await c.call_tool("get_candidate", {"candidate_id": cand_id})
                assert not got.is_error, cand_id
    finally:
        server.kill()
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("SELECT count(*) FROM search_index WHERE kind = 'candidate'").fetchone()[0] == \
            conn.execute("SELECT count(*) FROM candidates").fetchone()[0]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_a_write_cancelled_at_any_point_leaves_the_store_writable(tmp_path, request, backend):
    """A task cancelled in the middle of a write (a driver shut down, a client gone) must not
    leave the shared writer inside a transaction: the next write works, and the cancelled one is
    either wholly there or wholly absent. Cancelled after 0, 1, 2 ... loop turns, so the cut falls
    before, during and after BEGIN, the insert and COMMIT."""
    from evoteam.servers.knowledge.models import LearningCreate, RunCreate
    from evoteam.servers.knowledge.store import Actor

    where = request.getfixturevalue("postgres_url") if backend == "postgres" else tmp_path / "evoteam.db"
    async with LocalKnowledgeStore.open(where, Actor(user="tester", client="test")) as kb:
        run = await kb.start_run(RunCreate(goal="cancellation"))
        written = 0
        for turns in range(60):
            task = asyncio.create_task(kb.add_learning(LearningCreate(run_id=run.id, text=f"cut {turns}")))
            for _ in range(turns):
                await asyncio.sleep(0)
            task.cancel()
            try:
                await task
                written += 1
            except asyncio.CancelledError:
                pass
            await kb.add_learning(LearningCreate(run_id=run.id, text=f"after {turns}"))
        page = await kb.list_learnings(run.id, limit=200)
        texts = [learning.text for learning in page.items]
    assert sum(t.startswith("after") for t in texts) == 60
    cut = sum(t.startswith("cut") for t in texts)
    assert written <= cut <= 60  # a write cut off after its COMMIT is there although the caller saw a cancel
