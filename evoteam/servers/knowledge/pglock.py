"""Locks held in a PostgreSQL database (session advisory locks), for what must be one at a time
across machines that share a store: the one driver of a run. The server frees such a lock when
the holder's connection ends, so a driver killed with SIGKILL never blocks its successor, as the
file lock beside a SQLite store is freed by the OS."""

from __future__ import annotations

# advisory_key lives in pg.py, whose migrations name their step locks with it too.
from evoteam.servers.knowledge.pg import _psycopg, advisory_key, describe, redacted


class AdvisoryLock:
    """An exclusive lock named by `parts` in the database at `url`, held by a connection of its own."""

    def __init__(self, url: str, *parts: str):
        self.url = url
        self.key = advisory_key(*parts)
        self._conn = None

    def try_acquire(self) -> bool:
        """Take the lock if nobody holds it; False if someone does."""
        psycopg, _ = _psycopg()
        try:
            conn = psycopg.connect(self.url, autocommit=True, connect_timeout=10)
        except psycopg.OperationalError as exc:
            raise (describe(exc, self.url) or exc) from None
        (got,) = conn.execute("SELECT pg_try_advisory_lock(%s)", (self.key,)).fetchone()
        if not got:
            conn.close()
            return False
        self._conn = conn
        return True

    def release(self) -> None:
        if self._conn is not None:
            try:
                self._conn.execute("SELECT pg_advisory_unlock(%s)", (self.key,))
            except Exception:  # noqa: BLE001 - closing the connection frees it anyway
                pass
            self._conn.close()
            self._conn = None

    @property
    def where(self) -> str:
        return redacted(self.url)
