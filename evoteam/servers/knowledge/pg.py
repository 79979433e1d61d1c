"""PostgreSQL access with the same shape as db.Database: `write()` for serialised transactions,
`read()` for queries, versioned forward migrations per component.

The store's code is written once, against the connection interface aiosqlite offers
(`async with conn.execute(sql, params) as cur`, rows readable by name and by position); this
module gives a psycopg 3 connection that interface and rewrites each statement into
PostgreSQL's dialect (dialect.py). Several server processes may share one database, so:

- every write transaction first takes transaction-scoped advisory locks, so the store's checks
  (idempotency keys, "exists already", pooling identical code, superseding) read then write
  inside one transaction with no other writer slipping in between. A write confined to one run
  (`write(scope=run_id)`: every check it makes reads only that run's rows) takes the store lock
  shared and its run's lock exclusive, so writers of different runs proceed side by side; any
  other write takes the store lock exclusive and is serialised with every writer, exactly as
  SQLite's `BEGIN IMMEDIATE` serialises them;
- migrations run under a session advisory lock, so replicas starting together migrate once; a
  step that must run outside a transaction (an index built concurrently) runs under a lock of
  its own, without the migration lock (`migrate_url`);
- reads run in autocommit mode: each statement sees every write committed before it.

psycopg is an optional dependency (`pip install 'evoteam[postgres]'`): it is imported only when
a store URL names PostgreSQL.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import select
import sys
import time
import weakref
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager, nullcontext
from typing import Any
from urllib.parse import urlsplit

from evoteam.config import is_store_url
from evoteam.servers.knowledge.db import BUSY_TIMEOUT_MS
from evoteam.servers.knowledge.dialect import to_postgres
from evoteam.servers.knowledge.errors import StoreFailure
from evoteam.servers.knowledge.migrations import OutsideTransaction

# The pool reports each failed reconnection as a multi-line warning; with no logging set up
# Python would print them all on stderr. Users get one line per failed call (StoreFailure)
# instead; a process that configures logging still receives the warnings.
logging.getLogger("psycopg.pool").addHandler(logging.NullHandler())

# How long a call waits for a connection before saying the database does not answer.
POOL_TIMEOUT_S = float(os.environ.get("EVOTEAM_PG_TIMEOUT_S") or 10)
# A connection idle longer than this is checked with a round trip even when its socket is quiet:
# a load balancer, NAT or firewall between hosts may drop an idle flow without a byte (an AWS NLB
# after 350 s) and reset the next packet, which only a packet sent finds out. Below it, a quiet
# socket means a live connection (see _checkout).
IDLE_CHECK_S = 30.0
# TCP keepalives on every connection, so that such a middlebox sees traffic on an idle flow and a
# dead peer shows as a socket error (readable) rather than silence. libpq ignores them on Unix sockets.
KEEPALIVES = {"keepalives": 1, "keepalives_idle": 30, "keepalives_interval": 10, "keepalives_count": 3}

# Advisory lock keys (any 64-bit integers; these spell "evoteam" + a purpose).
WRITE_LOCK = 0x65766F7465616D01
MIGRATE_LOCK = 0x65766F7465616D02
# How often a server waiting for a migration's lock asks again (see `_hold`).
LOCK_POLL_S = 0.1
# How often an OutsideTransaction step's work is tried when PostgreSQL ends it as a deadlock with
# an earlier evoteam's migration (pg.py `_outside`).
DEADLOCK_TRIES = 3
# A run's write lock is a two-key advisory lock (this class, the hash of the run id): PostgreSQL
# keeps two-key locks apart from one-key ones, so no run's key can meet the two above. Two runs
# whose ids hash alike merely write one after the other.
RUN_LOCK_CLASS = 0x65766F74


def is_postgres_url(target: object) -> bool:
    return is_store_url(target)


def redacted(url: str) -> str:
    """The URL without its password, for messages."""
    parts = urlsplit(url)
    host = parts.hostname or "localhost"
    user = f"{parts.username}@" if parts.username else ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{user}{host}{port}{parts.path}"


def _psycopg():
    try:
        import psycopg
        import psycopg_pool
    except ImportError:
        raise StoreFailure("this store is on PostgreSQL but psycopg is not installed: "
                           "pip install 'evoteam[postgres]' (or 'psycopg[binary,pool]')") from None
    return psycopg, psycopg_pool


class Row(tuple):
    """A result row readable by column name and by position, as sqlite3.Row is."""

    def __new__(cls, values: Iterable, names: dict[str, int]):
        row = super().__new__(cls, values)
        row._names = names
        return row

    def __getitem__(self, key):
        if isinstance(key, str):
            return tuple.__getitem__(self, self._names[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._names)


def _row_factory(cursor):
    names = {c.name: i for i, c in enumerate(cursor.description or ())}
    return lambda values: Row(values, names)


def describe(exc: Exception, url: str) -> StoreFailure | None:
    """One line for a failure of the database itself (unreachable, restarted, full); None for
    errors of a statement, which are bugs and keep their own message."""
    psycopg, _ = _psycopg()
    from psycopg_pool import PoolTimeout

    where = redacted(url)
    if isinstance(exc, psycopg.errors.LockNotAvailable):
        return StoreFailure(f"the PostgreSQL store {where} is busy: another writer has held its write lock too long "
                            f"(a big import?); retry in a moment")
    if isinstance(exc, PoolTimeout):
        return StoreFailure(f"the PostgreSQL store {where} did not answer in time: check that the server is "
                            f"up and reachable, then retry")
    # Before OperationalError, its base class: the server is up but refuses to grow a file
    # (SQLSTATE 53100); telling the user to wait until it is "reachable" would send them the wrong way.
    if isinstance(exc, psycopg.errors.DiskFull):
        return StoreFailure(f"the PostgreSQL store {where} is out of disk space: nothing of this write was kept; "
                            f"free space on the database server, then retry (the store recovers by itself)")
    if isinstance(exc, psycopg.OperationalError):
        first = (str(exc).strip().splitlines() or ["unknown error"])[0]
        return StoreFailure(f"the PostgreSQL store {where} failed: {first}; retry once it is reachable")
    return None


class _Cursor:
    """What `conn.execute()` gives back: awaitable, and usable with `async with`."""

    def __init__(self, conn, sql: str, params):
        self._conn, self._sql, self._params = conn, sql, params
        self._cur = None

    async def _run(self) -> _Cursor:
        named = isinstance(self._params, Mapping)
        params = self._params if named else tuple(self._params) if self._params is not None else None
        sql = to_postgres(self._sql, params=params is not None, named=named)
        self._cur = self._conn.cursor(row_factory=_row_factory)
        await self._cur.execute(sql, params, prepare=False)
        return self

    def __await__(self):
        return self._run().__await__()

    async def __aenter__(self) -> _Cursor:
        return await self._run()

    async def __aexit__(self, *exc) -> None:
        await self._cur.close()

    async def fetchone(self):
        return await self._cur.fetchone() if self._cur.description else None

    async def fetchall(self):
        return await self._cur.fetchall() if self._cur.description else []

    @property
    def rowcount(self) -> int:
        return self._cur.rowcount


class PgConnection:
    """A psycopg connection speaking the aiosqlite interface the store is written against."""

    dialect = "postgres"

    def __init__(self, conn):
        self.raw = conn

    def execute(self, sql: str, params: Iterable[Any] | None = ()) -> _Cursor:
        return _Cursor(self.raw, sql, params)

    async def executemany(self, sql: str, rows: Iterable[Iterable[Any]]) -> None:
        async with self.raw.cursor() as cur:
            await cur.executemany(to_postgres(sql), [tuple(r) for r in rows])

    async def batch(self, statements: Sequence[tuple[str, Sequence[Any]]],
                    settings: Sequence[str] = ()) -> list[list[Row]]:
        """The rows of each statement, all sent in one round trip (a pipeline), each statement
        prepared once per connection (parsed once, then only bound and run). With `settings`
        (`SET LOCAL` assignments), the statements run in one transaction after them.

        A search is a few small statements; on a busy machine every round trip waits for the
        server and then the client to get a CPU again, so they travel together."""
        raw = self.raw
        cursors = []
        async with raw.pipeline() as pipeline:
            # In pipeline mode BEGIN and COMMIT are queued like the rest: still one round trip.
            async with raw.transaction() if settings else nullcontext():
                for setting in settings:
                    await raw.execute(f"SET LOCAL {setting}", prepare=False)
                for sql, params in statements:
                    cursor = raw.cursor(row_factory=_row_factory)
                    await cursor.execute(to_postgres(sql), tuple(params), prepare=True)
                    cursors.append(cursor)
            await pipeline.sync()
            out = [await c.fetchall() if c.description else [] for c in cursors]
        for cursor in cursors:
            await cursor.close()
        return out


def _may_be_dead(conn, idle_s: float) -> bool:
    """Whether an idle connection heard from the server (or lost it) since it was last used, or
    sat idle long enough (IDLE_CHECK_S) for a middlebox to have dropped it without a word."""
    if conn.closed or conn.broken or idle_s > IDLE_CHECK_S:
        return True
    try:
        # poll, not select: select fails on descriptors past 1,024 (a replica with many clients)
        poller = select.poll()
        poller.register(conn.pgconn.socket, select.POLLIN)
        return bool(poller.poll(0))
    except (OSError, ValueError, _psycopg()[0].Error):
        return True


class PgDatabase:
    """A store in a PostgreSQL database: `write()` for serialised transactions, `read()` for queries."""

    dialect = "postgres"
    readonly = False

    def __init__(self, url: str, max_size: int = 8):
        self.url = url
        self.path = redacted(url)  # what messages and `evoteam doctor` show as the store's place
        self._max_size = max_size
        self._pool = None
        self._background: set[asyncio.Task] = set()
        self._returned: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # connection -> when it went back

    async def open(self) -> PgDatabase:
        _, psycopg_pool = _psycopg()
        psycopg, _ = _psycopg()
        try:
            await asyncio.to_thread(migrate_url, self.url)
            self._pool = psycopg_pool.AsyncConnectionPool(
                self.url, min_size=1, max_size=self._max_size, kwargs={"autocommit": True, **KEEPALIVES},
                open=False, timeout=POOL_TIMEOUT_S)
            await self._pool.open(wait=True, timeout=POOL_TIMEOUT_S)
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            await self.close()
            raise (describe(exc, self.url) or exc) from None
        return self

    def spawn(self, work) -> asyncio.Task:
        """Run `work` (a coroutine) beside the callers, on a connection of its own; it is
        cancelled when the database is closed, so none outlives the pool it reads through."""
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def close(self) -> None:
        for task in list(self._background):
            task.cancel()
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    async def __aenter__(self) -> PgDatabase:
        return await self.open()

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def _checkout(self):
        """A working connection from the pool. After the database restarts, every idle connection
        is dead: the first one found so makes the pool check them all at once (the pool's own
        per-checkout check waits longer after each dead one, so a pool of dead connections could
        outlast the timeout although the database is back).

        Only a connection that may be dead is checked with a round trip to the server: an idle
        connection has nothing to read, so one whose socket is readable heard from the server
        (a restart's termination notice, or the socket closed), and so is one idle longer than
        IDLE_CHECK_S (a middlebox may have dropped it silently). The others go out as they are:
        on a busy machine every round trip waits for the server and the caller to get a CPU
        again, and this one was a third of a search's."""
        psycopg, _ = _psycopg()
        if self._pool is None:
            raise RuntimeError("database is not open")
        conn = await self._pool.getconn()
        try:
            returned = self._returned.get(conn)
            if not _may_be_dead(conn, 0.0 if returned is None else time.monotonic() - returned):
                return conn
            await conn.execute("")
            return conn
        except psycopg.OperationalError:
            await self._pool.putconn(conn)  # broken: the pool discards it and opens another
            await self._pool.check()
            return await self._pool.getconn()
        except BaseException:
            # Cancelled during the check (a client gone): the connection goes back, or every
            # such cancellation would leak one until the pool had none left to give.
            await self._pool.putconn(conn)
            raise

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator:
        psycopg, psycopg_pool = _psycopg()
        try:
            conn = await self._checkout()
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            raise (describe(exc, self.url) or exc) from None
        try:
            yield conn
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            raise (describe(exc, self.url) or exc) from None
        finally:
            self._returned[conn] = time.monotonic()
            await self._pool.putconn(conn)

    @asynccontextmanager
    async def write(self, scope: str | None = None) -> AsyncIterator[PgConnection]:
        """A write transaction; commits on success, rolls back on any error.

        `scope`: the run this transaction writes, when every check it makes reads only that
        run's rows; it is then serialised with the run's other writers (any process) and with
        store-wide writes, not with other runs' writers. Without a scope it is serialised with
        every writer of the database."""
        async with self._connection() as conn:
            async with conn.transaction():
                # As SQLite's busy timeout: a writer stuck behind a lock that is never let go (a
                # replica hung mid-transaction) fails in one line instead of waiting for ever.
                await conn.execute("SELECT set_config('lock_timeout', %s, true)", (f"{BUSY_TIMEOUT_MS}ms",))
                if scope is None:
                    await conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
                else:
                    # Always the store lock first, so a store-wide writer and run writers never
                    # wait on each other in a circle.
                    await conn.execute("SELECT pg_advisory_xact_lock_shared(%s), "
                                       "pg_advisory_xact_lock(%s, hashtext(%s))",
                                       (WRITE_LOCK, RUN_LOCK_CLASS, scope))
                yield PgConnection(conn)

    @asynccontextmanager
    async def read(self) -> AsyncIterator[PgConnection]:
        """A connection for reads; each statement sees every committed write."""
        async with self._connection() as conn:
            yield PgConnection(conn)


class _SyncConnection:
    """A blocking psycopg connection with sqlite3's `execute(sql, params)`, for migration steps
    written as Python callables."""

    dialect = "postgres"

    def __init__(self, conn):
        self.raw = conn

    def execute(self, sql: str, params: Iterable[Any] | None = None):
        cur = self.raw.cursor(row_factory=_row_factory)
        params = tuple(params) if params is not None else None
        cur.execute(to_postgres(sql, params=params is not None), params, prepare=False)
        return cur


def advisory_key(*parts: str) -> int:
    """A stable signed 64-bit key for a lock name (PostgreSQL's advisory locks take a bigint)."""
    digest = hashlib.sha256("\x00".join(("evoteam", *parts)).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _hold(conn, key: int, waiting: str = "") -> None:
    """Take the session advisory lock `key` on `conn` (autocommit), asking again every
    LOCK_POLL_S; `waiting`: a line said once on stderr when someone else holds it.

    Not a blocking pg_advisory_lock: a statement waiting holds a snapshot all along, and `CREATE
    INDEX CONCURRENTLY` (OutsideTransaction steps) waits for every transaction older than its
    own. A server blocked on a lock that the building session holds would deadlock with it, and
    PostgreSQL would end one of the two with an error. Between tries this one holds nothing."""
    while not conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0]:
        if waiting:
            print(waiting, file=sys.stderr, flush=True)
            waiting = ""
        time.sleep(LOCK_POLL_S)


def migrate_url(url: str) -> dict[str, int]:
    """Bring the database at `url` up to every registered component's latest version, under an
    advisory lock (replicas starting at once migrate one after the other; the later ones find
    nothing to do)."""
    from evoteam.servers.knowledge import db as sqlite_db

    psycopg, _ = _psycopg()
    sqlite_db._load_components()
    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=10)
    except psycopg.OperationalError as exc:
        raise (describe(exc, url) or exc) from None
    try:
        _hold(conn, MIGRATE_LOCK)
        conn.execute("CREATE TABLE IF NOT EXISTS schema_versions "
                     "(component TEXT PRIMARY KEY, version INTEGER NOT NULL)")
        return {component: _migrate(conn, url, component, steps)
                for component, steps in sorted(sqlite_db.postgres_migrations().items())}
    finally:
        conn.close()  # frees every session lock it holds


def _version(conn, component: str) -> int:
    row = conn.execute("SELECT version FROM schema_versions WHERE component = %s", (component,)).fetchone()
    return row[0] if row else 0


def _migrate(conn, url: str, component: str, steps: list) -> int:
    """One component's steps from its recorded version on, under the migration lock: the plain
    steps one transaction, cut before each OutsideTransaction step, whose `prepare` runs between
    two transactions (`_outside`) and whose `finish` opens the next one."""
    prepared, step_lock = None, None
    while True:
        with conn.transaction():
            current = step = _version(conn, component)
            overtaken = prepared is not None and current > prepared
            if current > len(steps):
                raise StoreFailure(f"the PostgreSQL store {redacted(url)} has {component} schema v{current}, "
                                   f"newer than this evoteam knows (v{len(steps)}): upgrade evoteam")
            while step < len(steps):
                form = steps[step]
                if isinstance(form, OutsideTransaction):
                    if step != prepared:
                        break
                    form = form.finish
                if callable(form):
                    form(_SyncConnection(conn))
                else:
                    conn.execute(form)
                step += 1
            if step > current:
                conn.execute("INSERT INTO schema_versions (component, version) VALUES (%s, %s) "
                             "ON CONFLICT (component) DO UPDATE SET version = excluded.version", (component, step))
        if step_lock is not None:  # the prepared step is recorded (by this server or, if not, by another)
            if overtaken and steps[prepared].discard is not None:  # an earlier evoteam did it whole
                conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATE_LOCK,))
                _outside(conn, component, prepared, steps[prepared].discard, None)
            conn.execute("SELECT pg_advisory_unlock(%s)", (step_lock,))
            prepared, step_lock = None, None
        if step == len(steps):
            return step
        step_lock = advisory_key("migration", component, str(step))
        conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATE_LOCK,))
        _hold(conn, step_lock, f"evoteam: {component} v{step + 1}: another server is upgrading the PostgreSQL "
                               f"store {redacted(url)}; waiting for it...")
        _outside(conn, component, step, steps[step].prepare, step)
        prepared = step


def _outside(conn, component: str, step: int, work, only_at: int | None) -> None:
    """Run an OutsideTransaction step's `prepare` (`only_at` its step: only while that is the
    recorded version, else another server did it) or `discard` (None), holding the step's lock
    but not the migration lock, outside any transaction: other servers may open the store
    meanwhile. One of an earlier evoteam waits for the migration lock blocking, holding a snapshot
    that a concurrent index build waits for (see `_hold`); and once it has the lock it builds the
    index inside its own transaction, so PostgreSQL may end one of the two as a deadlock: this
    server then looks again, and tries again unless the other's commit did the step. Returns
    holding the migration lock again; the step's is freed once its version is recorded."""
    psycopg, _ = _psycopg()
    try:
        for attempt in range(DEADLOCK_TRIES):
            if only_at is not None and _version(conn, component) != only_at:
                return  # done while this server waited
            try:
                return work(_SyncConnection(conn))
            except psycopg.errors.DeadlockDetected:
                if attempt == DEADLOCK_TRIES - 1:
                    raise
                print(f"evoteam: {component} v{step + 1}: another server upgraded the store at the same time; "
                      "looking again", file=sys.stderr, flush=True)
    finally:
        _hold(conn, MIGRATE_LOCK)
