"""Browser sessions of the live run pages, kept in the store (component "knowledge.sessions"),
so that every replica of the shared server knows every session: a browser that signed in on one
replica is signed in on all, and signing out or revoking the token ends it everywhere.

Neither the session id nor the token is stored: the row keys a session by the SHA-256 of its id
and names its token by the token's SHA-256 (as the tokens table does). Each request looks the
token up again, so a revoked token ends its sessions at once. Append migrations; never edit one.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Callable

from evoteam.servers.knowledge.auth import StoreTokenVerifier
from evoteam.servers.knowledge.auth import _digest as token_digest
from evoteam.servers.knowledge.migrations import register_migrations
from evoteam.servers.knowledge.store import Actor

register_migrations("knowledge.sessions", ["""
CREATE TABLE browser_sessions (
    sid_sha256 TEXT PRIMARY KEY,
    token_sha256 TEXT NOT NULL,
    expires_at REAL NOT NULL
);
CREATE INDEX browser_sessions_expiry ON browser_sessions(expires_at);
"""])


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class StoreSessions:
    """Sessions in the store's database, for `dashboard_routes(..., sessions=...)`."""

    def __init__(self, db, verifier: StoreTokenVerifier, to_actor: Callable[[object], Actor], seconds: float):
        self.db, self.verifier, self.to_actor, self.seconds = db, verifier, to_actor, seconds

    async def open(self, token: str) -> str:
        sid = secrets.token_urlsafe(32)
        now = time.time()
        async with self.db.write() as conn:
            await conn.execute("DELETE FROM browser_sessions WHERE expires_at < ?", (now,))
            await conn.execute("INSERT INTO browser_sessions (sid_sha256, token_sha256, expires_at) VALUES (?, ?, ?)",
                               (_digest(sid), token_digest(token), now + self.seconds))
        return sid

    async def caller(self, sid: str | None) -> Actor | None:
        if not sid or len(sid) > 200:
            return None
        async with self.db.read() as conn:
            async with conn.execute("SELECT token_sha256 FROM browser_sessions WHERE sid_sha256 = ? "
                                    "AND expires_at >= ?", (_digest(sid), time.time())) as cur:
                row = await cur.fetchone()
        if row is None:
            return None
        access = await self.verifier.verify_digest(row[0])
        return None if access is None else self.to_actor(access)

    async def close(self, sid: str | None) -> None:
        if sid:
            async with self.db.write() as conn:
                await conn.execute("DELETE FROM browser_sessions WHERE sid_sha256 = ?", (_digest(sid),))
