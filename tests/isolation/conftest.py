"""A shared knowledge server (a real `evoteam serve knowledge --http` process) with two
projects: alice's, seeded with one row of every kind, and bob's, with the same kinds."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from evoteam.servers.knowledge.remote import RemoteKnowledgeStore
from evoteam.servers.knowledge.store import Actor
from tests.isolation.world import SECRET, Ids, seed
from tests.knowledge.conftest import KnowledgeServer, free_port, held, make_token

ALICE, BOB = "p-alice", "p-bob"


@dataclass
class Shared:
    server: KnowledgeServer
    alice: Ids
    mine: Ids  # bob's
    bob: RemoteKnowledgeStore
    bob_token: str

    @property
    def db(self) -> Path:
        return self.server.db


@pytest.fixture
async def shared(tmp_path: Path) -> AsyncIterator[Shared]:
    db = tmp_path / "kb.db"
    alice_token = make_token(db, "alice", ALICE)
    bob_token = make_token(db, "bob", BOB)
    server = KnowledgeServer(db=db, port=free_port(), home=tmp_path).start()
    try:
        async with held(RemoteKnowledgeStore.connect(server.url, alice_token, Actor(user="alice"))) as alice_store:
            alice = await seed(alice_store, SECRET)
        async with held(RemoteKnowledgeStore.connect(server.url, bob_token, Actor(user="bob"))) as bob:
            mine = await seed(bob, "bobword")
            yield Shared(server=server, alice=alice, mine=mine, bob=bob, bob_token=bob_token)
    finally:
        server.kill()
