"""Which database a store lives in, chosen by its location: a file path is an embedded SQLite
file (the default); a `postgresql://` URL is a PostgreSQL database shared by several servers.
Everything above the store is unaware of the choice."""

from __future__ import annotations

from pathlib import Path

from typing import TYPE_CHECKING

from evoteam.servers.knowledge.db import Database
from evoteam.config import is_store_url as is_postgres_url

if TYPE_CHECKING:
    from evoteam.servers.knowledge.pg import PgDatabase


def open_database(target: str | Path) -> Database | PgDatabase:
    """An unopened database for `target` (enter it with `async with`). The PostgreSQL layer is
    imported only for a PostgreSQL URL: an embedded store's commands do not pay for it."""
    if is_postgres_url(target):
        from evoteam.servers.knowledge.pg import PgDatabase

        return PgDatabase(str(target))
    return Database(Path(target))


def describe_location(target: str | Path) -> str:
    """The store's place for messages (a PostgreSQL URL without its password)."""
    if is_postgres_url(target):
        from evoteam.servers.knowledge.pg import redacted

        return redacted(str(target))
    return str(target)
