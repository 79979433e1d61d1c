"""SQLite access: one serialised writer, separate readers, versioned forward migrations.

Several processes (one stdio server per agent session, the CLI, hooks) may open the same
file, so every write takes the database lock up front (`BEGIN IMMEDIATE`) and waits on a busy
timeout rather than failing; WAL lets readers run beside the writer.

Other parts of evoteam add their own tables by registering migrations under their own
component name (`register_migrations("retrieval", [...])`); each component's version is
tracked separately, so adding a server never renumbers another's schema.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import aiosqlite

BUSY_TIMEOUT_MS = 30_000

# component -> ordered list of migrations; a migration is SQL text or a callable on a
# sqlite3.Connection (run inside the migration's transaction).
Migration = str | Callable[[sqlite3.Connection], None]
_MIGRATIONS: dict[str, list[Migration]] = {}


def register_migrations(component: str, migrations: Sequence[Migration]) -> None:
    """Declare the ordered schema migrations of one component. Append, never edit."""
    _MIGRATIONS[component] = list(migrations)


def _configure(conn: sqlite3.Connection) -> None:
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA synchronous = NORMAL")  # WAL + NORMAL survives process crashes


def migrate(path: Path) -> dict[str, int]:
    """Bring the file at `path` up to every registered component's latest version."""
    _load_components()
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
    try:
        _configure(conn)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_versions (component TEXT PRIMARY KEY, version INTEGER NOT NULL)"
        )
        versions: dict[str, int] = {}
        for component, migrations in sorted(_MIGRATIONS.items()):
            conn.execute("BEGIN IMMEDIATE")
            try:
                row = conn.execute(
                    "SELECT version FROM schema_versions WHERE component = ?", (component,)
                ).fetchone()
                current = row[0] if row else 0
                if current > len(migrations):
                    raise RuntimeError(
                        f"database {path} has {component} schema v{current}, newer than this "
                        f"evoteam knows (v{len(migrations)}): upgrade evoteam"
                    )
                for step in migrations[current:]:
                    if callable(step):
                        step(conn)
                    else:
                        for statement in _split_sql(step):
                            conn.execute(statement)
                conn.execute(
                    "INSERT INTO schema_versions (component, version) VALUES (?, ?) "
                    "ON CONFLICT(component) DO UPDATE SET version = excluded.version",
                    (component, len(migrations)),
                )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            versions[component] = len(migrations)
        return versions
    finally:
        conn.close()


def _split_sql(script: str) -> list[str]:
    """Split a migration script into statements (complete_statement copes with triggers)."""
    statements, buffer = [], ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            if buffer.strip():
                statements.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        statements.append(buffer.strip())
    return statements


def _load_components() -> None:
    # Importing a component's schema module registers its migrations.
    from evoteam.servers.knowledge import schema, verified  # noqa: F401

    for name in ("evoteam.servers.retrieval.schema", "evoteam.servers.team.schema"):
        try:
            __import__(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise


class Database:
    """An open store file: `write()` for serialised transactions, `read()` for queries."""

    def __init__(self, path: Path, readers: int = 2):
        self.path = Path(path)
        self._reader_count = readers
        self._writer: aiosqlite.Connection | None = None
        self._readers: asyncio.Queue[aiosqlite.Connection] | None = None
        self._all: list[aiosqlite.Connection] = []
        self._write_lock = asyncio.Lock()

    async def open(self) -> Database:
        await asyncio.to_thread(migrate, self.path)
        self._writer = await self._connect()
        self._readers = asyncio.Queue()
        for _ in range(self._reader_count):
            self._readers.put_nowait(await self._connect())
        return self

    async def _connect(self) -> aiosqlite.Connection:
        conn = await aiosqlite.connect(self.path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
        conn.row_factory = sqlite3.Row
        await conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        await conn.execute("PRAGMA foreign_keys = ON")
        await conn.execute("PRAGMA synchronous = NORMAL")
        self._all.append(conn)
        return conn

    async def close(self) -> None:
        for conn in self._all:
            await conn.close()
        self._all.clear()
        self._writer = None

    async def __aenter__(self) -> Database:
        return await self.open()

    async def __aexit__(self, *exc) -> None:
        await self.close()

    @asynccontextmanager
    async def write(self) -> AsyncIterator[aiosqlite.Connection]:
        """A write transaction; commits on success, rolls back on any error."""
        if self._writer is None:
            raise RuntimeError("database is not open")
        async with self._write_lock:
            await self._writer.execute("BEGIN IMMEDIATE")
            try:
                yield self._writer
            except BaseException:
                await self._writer.execute("ROLLBACK")
                raise
            else:
                await self._writer.execute("COMMIT")

    @asynccontextmanager
    async def read(self) -> AsyncIterator[aiosqlite.Connection]:
        """A connection for reads; it sees every committed write."""
        if self._readers is None:
            raise RuntimeError("database is not open")
        conn = await self._readers.get()
        try:
            yield conn
        finally:
            self._readers.put_nowait(conn)
