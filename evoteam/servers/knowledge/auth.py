"""Bearer tokens for the shared knowledge server.

A token is shown once when it is made; the store keeps only its SHA-256. Identity (user and
project scope) comes from the token, never from a tool argument.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from evoteam.servers.knowledge import readsql
from evoteam.servers.knowledge.errors import Invalid, NotFound
from evoteam.servers.knowledge.models import BaseModel  # built on first use: every store open imports this

if TYPE_CHECKING:  # the MCP SDK takes ~1 s to import: `evoteam token ...` must not wait for it
    from mcp.server.auth.provider import AccessToken

    from evoteam.servers.knowledge.db import Database

TOKEN_PREFIX = "evt_"


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class TokenInfo(BaseModel):
    id: str
    user: str
    project: str | None
    verifier: bool = False  # may record bench-verified scores (for a bench on another host)
    created_at: datetime
    revoked_at: datetime | None = None


class NewToken(TokenInfo):
    token: str


async def add_token(db: Database, user: str, project: str | None = None, verifier: bool = False) -> NewToken:
    user = user.strip()
    if not user or len(user) > 100:
        raise Invalid("user must be 1-100 characters")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token_id = "tok_" + secrets.token_hex(6)
    created = datetime.now(UTC)
    async with db.write() as conn:
        await conn.execute(
            "INSERT INTO tokens (id, user, project, token_sha256, created_at, verifier) VALUES (?, ?, ?, ?, ?, ?)",
            (token_id, user, project, _digest(token), created.isoformat(), int(verifier)),
        )
    return NewToken(id=token_id, user=user, project=project, verifier=verifier, created_at=created, token=token)


async def list_tokens(db: Database) -> list[TokenInfo]:
    async with db.read() as conn:
        async with conn.execute(readsql.TOKENS) as cur:
            rows = await cur.fetchall()
    return [TokenInfo(id=r["id"], user=r["user"], project=r["project"], verifier=bool(r["verifier"]),
                      created_at=datetime.fromisoformat(r["created_at"]),
                      revoked_at=datetime.fromisoformat(r["revoked_at"]) if r["revoked_at"] else None)
            for r in rows]


async def revoke_token(db: Database, token_id: str) -> None:
    async with db.write() as conn:
        cur = await conn.execute("UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                                 (datetime.now(UTC).isoformat(), token_id))
        if cur.rowcount == 0:
            raise NotFound(f"no active token {token_id!r}: `evoteam token list` shows them")


async def count_active_tokens(db: Database) -> int:
    async with db.read() as conn:
        async with conn.execute("SELECT count(*) FROM tokens WHERE revoked_at IS NULL") as cur:
            (n,) = await cur.fetchone()
    return n


class StoreTokenVerifier:
    """The MCP SDK's TokenVerifier over our tokens table."""

    def __init__(self, db: Database):
        self.db = db

    async def verify_token(self, token: str) -> AccessToken | None:
        if not token.startswith(TOKEN_PREFIX) or len(token) > 200:
            return None
        return await self.verify_digest(_digest(token), token)

    async def verify_digest(self, digest: str, token: str = "") -> AccessToken | None:
        """The access of the live token whose SHA-256 is `digest` (a browser session names its
        token so, never by its text)."""
        from mcp.server.auth.provider import AccessToken  # not at import: `evoteam token --help` stays light

        async with self.db.read() as conn:
            async with conn.execute(
                "SELECT user, project, verifier, token_sha256 FROM tokens WHERE token_sha256 = ? AND revoked_at IS NULL",
                (digest,),
            ) as cur:
                row = await cur.fetchone()
        # The lookup is by digest; compare again in constant time so a timing difference
        # never says how much of a digest matched.
        if row is None or not hmac.compare_digest(row["token_sha256"], digest):
            return None
        return AccessToken(token=token, client_id=row["user"], scopes=[], subject=row["user"],
                           claims={"project": row["project"], "verifier": bool(row["verifier"])})
