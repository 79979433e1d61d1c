"""Idempotency keys, scoped to (project, run, operation).

A retried write with the same key returns the first write's row instead of a duplicate. A key
belongs to one run of one project: the same key in another run or project is a different key.
Within the run, the same key for another operation (a learning's key reused for a candidate)
or with a different payload is an error: the caller would otherwise believe a write happened
that did not.
"""

from __future__ import annotations

import hashlib
import sqlite3
from datetime import UTC, datetime

import aiosqlite
from pydantic import BaseModel

from evoteam.servers.knowledge.migrations import register_migrations
from evoteam.servers.knowledge.errors import Invalid

V1 = """
CREATE TABLE idempotency_keys (
    project TEXT NOT NULL,
    run_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    key TEXT NOT NULL,
    payload_sha256 TEXT,
    ref_id TEXT NOT NULL,
    user TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (project, run_id, key)
);
"""

_TABLES = {"learning": "learnings", "history": "history", "artifact": "artifacts", "candidate": "candidates",
           "cost": "costs"}


def _carry_over(conn: sqlite3.Connection) -> None:
    """Keys of the first schema (global per user) move to the run and project of their row;
    their payload was not recorded, so any payload replays them."""
    for kind, table in _TABLES.items():
        conn.execute(
            f"INSERT OR IGNORE INTO idempotency_keys (project, run_id, kind, key, payload_sha256, ref_id, user, "
            f"created_at) SELECT t.project, t.run_id, i.kind, i.key, NULL, i.ref_id, i.user, t.created_at "
            f"FROM idempotency i JOIN {table} t ON t.id = i.ref_id WHERE i.kind = ?", (kind,))


register_migrations("knowledge.idempotency", [V1, _carry_over])


def payload_digest(spec: BaseModel) -> str:
    return hashlib.sha256(spec.model_dump_json(exclude={"idempotency_key"}).encode("utf-8")).hexdigest()


async def replay(conn: aiosqlite.Connection, run: sqlite3.Row, kind: str, spec: BaseModel) -> str | None:
    """The id the first write with this spec's key produced in this run, if any."""
    key = getattr(spec, "idempotency_key", None)
    if not key:
        return None
    async with conn.execute(
        "SELECT kind, ref_id, payload_sha256 FROM idempotency_keys WHERE project = ? AND run_id = ? AND key = ?",
        (run["project"], run["id"], key)) as cur:
        row = await cur.fetchone()
    if row is None:
        return None
    if row["kind"] != kind:
        raise Invalid(f"idempotency key {key!r} was already used in this run for a {row['kind']}; "
                      f"use a fresh key")
    if row["payload_sha256"] is not None and row["payload_sha256"] != payload_digest(spec):
        raise Invalid(f"idempotency key {key!r} was already used in this run for a different {kind}: "
                      f"retry with the same content, or use a fresh key for a new {kind}")
    return row["ref_id"]


async def remember(conn: aiosqlite.Connection, run: sqlite3.Row, kind: str, spec: BaseModel, ref_id: str,
                   user: str) -> None:
    key = getattr(spec, "idempotency_key", None)
    if key:
        await conn.execute(
            "INSERT INTO idempotency_keys (project, run_id, kind, key, payload_sha256, ref_id, user, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (run["project"], run["id"], kind, key, payload_digest(spec), ref_id, user,
             datetime.now(UTC).isoformat()))
