"""The write locks on PostgreSQL (pg.py): a write confined to one run waits only for that run's
writers and for store-wide writes; writers of different runs proceed side by side. Whether a
write waits is read from PostgreSQL itself (a backend waiting on an advisory lock), never from a
clock."""

from __future__ import annotations

import asyncio

import pytest

from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.models import LearningCreate, RunCreate
from tests.knowledge.conftest import query_rows
from tests.support.polling import wait_until

pytest.importorskip("psycopg", reason="psycopg is not installed (pip install 'evoteam[postgres]')")


def advisory_waiters(url: str) -> int:
    """How many connections to this database wait on an advisory lock now."""
    (n,) = query_rows(url, "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                           "WHERE l.locktype = 'advisory' AND NOT l.granted AND a.datname = current_database()")[0]
    return n


async def waits_for(url: str, task: asyncio.Task) -> bool:
    """Whether `task` sits waiting on an advisory lock (polled off the event loop, so the task runs)."""
    return await asyncio.to_thread(wait_until, lambda: advisory_waiters(url) > 0 or task.done(), 30) \
        and not task.done()


@pytest.fixture
async def held_run(postgres_url):
    """A store with two runs, and a task holding run `a`'s write lock until told to let go."""
    async with LocalKnowledgeStore.open(postgres_url) as store:
        a = await store.start_run(RunCreate(goal="a"))
        b = await store.start_run(RunCreate(goal="b"))
        holding, release = asyncio.Event(), asyncio.Event()

        async def hold() -> None:
            async with store.db.write(scope=a.id):
                holding.set()
                await release.wait()

        holder = asyncio.create_task(hold())
        await holding.wait()
        try:
            yield store, a, b, release
        finally:
            release.set()
            await holder


async def test_another_runs_write_goes_ahead_while_a_run_is_being_written(held_run, postgres_url):
    store, a, b, release = held_run
    # With one store-wide lock this would wait for run a's writer, which never lets go here.
    done = await asyncio.wait_for(store.add_learning(LearningCreate(run_id=b.id, text="b goes ahead")), 60)
    assert done.run_id == b.id
    assert advisory_waiters(postgres_url) == 0


async def test_the_same_runs_write_waits_and_then_lands(held_run, postgres_url):
    store, a, b, release = held_run
    second = asyncio.create_task(store.add_learning(LearningCreate(run_id=a.id, text="a waits its turn")))
    assert await waits_for(postgres_url, second)
    release.set()
    assert (await asyncio.wait_for(second, 60)).run_id == a.id
    assert (await store.get_run(a.id)).learnings == 1


async def test_a_store_wide_write_waits_for_the_run_writer(held_run, postgres_url):
    store, a, b, release = held_run
    new_run = asyncio.create_task(store.start_run(RunCreate(goal="store-wide")))
    assert await waits_for(postgres_url, new_run)
    release.set()
    assert (await asyncio.wait_for(new_run, 60)).goal == "store-wide"


async def test_concurrent_writers_of_several_runs_keep_every_rule(postgres_url):
    """With writers serialised per run, not per store: retries racing with their first write,
    supersedes racing for one learning and identical code racing to be recorded still give one
    row per key, one winner, one pooled candidate, and counters equal to the rows."""
    from evoteam.servers.knowledge.errors import Invalid
    from evoteam.servers.knowledge.store import Actor
    from tests.knowledge.test_measurements import CODE, measured, rounds

    async with LocalKnowledgeStore.open(postgres_url, Actor(user="w", verifier=True)) as store:
        runs = [await store.start_run(RunCreate(goal=f"run {i}")) for i in range(4)]

        async def write(run_id: str, writer: int, j: int) -> str:
            spec = LearningCreate(run_id=run_id, text=f"writer {writer} fact {j}", idempotency_key=f"{writer}-{j}")
            first, retry = await asyncio.gather(store.add_learning(spec), store.add_learning(spec))
            assert first.id == retry.id
            return first.id

        ids = await asyncio.gather(*(write(r.id, w, j) for r in runs for w in range(6) for j in range(3)))
        assert len(set(ids)) == 4 * 6 * 3
        for r in runs:
            assert (await store.get_run(r.id)).learnings == 18
            assert query_rows(postgres_url, "SELECT count(*) FROM learnings WHERE run_id = ?", (r.id,)) == [(18,)]

        target = ids[0]
        tries = await asyncio.gather(*(store.add_learning(LearningCreate(run_id=runs[0].id, text=f"better {i}",
                                                                         supersedes=target)) for i in range(6)),
                                     return_exceptions=True)
        winners = [t for t in tries if not isinstance(t, Exception)]
        assert len(winners) == 1 and all(isinstance(t, Invalid) for t in tries if t not in winners)
        assert (await store.get_run(runs[0].id)).learnings == 18  # one superseded, one added

        same = await asyncio.gather(*(store.record_candidate(measured(runs[1].id, CODE, {"w1": rounds(3.0, 0.5, seed=i)}))
                                      for i in range(5)))
        assert len({c.id for c in same}) == 1
        (only,) = (await store.list_candidates(runs[1].id)).items
        assert only.n_measurements == 5
