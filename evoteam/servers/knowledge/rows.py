"""The plain pieces every SQL store module shares: ids, timestamps, page cursors and limits, the
full-text query and filter tokens, row insertion, provenance from a row, the artifact-name rule."""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import sqlite3
import uuid
from datetime import UTC, datetime
from typing import Any

import aiosqlite

from evoteam.servers.knowledge.errors import Invalid
from evoteam.servers.knowledge.models import Page, Provenance

MAX_LIMIT = 200
RANK_WINDOW = 5000  # search ranks at most this many of the newest matches
COUNT_CAP = 1000  # search counts matches up to this many (then says the total is a lower bound)
SAMPLE_WINDOW = 3000  # a word's frequency is judged on this many of the newest index entries
DEFAULT_MAX_ARTIFACT_BYTES = 4 * 1024 * 1024
_ARTIFACT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._ +-]{0,199}$")
_WORD = re.compile(r"\w+", re.UNICODE)


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:16]}"


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"o:{offset}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> int:
    if not cursor:
        return 0
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        kind, value = raw.split(":", 1)
        offset = int(value)
        if kind != "o" or not 0 <= offset < 2**62:  # SQLite's OFFSET is a signed 64-bit integer
            raise ValueError
        return offset
    except (ValueError, binascii.Error, UnicodeDecodeError) as exc:
        raise Invalid("bad cursor: pass back the next_cursor of the previous page, or none to start") from exc


def page_limit(limit: int) -> int:
    if limit < 1 or limit > MAX_LIMIT:
        raise Invalid(f"limit must be between 1 and {MAX_LIMIT}")
    return limit


def page_of(items: list, total: int, offset: int, limit: int) -> Page:
    more = offset + len(items) < total
    return Page(items=items, total=total, next_cursor=encode_cursor(offset + limit) if more else None)


def fts_query(text: str, any_word: bool = False) -> str | None:
    """Turn arbitrary user text into a safe FTS5 query over title and body: every word
    quoted, so operators, quotes and column filters in the input are plain words, never syntax."""
    words = _WORD.findall(text)[:32]
    if not words:
        return None
    quoted = ['"' + w.replace('"', '""') + '"' for w in words]
    return "{title body} : (" + (" OR " if any_word else " ").join(quoted) + ")"


def filter_token(kind: str, value: str) -> str:
    """One opaque, tokenizer-proof token standing for `kind = value` in the index."""
    return kind + hashlib.sha1(value.encode("utf-8")).hexdigest()[:20]


def index_filters(kind: str, run_id: str, project: str) -> str:
    return " ".join((filter_token("k", kind), filter_token("r", run_id), filter_token("p", project)))


async def insert_row(conn: aiosqlite.Connection, table: str, values: dict[str, Any]) -> None:
    cols = ", ".join(values)
    marks = ", ".join("?" for _ in values)
    await conn.execute(f"INSERT INTO {table} ({cols}) VALUES ({marks})", tuple(values.values()))


def provenance_of(row: sqlite3.Row) -> Provenance:
    return Provenance(user=row["user"], client=row["client"], role=row["role"],
                      team_version=row["team_version"], created_at=datetime.fromisoformat(row["created_at"]))


def check_artifact_name(name: str) -> None:
    if not _ARTIFACT_NAME.match(name) or ".." in name:
        raise Invalid(f"artifact name {name!r} is not allowed: use a plain file name (letters, digits, "
                      f"'.', '_', '-', '+', spaces; no '/', no '..'), e.g. 'profile_v2.txt'")
