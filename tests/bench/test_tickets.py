"""Tickets (issue #26): evaluate(wait=false) answers at once, PENDING with a ticket and its place
in the queue; evaluation_result answers the same Evaluation once it has ended, recorded once.
In-process and through the pool, over a real MCP client."""

from __future__ import annotations

import asyncio

import pytest
from mcp import Client

from evoteam.errors import DomainError
from evoteam.servers.bench.scheduling.dispatch import close_backends
from evoteam.servers.bench.scheduling.fairqueue import FairQueue
from evoteam.servers.bench.scheduling.tickets import Ticket, TicketBook
from evoteam.servers.bench.server import build_server
from tests.bench.conftest import RMSNORM, slow_rmsnorm


@pytest.fixture
def pool_settings(fast_settings):
    yield fast_settings.model_copy(update={"bench_backend": "pool", "bench_devices": ["cpu:0"]})
    close_backends()


async def finished(client: Client, ticket: str) -> dict:
    """evaluation_result until it is no longer PENDING (each call waits up to 30 s)."""
    for _ in range(20):
        result = await client.call_tool("evaluation_result", {"ticket": ticket, "wait_s": 30})
        assert not result.is_error, result.content[0].text
        if result.structured_content["status"] != "PENDING":
            return result.structured_content
    raise AssertionError(f"ticket {ticket} did not finish")


async def test_a_ticket_answers_at_once_and_then_the_recorded_evaluation_in_process(fast_settings, store):
    async with Client(build_server(fast_settings, store)) as client:
        first = await client.call_tool("evaluate", {"kit": "rmsnorm_fast", "code": slow_rmsnorm(0.2),
                                                    "wait": False})
        assert not first.is_error, first.content[0].text
        pending = first.structured_content
        assert pending["status"] == "PENDING" and pending["ticket"].startswith("tkt_")
        assert pending["queue_position"] == 0 and pending["score"] is None and not pending["recorded"]
        assert pending["kit"] == "rmsnorm_fast" and pending["kind"] == "kernel"
        done = await finished(client, pending["ticket"])
        again = await client.call_tool("evaluation_result", {"ticket": pending["ticket"]})
    assert done["status"] == "PASSED" and done["recorded"] and done["score"] is not None
    assert done["ticket"] is None
    assert again.structured_content["candidate_id"] == done["candidate_id"]  # read twice, recorded once
    page = await store.list_candidates(done["run_id"], limit=10)
    assert [c.id for c in page.items] == [done["candidate_id"]]


async def test_tickets_through_the_pool_say_their_place_and_each_is_recorded_once(pool_settings, store):
    async with Client(build_server(pool_settings, store)) as client:
        answers = []
        for i in range(2):  # one slot: the second waits behind the first
            r = await client.call_tool("evaluate", {"kit": "rmsnorm_fast", "wait": False,
                                                    "code": slow_rmsnorm(0.3) + f"\nVARIANT = {i}\n"})
            assert not r.is_error, r.content[0].text
            answers.append(r.structured_content)
        assert [a["queue_position"] for a in answers] == [0, 1]
        done = [await finished(client, a["ticket"]) for a in answers]
    assert all(d["status"] == "PASSED" and d["recorded"] for d in done)
    assert all(d["metrics"]["placement"]["backend"] == "pool" for d in done)
    first, second = (d["metrics"]["placement"] for d in done)
    assert first["finished_at"] <= second["started_at"], "one slot ran both at once"
    page = await store.list_candidates(done[0]["run_id"], limit=10)
    assert sorted(c.id for c in page.items) == sorted(d["candidate_id"] for d in done)


async def test_a_failed_evaluation_answers_its_error_and_an_unknown_ticket_is_refused(fast_settings, store):
    async with Client(build_server(fast_settings, store)) as client:
        unknown = await client.call_tool("evaluate", {"kit": "no_such_kit", "code": RMSNORM, "wait": False})
        assert unknown.is_error and "no_such_kit" in unknown.content[0].text  # refused at once, no ticket
        r = await client.call_tool("evaluate", {"kit": "rmsnorm_fast", "code": RMSNORM, "wait": False,
                                                "parent_id": "cand_nosuch"})
        ticket = r.structured_content["ticket"]
        failed = await client.call_tool("evaluation_result", {"ticket": ticket, "wait_s": 60})
        assert failed.is_error and "cand_nosuch" in failed.content[0].text
        missing = await client.call_tool("evaluation_result", {"ticket": "tkt_0123456789abcdef"})
        assert missing.is_error and "no ticket" in missing.content[0].text


async def test_the_book_is_bounded_and_tickets_belong_to_their_owner():
    book = TicketBook(limit=2, per_owner=2)
    gate = asyncio.Event()

    async def slow(progress):
        await gate.wait()
        return "done"

    a = book.submit("user:a", Ticket(id="", owner="", kit="k"), slow)
    book.submit("user:a", Ticket(id="", owner="", kit="k"), slow)
    with pytest.raises(DomainError, match="already running on tickets"):
        book.submit("user:a", Ticket(id="", owner="", kit="k"), slow)
    with pytest.raises(DomainError, match="no ticket"):
        await book.result("user:b", a.id)  # another identity: as if it did not exist
    assert book.pending(book.find("user:a", a.id)).queue_position == 0
    gate.set()
    assert await book.result("user:a", a.id, wait_s=5) == "done"
    third = book.submit("user:a", Ticket(id="", owner="", kit="k"), slow)  # the finished one made room
    assert len(book.tickets()) == 2 and a not in book.tickets() and third in book.tickets()
    await book.close()


async def test_the_fair_queue_counts_the_turns_before_a_waiter():
    queue = FairQueue(["cpu:0"], "test")
    release = asyncio.Event()
    places: dict[str, int] = {}

    async def hold(run: str, tag: str):
        async with queue.slot(run):
            await release.wait()

    holder = asyncio.create_task(hold("a", "held"))
    await asyncio.sleep(0)
    tasks = [asyncio.create_task(hold(run, tag)) for run, tag in (("a", "a1"), ("a", "a2"), ("a", "a3"), ("b", "b1"))]
    await asyncio.sleep(0)
    for run, waiters in queue._waiting.items():  # noqa: SLF001 - the queue's own order
        for i, w in enumerate(waiters):
            places[f"{run}{i + 1}"] = queue.ahead(w)
    # Turns alternate between runs: a1, b1, a2, a3.
    assert places == {"a1": 0, "b1": 1, "a2": 2, "a3": 3}
    release.set()
    await asyncio.gather(holder, *tasks)


async def test_one_identity_cannot_fill_the_book_nor_evict_anothers_results():
    book = TicketBook(limit=4)  # a quarter each: one ticket per identity at a time
    gate = asyncio.Event()

    async def slow(progress):
        await gate.wait()
        return "done"

    async def quick(progress):
        return "quick"

    b = book.submit("user:bø", Ticket(id="", owner="", kit="k"), quick)  # a name that is not ASCII
    assert await book.result("user:bø", b.id, wait_s=5) == "quick"
    book.submit("user:a", Ticket(id="", owner="", kit="k"), slow)
    with pytest.raises(DomainError, match="of your evaluations"):
        book.submit("user:a", Ticket(id="", owner="", kit="k"), slow)
    c = book.submit("user:c", Ticket(id="", owner="", kit="k"), slow)  # others still get theirs
    assert b in book.tickets() and c in book.tickets()  # b's finished reply was not evicted for them
    gate.set()
    await book.close()
