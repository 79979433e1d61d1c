"""SQLite access: one serialised writer, separate readers, versioned forward migrations.

Several processes (one stdio server per agent session, the CLI, hooks) may open the same
file, so every write takes the database lock up front (`BEGIN IMMEDIATE`) and waits on a busy
timeout rather than failing; WAL lets readers run beside the writer.

Opening never takes the write lock when the schema is current, so a long write (a big import)
never stops a session, a hook or a read-only command from starting; a file this process may not
write is opened read-only (reads work, writes say why not). The file is created 0600 in a 0700
folder: it holds a team's work. Failures of the file itself (read-only, damaged, locked, disk
full) become one-line `StoreFailure`s (storefail.py), and a failed write leaves the writer clean,
so the next write succeeds once the condition clears.

Other parts of evoteam add their own tables by registering migrations under their own
component name (`register_migrations("retrieval", [...])`); each component's version is
tracked separately, so adding a server never renumbers another's schema.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiosqlite

from evoteam.servers.knowledge.errors import StoreFailure
from evoteam.servers.knowledge.migrations import _MIGRATIONS, is_current, postgres_migrations  # noqa: F401 - pg.py reads the last through db
from evoteam.servers.knowledge.storefail import describe

# How long a write waits for another process's write lock (EVOTEAM_BUSY_TIMEOUT_MS overrides).
BUSY_TIMEOUT_MS = int(os.environ.get("EVOTEAM_BUSY_TIMEOUT_MS") or 30_000)

def _configure(conn: sqlite3.Connection) -> None:
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA synchronous = NORMAL")  # WAL + NORMAL survives process crashes


def _ro_uri(path: Path, immutable: bool = False) -> str:
    # as_uri() escapes '#', '?' and '%' in the path, which SQLite would read as URI syntax
    return path.resolve().as_uri() + "?mode=ro" + ("&immutable=1" if immutable else "")


def readonly_uri(path: Path) -> str:
    """The URI of a read-only connection; a store in a folder we cannot write (no -shm can be
    made there) is read as immutable."""
    uri = _ro_uri(path)
    try:
        conn = sqlite3.connect(uri, uri=True, isolation_level=None)
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        finally:
            conn.close()
        return uri
    except sqlite3.OperationalError as exc:
        if "not a database" in str(exc) or "malformed" in str(exc):
            raise
        return _ro_uri(path, immutable=True)


def connect_readonly(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(readonly_uri(path), uri=True, isolation_level=None)


def current_versions(path: Path) -> dict[str, int] | None:
    """The file's component versions, read without any write lock (None: no schema yet)."""
    conn = connect_readonly(path)
    try:
        if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'schema_versions'").fetchone():
            return None
        return dict(conn.execute("SELECT component, version FROM schema_versions").fetchall())
    finally:
        conn.close()


def create_private(path: Path) -> None:
    """Create the store file 0600 (and its folder 0700) before SQLite creates it 0644."""
    if not path.parent.exists():
        path.parent.mkdir(parents=True, mode=0o700)
    if not path.exists():
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        except FileExistsError:
            pass


def writable(path: Path) -> bool:
    return not path.exists() or (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK))


def migrate(path: Path) -> dict[str, int]:
    """Bring the file at `path` up to every registered component's latest version. Takes the
    write lock only when a migration is due."""
    _load_components()
    path = Path(path)
    if path.exists() and path.stat().st_size > 0:
        versions = current_versions(path)
        if is_current(versions):
            return versions
        if not writable(path):
            raise StoreFailure(f"the store {path} is read-only and was made by an older evoteam: open it once "
                               f"with write access to upgrade it, or export it with that version")
    create_private(path)
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
                    raise StoreFailure(
                        f"the store {path} was written by a newer evoteam ({component} schema v{current}; this "
                        f"one knows v{len(migrations)}): upgrade evoteam, or point EVOTEAM_DB at another file"
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
    # Importing a component's schema module registers its migrations. Every knowledge component
    # is named here: a process that opens a store without the store's code (`kb migrate-store`
    # into a new file) must still make every table.
    from evoteam.servers.knowledge import (  # noqa: F401
        counters, idempotency, lineage, measurements, schema, sessions, verified)

    for name in ("evoteam.servers.retrieval.schema", "evoteam.servers.team.schema",
                 "evoteam.servers.knowledge.pgschema", "evoteam.servers.retrieval.pgschema"):
        try:
            __import__(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise


async def _settled(awaitable):
    """Await a statement to its end even when the task is cancelled meanwhile, then let the
    cancellation go on: the writer is shared, and a BEGIN, COMMIT or ROLLBACK cut off half-way
    (it still runs, on the connection's thread) would leave the next writer inside a transaction
    it did not open ("cannot start a transaction within a transaction").

    Every cancellation that arrives meanwhile is held back, not only the first: a caller
    cancelled again while a ROLLBACK settles (a task group tearing down, a client retrying)
    would otherwise release the write lock with the ROLLBACK still queued, and that ROLLBACK
    then ends, or closes the connection of, the next writer's transaction."""
    task = asyncio.ensure_future(awaitable)
    cancelled = False
    while not task.done():
        try:
            await asyncio.wait([task])
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        if not task.cancelled():
            task.exception()  # seen here; the cancellation is what the caller gets
        raise asyncio.CancelledError
    return task.result()


class Database:
    """An open store file: `write()` for serialised transactions, `read()` for queries."""

    dialect = "sqlite"

    def __init__(self, path: Path, readers: int = 2):
        self.path = Path(path)
        self.readonly = False
        self._reader_count = readers
        self._writer: aiosqlite.Connection | None = None
        self._readers: asyncio.Queue[aiosqlite.Connection] | None = None
        self._all: list[aiosqlite.Connection] = []
        self._write_lock = asyncio.Lock()

    async def open(self) -> Database:
        try:
            await asyncio.to_thread(migrate, self.path)
            self.readonly = not writable(self.path)
            if not self.readonly:
                self._writer = await self._connect()
            self._readers = asyncio.Queue()
            for _ in range(self._reader_count):
                self._readers.put_nowait(await self._connect())
        except sqlite3.Error as exc:
            await self.close()
            raise (describe(exc, self.path) or exc) from None
        except OSError as exc:  # the folder cannot be made or the file not created
            await self.close()
            raise StoreFailure(f"cannot create the store {self.path}: {exc.strerror}; point EVOTEAM_DB at a "
                               f"writable place") from None
        except BaseException:  # a newer schema, a cancellation: no connection thread outlives the failure
            await self.close()
            raise
        return self

    async def _connect(self) -> aiosqlite.Connection:
        if self.readonly:
            conn = await aiosqlite.connect(readonly_uri(self.path), uri=True, isolation_level=None)
        else:
            conn = await aiosqlite.connect(self.path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
        # Kept before anything else can fail (a full disk fails the first PRAGMA): every
        # connection runs a thread that keeps the process alive until close() ends it.
        self._all.append(conn)
        conn.row_factory = sqlite3.Row
        await conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        await conn.execute("PRAGMA foreign_keys = ON")
        await conn.execute("PRAGMA synchronous = NORMAL")
        return conn

    async def close(self) -> None:
        """Close every connection, each whatever the others do: a connection whose close fails
        (a full or vanished disk) still has its thread stopped, so the process can exit."""
        for conn in self._all:
            try:
                await conn.close()
            except (sqlite3.Error, OSError, ValueError):
                pass
        self._all.clear()
        self._writer = None

    async def __aenter__(self) -> Database:
        return await self.open()

    async def __aexit__(self, *exc) -> None:
        await self.close()

    @asynccontextmanager
    async def write(self, scope: str | None = None) -> AsyncIterator[aiosqlite.Connection]:
        """A write transaction; commits on success, rolls back on any error. `scope` (the run a
        write is confined to) matters on PostgreSQL only (pg.py): a SQLite file has one writer."""
        if self.readonly:
            raise StoreFailure(f"the store {self.path} is read-only here, so it cannot be written: fix its "
                               f"permissions (and its folder's), or point EVOTEAM_DB at a writable copy")
        if self._writer is None:
            raise RuntimeError("database is not open")
        async with self._write_lock:
            try:
                try:
                    await _settled(self._writer.execute("BEGIN IMMEDIATE"))
                except asyncio.CancelledError:
                    await _settled(self._rollback())
                    raise
                try:
                    yield self._writer
                except BaseException:
                    await _settled(self._rollback())
                    raise
                else:
                    try:
                        await _settled(self._writer.execute("COMMIT"))
                    except BaseException:
                        await _settled(self._rollback())
                        raise
            except sqlite3.Error as exc:
                raise (describe(exc, self.path) or exc) from None

    async def _rollback(self) -> None:
        """End the failed transaction; if even that fails (a full disk can), start a fresh
        writer so the next write does not inherit a half-open transaction."""
        try:
            await self._writer.execute("ROLLBACK")
        except sqlite3.Error:
            pass
        if self._writer.in_transaction:
            old = self._writer
            self._all.remove(old)
            try:
                await old.close()
            except sqlite3.Error:
                pass
            self._writer = await self._connect()

    @asynccontextmanager
    async def read(self) -> AsyncIterator[aiosqlite.Connection]:
        """A connection for reads; it sees every committed write."""
        if self._readers is None:
            raise RuntimeError("database is not open")
        conn = await self._readers.get()
        try:
            yield conn
        except sqlite3.Error as exc:
            raise (describe(exc, self.path) or exc) from None
        finally:
            self._readers.put_nowait(conn)
