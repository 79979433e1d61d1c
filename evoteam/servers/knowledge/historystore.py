"""The team history on a store: entries (what a team version did, why it changed) and the
history document a supervisor reads, newest entries first until it is full."""

from __future__ import annotations

from typing import TYPE_CHECKING

import aiosqlite

from evoteam.servers.knowledge.errors import Invalid, NotFound
from evoteam.servers.knowledge.models import HistoryDocument, HistoryEntry, HistoryEntryCreate
from evoteam.servers.knowledge.render import HISTORY_CHARS, history_entry_chars, render_history
from evoteam.servers.knowledge.rowmodels import history_of
from evoteam.servers.knowledge.rows import insert_row, new_id

if TYPE_CHECKING:
    from evoteam.servers.knowledge.local import LocalKnowledgeStore


async def get_history(store: LocalKnowledgeStore, conn: aiosqlite.Connection, entry_id: str) -> HistoryEntry:
    async with conn.execute("SELECT * FROM history WHERE id = ?", (entry_id,)) as cur:
        row = await cur.fetchone()
    if row is None:
        raise NotFound(f"no history entry {entry_id!r}")
    return history_of(row)

async def add_history(store: LocalKnowledgeStore, spec: HistoryEntryCreate) -> HistoryEntry:
    if not any([spec.observed_behaviour, spec.diagnosis, spec.design_change, spec.outcome]):
        raise Invalid("a history entry needs at least one of observed_behaviour, diagnosis, "
                      "design_change, outcome")
    async with store.db.write(scope=spec.run_id) as conn:
        run = await store.visible_run_row(conn, spec.run_id)
        if (done := await store._replay(conn, run, "history", spec)) is not None:
            return await get_history(store, conn, done)
        entry_id = new_id("his")
        values = store.provenance_values(run["project"])
        if spec.team_version is not None:
            values["team_version"] = spec.team_version
        await insert_row(conn, "history", {
            "id": entry_id, "run_id": spec.run_id, "observed_behaviour": spec.observed_behaviour,
            "diagnosis": spec.diagnosis, "design_change": spec.design_change, "outcome": spec.outcome,
            **values,
        })
        body = "\n".join([spec.observed_behaviour, spec.diagnosis, spec.design_change, spec.outcome])
        await store._index(conn, "history", entry_id, spec.run_id, run["project"],
                          f"team v{values['team_version']}", body)
        await store._remember(conn, run, "history", spec, entry_id)
        return await get_history(store, conn, entry_id)

async def history_document(store: LocalKnowledgeStore, run_id: str, max_chars: int | None = None) -> HistoryDocument:
    max_chars = max_chars or HISTORY_CHARS
    async with store.db.read() as conn:
        run = await store.visible_run_row(conn, run_id)
        async with conn.execute("SELECT history FROM run_counters WHERE run_id = ?", (run_id,)) as cur:
            (total,) = await cur.fetchone() or (0,)
        # The newest entries, a batch at a time, until the document is full (index history_newest).
        newest: list[HistoryEntry] = []
        used, offset, batch = 0, 0, 16
        while used < max_chars and offset < total:
            async with conn.execute("SELECT * FROM history WHERE run_id = ? ORDER BY created_at DESC, id DESC "
                                    "LIMIT ? OFFSET ?", (run_id, batch, offset)) as cur:
                rows = await cur.fetchall()
            if not rows:
                break
            for r in rows:
                entry = history_of(r)
                newest.append(entry)
                used += history_entry_chars(entry)
                if used >= max_chars:
                    break
            offset += len(rows)
    return render_history(run_id, run["goal"], newest[::-1], total=total, max_chars=max_chars)
