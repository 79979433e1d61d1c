"""Tickets: an evaluation that runs on while the caller does something else.

`evaluate(wait=false)` hands the evaluation to a TicketBook and answers at once with a PENDING
Evaluation naming its ticket; `evaluation_result(ticket, wait_s)` answers the same model again,
PENDING with the latest progress while it runs, or the finished evaluation. The evaluation
itself is the one `evaluate` would have run (route.evaluate: here, the pool, Ray or the
evaluation service), recorded in the store when it ends, so a ticket that is dropped loses
nothing but the reply: the candidate is in the store.

Tickets live in the bench server's process: they are gone when it exits (an unfinished one is
cancelled and never recorded). Each belongs to the identity that asked for it (the caller's token
on the evaluation service, the process's own user on a local server); another identity's
`evaluation_result` gets the answer of a ticket that does not exist. A book holds at most
MAX_TICKETS, and one identity at most a quarter of them (one team cannot fill the book of a
shared evaluation service); when either is full, that identity's oldest finished ticket makes
room (never another's, whose reply may not have been read), and with none finished a new one is
refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from evoteam.errors import DomainError
from evoteam.servers.bench.models import Evaluation

MAX_TICKETS = 200
MAX_WAIT_S = 600.0

# The ticket whose evaluation runs in this task, so the queue it waits in can say where it is
# (FairQueue.slot sets `queued_in` on it); unset for evaluations without a ticket.
current_ticket: contextvars.ContextVar[Ticket | None] = contextvars.ContextVar("evoteam_ticket", default=None)


@dataclass(eq=False)
class Ticket:
    id: str
    owner: str
    kit: str
    kind: str = "kernel"  # the kit's kind and direction, for the PENDING answer
    direction: str = "maximize"
    split: str = "dev"
    task: asyncio.Task | None = None
    since: float = field(default_factory=time.time)
    progress: str = "queued"
    fraction: float = 0.0
    # (a callable that says how many evaluations are ahead) while it waits in a fair queue
    queued_in: Callable[[], int] | None = None
    running: bool = False

    def ahead(self, book: TicketBook) -> int:
        """Evaluations that start before this one: its place in the fair queue it waits in, or
        (evaluated here, one at a time per device lock) this book's older unfinished tickets."""
        if self.running or (self.task is not None and self.task.done()):
            return 0
        if self.queued_in is not None:
            return self.queued_in()
        older = [t for t in book.tickets() if t.since < self.since and t.task is not None and not t.task.done()]
        return len(older)

    async def report(self, done: float, total: float, message: str) -> None:
        self.fraction = done / total if total else 0.0
        self.progress = message
        if done > 0:  # measuring has begun (a fair queue says so itself when it grants a slot)
            self.running, self.queued_in = True, None


class TicketBook:
    """The tickets of one bench server."""

    def __init__(self, limit: int = MAX_TICKETS, per_owner: int | None = None):
        self.limit = limit
        self.per_owner = per_owner or max(1, limit // 4)
        self._tickets: OrderedDict[str, Ticket] = OrderedDict()

    def tickets(self) -> list[Ticket]:
        return list(self._tickets.values())

    def submit(self, owner: str, ticket: Ticket,
               evaluate: Callable[[Callable[[float, float, str], Awaitable[None]]], Awaitable[Evaluation]]) -> Ticket:
        """Start ``evaluate(progress)`` in the background for ``owner`` under ``ticket`` (its kit
        facts filled in; id and owner are set here) and return it."""
        self._make_room(owner)
        ticket.id, ticket.owner = "tkt_" + secrets.token_hex(8), owner

        async def body() -> Evaluation:
            current_ticket.set(ticket)
            return await evaluate(ticket.report)

        # A context of its own: current_ticket is this ticket's there and nowhere else.
        ticket.task = asyncio.get_running_loop().create_task(body(), context=contextvars.copy_context())
        ticket.task.add_done_callback(_consume)
        self._tickets[ticket.id] = ticket
        return ticket

    def _make_room(self, owner: str) -> None:
        own = [t for t in self._tickets.values() if t.owner == owner]
        if len(self._tickets) < self.limit and len(own) < self.per_owner:
            return
        for ticket in own:  # oldest first
            if ticket.task is not None and ticket.task.done():
                del self._tickets[ticket.id]
                return
        if len(own) >= self.per_owner:
            raise DomainError(f"{len(own)} of your evaluations are already running on tickets; wait for some "
                              "(evaluation_result) before starting more")
        raise DomainError(f"{self.limit} evaluations are already running on tickets on this bench server; "
                          "wait for some (evaluation_result), or evaluate with wait=true")

    def find(self, owner: str, ticket_id: str) -> Ticket:
        ticket = self._tickets.get(ticket_id)
        if ticket is None or not secrets.compare_digest(ticket.owner.encode(), owner.encode()):
            # The same answer for a ticket of another identity as for one that never existed.
            # An evaluation still running when its server stopped died with it, unrecorded (mp53 was
            # sent to the store for a candidate that was never there).
            raise DomainError(f"no ticket {ticket_id!r} of yours on this bench server (tickets last as long "
                              "as the server process, and an evaluation still running when it stopped was not "
                              "recorded); a finished one is in the store (knowledge.best_candidates), else "
                              "evaluate again")
        return ticket

    async def result(self, owner: str, ticket_id: str, wait_s: float = 0.0) -> Evaluation:
        """The finished evaluation, or (still running after ``wait_s``) a PENDING one saying where
        it is. An evaluation that failed answers its error, as `evaluate` would have."""
        ticket = self.find(owner, ticket_id)
        task = ticket.task
        assert task is not None
        if not task.done() and wait_s > 0:
            await asyncio.wait({task}, timeout=min(wait_s, MAX_WAIT_S))  # never cancels the evaluation
        if not task.done():
            return self.pending(ticket)
        if task.cancelled():
            raise DomainError(f"ticket {ticket_id}'s evaluation was cancelled (the server is shutting down); "
                              "nothing was recorded")
        exc = task.exception()
        if exc is not None:
            # Asked again and again, the same exception must not carry every earlier raise's frames.
            raise exc.with_traceback(None)
        return task.result()

    def pending(self, ticket: Ticket) -> Evaluation:
        """A ticket's state as the Evaluation model: status PENDING, no score yet."""
        ahead = ticket.ahead(self)
        where = ticket.progress if ticket.running else f"queued, {ahead} evaluation(s) ahead"
        return Evaluation(kit=ticket.kit, kind=ticket.kind, split=ticket.split, status="PENDING", score=None,
                          direction=ticket.direction, passed=0, total=0, workloads=[], ticket=ticket.id,
                          queue_position=ahead, progress=round(ticket.fraction, 3),
                          message=f"{where}; ask evaluation_result('{ticket.id}', wait_s=...) for the result",
                          wall_s=round(time.time() - ticket.since, 3))

    async def close(self) -> None:
        """Cancel what still runs (nothing of it is recorded) and forget every ticket."""
        tasks = [t.task for t in self._tickets.values() if t.task is not None and not t.task.done()]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task
        self._tickets.clear()


def _consume(task: asyncio.Task) -> None:
    """Mark a failed ticket's exception as seen: the caller reads it from evaluation_result, and
    asyncio would otherwise log it as never retrieved."""
    if not task.cancelled():
        task.exception()
