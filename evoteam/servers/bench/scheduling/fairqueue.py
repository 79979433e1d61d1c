"""A queue of evaluations waiting for slots, fair across runs.

Waiters are grouped by run key; whenever a slot frees, the next run in turn (round-robin over
the keys that have someone waiting) gets it, so one run's 200 candidates cannot starve another
team. The queue's state is mirrored to a small JSON file per process under the bench's state
folder, which `evoteam bench queue` reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator
from pathlib import Path

from pydantic import BaseModel, Field


class QueueEntry(BaseModel):
    run_key: str
    kit: str
    state: str  # waiting | running
    slot: str | None = None
    since: float


class QueueSnapshot(BaseModel):
    """One process's queue: its slots and who waits or runs."""

    pid: int
    backend: str
    slots: list[str]
    entries: list[QueueEntry] = Field(default_factory=list)


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
        try:
            if progress is not None and not waiter.future.done():
                await progress(0, 1, f"queued: {self.waiting_line()}")
            name = await waiter.future
        except BaseException:
            if waiter.future.done() and not waiter.future.cancelled():
                self._release(waiter.future.result())  # granted as we were cancelled: give it back
            else:
                self._forget(waiter)
            raise
        self._running[name] = QueueEntry(run_key=run_key, kit=kit, state="running", slot=name, since=time.time())
        self._write()
        try:
            if progress is not None:
                await progress(0, 1, f"evaluating on {name}")
            yield name
        finally:
            self._running.pop(name, None)
            self._release(name)

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


def read_queues(status_dir: Path) -> list[QueueSnapshot]:
    """Every live process's queue (files of processes that are gone are skipped)."""
    found = []
    for path in sorted(status_dir.glob("queue-*.json")):
        try:
            snap = QueueSnapshot.model_validate(json.loads(path.read_text()))
            os.kill(snap.pid, 0)
        except (OSError, ValueError):
            continue
        found.append(snap)
    return found


class QueueSummary(BaseModel):
    """One run's evaluations in this host's pool and Ray queues (team_status shows it)."""

    running: int = Field(description="this run's evaluations running now")
    waiting: int = Field(description="this run's evaluations waiting for a slot")
    slots: int = Field(description="slots of every live queue on this host")
    busy: int = Field(description="slots busy with any run's evaluations")
    others_waiting: int = Field(description="other runs' evaluations waiting")
    running_on: list[str] = Field(default_factory=list, description="slots running this run's evaluations")


def summarise(status_dir: Path, run_key: str) -> QueueSummary | None:
    """``run_key``'s share of every live queue under ``status_dir``; None when no queue is live."""
    queues = read_queues(status_dir)
    if not queues:
        return None
    mine = [e for q in queues for e in q.entries if e.run_key == run_key]
    others = [e for q in queues for e in q.entries if e.run_key != run_key]
    return QueueSummary(running=sum(e.state == "running" for e in mine), waiting=sum(e.state == "waiting" for e in mine),
                        slots=sum(len(q.slots) for q in queues),
                        busy=sum(e.state == "running" for q in queues for e in q.entries),
                        others_waiting=sum(e.state == "waiting" for e in others),
                        running_on=sorted(e.slot for e in mine if e.state == "running" and e.slot)[:20])
