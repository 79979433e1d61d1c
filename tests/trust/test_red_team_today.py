"""Issue 23, red team of the day's changes: attacks on the warm hook process's handshake, the
stdio line limit, the retrieval tools' blank ids, the HTTP answer to a store failure and the
SQLite writer's cancellation. Each test names the attack; all use real parts (a real warm
process, real pipes, a real HTTP server on 127.0.0.1, real SQLite files, a real MCP client)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import httpx
import pytest

from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.models import LearningCreate, RunCreate
from evoteam.servers.knowledge.store import Actor
from tests.knowledge.conftest import KnowledgeServer, free_port, make_token

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


# ---------------------------------------------------------------- the SQLite writer


async def test_a_write_cancelled_again_and_again_while_it_settles_leaves_the_store_writable(tmp_path):
    """A caller that cancels a write over and over (a task group tearing down, a client
    retrying) while its BEGIN, COMMIT or ROLLBACK settles. Holding back only the first
    cancellation released the write lock with a ROLLBACK still queued, which then closed the
    connection under the next writer: every later write failed ('no active connection')."""
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="tester", client="test")) as kb:
        run = await kb.start_run(RunCreate(goal="cancel storm"))
        failures = []
        for turns in range(40):
            task = asyncio.create_task(kb.add_learning(LearningCreate(run_id=run.id, text=f"cut {turns}")))
            for _ in range(turns):
                await asyncio.sleep(0)
            while not task.done():  # cancelled on every turn of the loop until it is over
                task.cancel()
                await asyncio.sleep(0)
            try:
                await task
            except asyncio.CancelledError:
                pass
            except Exception as exc:  # noqa: BLE001 - any failure of the cut write is the finding
                failures.append(f"cut {turns}: {exc!r}")
            try:
                await kb.add_learning(LearningCreate(run_id=run.id, text=f"after {turns}"))
            except Exception as exc:  # noqa: BLE001
                failures.append(f"after {turns}: {exc!r}")
        texts = [learning.text for learning in (await kb.list_learnings(run.id, limit=200)).items]
    assert failures == []
    assert sum(text.startswith("after") for text in texts) == 40


# ---------------------------------------------------------------- the HTTP answer to a store failure


def test_an_unauthenticated_caller_of_a_damaged_store_learns_nothing_about_the_server(tmp_path: Path):
    """The 503 for a store failure is sent before the caller's token is checked (that check is
    what failed), so anyone who can reach the port gets it with any bearer. It used to carry the
    failure's own line: the store's path on the server and the commands its operator should
    run. It now says only that the store is unavailable and to retry."""
    db = tmp_path / "kb.db"
    make_token(db, "alice", None)
    server = KnowledgeServer(db=db, port=free_port(), home=tmp_path).start()
    try:
        for part in tmp_path.glob("kb.db*"):  # the store is damaged under the running server
            with open(part, "r+b") as out:
                out.write(os.urandom(max(part.stat().st_size, 4096)))
        with httpx.Client(timeout=30) as client:
            answer = client.post(server.url, json=INIT, headers={
                "Authorization": "Bearer evt_not_a_token", "Accept": "application/json, text/event-stream"})
    finally:
        server.kill()
    assert answer.status_code == 503, answer.text
    message = answer.json()["error"]["message"]
    assert "unavailable" in message and "retry" in message, message
    assert str(tmp_path) not in message and "kb.db" not in message and "evoteam " not in message, message
