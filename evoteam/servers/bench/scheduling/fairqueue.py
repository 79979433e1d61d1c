"""A queue of evaluations waiting for slots, fair across runs.

Waiters are grouped by run key; whenever a slot frees, the next run in turn (round-robin over
the keys that have someone waiting) gets it, so one run's 200 candidates cannot starve another
team. The queue's state is mirrored to a small JSON file per process under the bench's state
folder (its schema and readers: evoteam/evalqueue.py), which `evoteam bench queue` and
`team_status` read.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator
from pathlib import Path

from evoteam.evalqueue import QueueEntry, QueueSnapshot
from evoteam.servers.bench.scheduling.tickets import current_ticket


class _Waiter:
    def __init__(self, run_key: str, kit: str):
        self.run_key, self.kit = run_key, kit
        self.future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self.since = time.time()


class FairQueue:
    """Hands out ``slots`` (names) to waiters, round-robin across run keys."""

    def __init__(self, slots: list[str], backend: str, status_dir: Path | None = None):
        if not slots:
            raise ValueError("a queue needs at least one slot")
        self.backend = backend
        self._free: deque[str] = deque(slots)
        self._slots = list(slots)
        self._waiting: OrderedDict[str, deque[_Waiter]] = OrderedDict()
        self._running: dict[str, QueueEntry] = {}
        self._status = status_dir / f"queue-{os.getpid()}.json" if status_dir else None
        self.grants: list[tuple[str, str]] = []  # (run key, slot) in the order handed out

    def waiting_line(self) -> str:
        """The queue's state in words, for a waiter's progress messages."""
        others = sum(len(q) for q in self._waiting.values()) - 1
        return (f"{len(self._slots) - len(self._free)}/{len(self._slots)} {self.backend} slots busy, "
                f"{max(0, others)} other evaluation(s) waiting")

    @contextlib.asynccontextmanager
    async def slot(self, run_key: str, kit: str = "", progress=None) -> AsyncIterator[str]:
        """Wait for a slot (fairly) and hold it for the block; ``progress`` (core.Progress) hears
        the queue's state when it has to wait, and the slot once granted."""
        waiter = _Waiter(run_key, kit)
        self._waiting.setdefault(run_key, deque()).append(waiter)
        self._hand_out()
        ticket = current_ticket.get()
        try:
            if not waiter.future.done():
                if ticket is not None:  # evaluation_result says where it waits
                    ticket.queued_in = lambda: self.ahead(waiter)
                if progress is not None:
                    await progress(0, 1, f"queued: {self.waiting_line()}")
            name = await waiter.future
        except BaseException:
            if waiter.future.done() and not waiter.future.cancelled():
                self._release(waiter.future.result())  # granted as we were cancelled: give it back
            else:
                self._forget(waiter)
            raise
        if ticket is not None:
            ticket.queued_in, ticket.running = None, True
        self._running[name] = QueueEntry(run_key=run_key, kit=kit, state="running", slot=name, since=time.time())
        self._write()
        try:
            if progress is not None:
                await progress(0, 1, f"evaluating on {name}")
            yield name
        finally:
            self._running.pop(name, None)
            self._release(name)

    def ahead(self, waiter: _Waiter) -> int:
        """How many waiters get a slot before ``waiter``: turns go round the runs in order, one
        evaluation each, so a run with fewer waiting overtakes a run with many."""
        keys = list(self._waiting)
        if waiter.run_key not in self._waiting or waiter not in self._waiting[waiter.run_key]:
            return 0
        mine = keys.index(waiter.run_key)
        depth = list(self._waiting[waiter.run_key]).index(waiter)
        # Runs before ours in the turn order are served depth+1 times before our turn, runs after it depth times.
        return depth + sum(min(len(self._waiting[k]), depth + (1 if j < mine else 0))
                           for j, k in enumerate(keys) if k != waiter.run_key)

    def snapshot(self) -> QueueSnapshot:
        entries = list(self._running.values())
        for key, waiters in self._waiting.items():
            entries += [QueueEntry(run_key=key, kit=w.kit, state="waiting", since=w.since) for w in waiters]
        return QueueSnapshot(pid=os.getpid(), backend=self.backend, slots=self._slots, entries=entries)

    def _forget(self, waiter: _Waiter) -> None:
        queue = self._waiting.get(waiter.run_key)
        if queue and waiter in queue:
            queue.remove(waiter)
            if not queue:
                del self._waiting[waiter.run_key]
        self._write()

    def _release(self, name: str) -> None:
        self._free.append(name)
        self._hand_out()

    def _hand_out(self) -> None:
        while self._free and self._waiting:
            key, queue = next(iter(self._waiting.items()))
            waiter = queue.popleft()
            # The run just served goes to the back of the turn order.
            del self._waiting[key]
            if queue:
                self._waiting[key] = queue
            if waiter.future.cancelled():
                continue
            name = self._free.popleft()
            self.grants.append((key, name))
            waiter.future.set_result(name)
        self._write()

    def _write(self) -> None:
        if self._status is None:
            return
        with contextlib.suppress(OSError):
            self._status.parent.mkdir(parents=True, exist_ok=True)
            tmp = self._status.with_suffix(".tmp")
            tmp.write_text(self.snapshot().model_dump_json())
            os.replace(tmp, self._status)

    def close(self) -> None:
        if self._status is not None:
            with contextlib.suppress(OSError):
                self._status.unlink()
