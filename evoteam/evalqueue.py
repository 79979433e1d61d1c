"""The evaluation queues' status files: what each process's fair queue (the bench's scheduling
room) is running and holding, one small JSON file per process. Written by the bench; read by
`evoteam bench queue` and by `team_status`, which must not import the bench to do so (the
team's CLI stays light, and a server never reaches into another's internals).
"""

from __future__ import annotations

import json
import os
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
