"""The schema's history: each component's ordered migrations, registered by the component's own
module (SQLite text or a callable), and the PostgreSQL forms of the steps that need one.

A registry with no imports of the components: they import it to register themselves, and the
database layer (db.py, pg.py) reads it after loading them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass

# component -> ordered list of migrations; a migration is SQL text or a callable on a
# sqlite3.Connection (run inside the migration's transaction).
Migration = str | Callable[[sqlite3.Connection], None]
_MIGRATIONS: dict[str, list[Migration]] = {}
# The same history on PostgreSQL: per component, the PostgreSQL form of the steps whose SQLite
# text the dialect rewrite cannot carry (full-text search, triggers); the others are rewritten
# (dialect.py). Version numbers are the same on both backends. A form may be an
# OutsideTransaction (below), which only PostgreSQL's migrations know.
_PG_FORMS: dict[str, dict[int, Migration | OutsideTransaction]] = {}


@dataclass(frozen=True)
class OutsideTransaction:
    """A PostgreSQL form of a step whose long part must not run inside a transaction (`CREATE
    INDEX CONCURRENTLY`, which lets other servers write the table while it runs, but is refused
    inside a transaction block).

    `prepare` runs first, on a connection in autocommit mode, by one server at a time and only
    while the component's recorded version is still this step's (pg.py `migrate_url`). It may be
    killed midway and must then be safe to run again: the next server to open the store does.
    Then `finish`, a step like any other, runs in the transaction that records the step's
    version: the version moves only once the prepared work is in place. `discard`, when given,
    runs (outside a transaction) if the step turned out recorded by another server after this
    one prepared: an earlier evoteam, which does the whole step in one transaction, may do so;
    what this server prepared is then left over."""

    prepare: Callable
    finish: Migration
    discard: Callable | None = None


def register_migrations(component: str, migrations: Sequence[Migration]) -> None:
    """Declare the ordered schema migrations of one component. Append, never edit."""
    _MIGRATIONS[component] = list(migrations)


def register_postgres_form(component: str, step: int, form: Migration | OutsideTransaction) -> None:
    """Give step `step` (0-based) of `component` its own PostgreSQL form."""
    _PG_FORMS.setdefault(component, {})[step] = form


def postgres_migrations() -> dict[str, list[Migration | OutsideTransaction]]:
    """Every component's migrations in PostgreSQL's dialect."""
    from evoteam.servers.knowledge.dialect import to_postgres

    out: dict[str, list[Migration | OutsideTransaction]] = {}
    for component, steps in _MIGRATIONS.items():
        forms = _PG_FORMS.get(component, {})
        out[component] = [
            forms[i] if i in forms else (step if callable(step) else to_postgres(step, params=False, ddl=True))
            for i, step in enumerate(steps)
        ]
    return out


def is_current(versions: dict[str, int] | None) -> bool:
    return versions is not None and all(versions.get(c, 0) == len(m) for c, m in _MIGRATIONS.items())


def newer_than_known(versions: dict[str, int] | None) -> list[str]:
    """The components whose schema in the file is newer than this evoteam knows."""
    return [c for c, m in _MIGRATIONS.items() if versions and versions.get(c, 0) > len(m)]
