"""How runs end and descend: a run's end (status with a reason), its seed run, and parents
that cross runs.

Lineage crosses engineers: a second engineer's run may start from the first one's
(`start_run(seeded_from=RUN)`) and a candidate may name a parent from any run of the same
project. It never crosses projects: a parent or seed elsewhere is refused before anything is
written (and, in the bench, before anything is measured).
"""

from __future__ import annotations

import aiosqlite

from evoteam.servers.knowledge.migrations import register_migrations
from evoteam.servers.knowledge.errors import Invalid

# Statuses a run may be ended with by a caller (finish_run); `active` resumes it.
ENDINGS = ("finished", "paused", "failed")
MAX_REASON = 2000

register_migrations("knowledge.lineage", [
    """
    ALTER TABLE runs ADD COLUMN seeded_from TEXT;
    ALTER TABLE runs ADD COLUMN status_reason TEXT;
    """,
])


def clean_reason(reason: str | None) -> str | None:
    if reason is None:
        return None
    reason = reason.strip()
    if len(reason) > MAX_REASON:
        raise Invalid(f"a reason is at most {MAX_REASON} characters; say it in one or two sentences")
    return reason or None


async def check_same_project(conn: aiosqlite.Connection, table: str, row_id: str, project: str,
                             what: str) -> None:
    """Refuse a parent (candidate) or seed (run) that lives in another project than `project`.
    The caller has already checked that the row is visible to the actor."""
    async with conn.execute(f"SELECT project FROM {table} WHERE id = ?", (row_id,)) as cur:
        row = await cur.fetchone()
    if row is not None and row["project"] != project:
        raise Invalid(f"{what} {row_id} belongs to another project; lineage stays within one project")
