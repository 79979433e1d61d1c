"""Idempotency keys belong to (project, run, operation): a key reused in another run or
another project is a new write, and the same key with different content is an error."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from evoteam.servers.knowledge.errors import Invalid
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.models import CostCreate, LearningCreate, RunCreate
from evoteam.servers.knowledge.store import Actor


@pytest.fixture
async def stores(tmp_path: Path):
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="alice", project="p1")) as alice:
        yield alice, alice.with_actor(Actor(user="bob", project="p2"))


async def test_a_key_reused_in_another_run_or_project_is_a_new_write(stores):
    alice, bob = stores
    run_a1 = await alice.start_run(RunCreate(goal="a1"))
    run_a2 = await alice.start_run(RunCreate(goal="a2"))
    run_b = await bob.start_run(RunCreate(goal="b"))
    first = await alice.add_learning(LearningCreate(run_id=run_a1.id, text="same", idempotency_key="k"))
    other_run = await alice.add_learning(LearningCreate(run_id=run_a2.id, text="same", idempotency_key="k"))
    other_project = await bob.add_learning(LearningCreate(run_id=run_b.id, text="same", idempotency_key="k"))
    assert len({first.id, other_run.id, other_project.id}) == 3
    assert other_run.run_id == run_a2.id and other_project.run_id == run_b.id
    assert (await bob.list_learnings(run_b.id)).total == 1
    retried = await alice.add_learning(LearningCreate(run_id=run_a1.id, text="same", idempotency_key="k"))
    assert retried.id == first.id and (await alice.list_learnings(run_a1.id)).total == 1


async def test_the_same_key_with_another_payload_is_an_error(stores):
    alice, _ = stores
    run = await alice.start_run(RunCreate(goal="a"))
    await alice.record_cost(CostCreate(run_id=run.id, usd=1.0, source="x", idempotency_key="c"))
    with pytest.raises(Invalid, match="already used in this run for a different cost"):
        await alice.record_cost(CostCreate(run_id=run.id, usd=2.0, source="x", idempotency_key="c"))
    assert (await alice.spend(run.id)).spent_usd == 1.0
    with pytest.raises(Invalid, match="already used in this run for a cost"):
        await alice.add_learning(LearningCreate(run_id=run.id, text="t", idempotency_key="c"))


async def test_keys_of_the_first_schema_move_to_their_run(tmp_path: Path):
    """A store written before keys were scoped keeps answering its retries."""
    path = tmp_path / "kb.db"
    async with LocalKnowledgeStore.open(path, Actor(user="alice")) as store:
        run = await store.start_run(RunCreate(goal="old"))
        learning = await store.add_learning(LearningCreate(run_id=run.id, text="old"))
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("DELETE FROM idempotency_keys")
        conn.execute("INSERT INTO idempotency (user, key, kind, ref_id) VALUES ('alice', 'old-key', 'learning', ?)",
                     (learning.id,))
        conn.execute("DELETE FROM schema_versions WHERE component = 'knowledge.idempotency'")
        conn.execute("DROP TABLE idempotency_keys")
    conn.close()
    async with LocalKnowledgeStore.open(path, Actor(user="alice")) as store:
        again = await store.add_learning(LearningCreate(run_id=run.id, text="old", idempotency_key="old-key"))
    assert again.id == learning.id
