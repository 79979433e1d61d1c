"""Project isolation, enforced in one place for every store service.

Every method a store service offers (the `KnowledgeStore` interface and each component store:
retrieval, team, and any added later) is declared with `@scoped(...)`: the arguments that name
stored rows, and the table holding each. A project-scoped caller (a token limited to one
project) reaches a method only through `services.guard`, which checks, before the method runs, that
every id it names is a row of the caller's project. A row of another project and a row that
does not exist get the same error, naming nothing but the id the caller gave.

A method without a declaration is not offered at all: the `/store` endpoint dispatches only
declared methods (services.service_methods), and tests/isolation enumerates every method and
tool, so a new method cannot forget its scope. A method declared with no ids (`@scoped()`) names
no stored rows; it must filter by `actor.project` itself (list_runs, search, stats), which the
isolation suite checks against seeded data of another project.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from evoteam.servers.knowledge.errors import Invalid, NotFound

F = TypeVar("F", bound=Callable[..., Any])

# table -> (what the caller calls it, where to find the ones they may use). Every table named
# here has `id` and `project` columns.
NOUNS: dict[str, tuple[str, str]] = {
    "runs": ("run", "list_runs shows the runs you can use, start_run starts one"),
    "learnings": ("learning", "learnings(view=list) shows a run's learnings"),
    "history": ("history entry", "history(view=list) shows a run's entries"),
    "artifacts": ("artifact", "list_artifacts shows a run's artifacts"),
    "candidates": ("candidate", "best_candidates or trajectory list a run's candidates"),
    "costs": ("cost entry", "spend shows a run's costs"),
    "retrieval_documents": ("document", "ids look like doc_..., as search and lookup list them"),
    "retrieval_gates": ("gate", "call gate first and pass the gate_id it returns"),
    "retrieval_searches": ("search", "pass the search_id that search returned"),
    "role_sessions": ("role session", "team_status lists the sessions of a run"),
    "supervisor_wakes": ("supervisor wake", "list_wakes lists a run's wakes"),
}

# id prefixes, for arguments that may name rows of several tables (evidence: cand_ or art_)
PREFIXES = {"candidates": "cand_", "artifacts": "art_"}


@dataclass(frozen=True)
class Ref:
    """An argument (dotted path; `[]` iterates a list) naming rows of one of `tables`."""

    path: str
    tables: tuple[str, ...]

    def __init__(self, path: str, *tables: str):
        unknown = [t for t in tables if t not in NOUNS]
        if not tables or unknown:
            raise ValueError(f"Ref {path!r}: tables must be among {sorted(NOUNS)}")
        object.__setattr__(self, "path", path)
        object.__setattr__(self, "tables", tables)


@dataclass(frozen=True)
class ServerChosen:
    """An argument a scoped caller may not set: the server picks the id (a caller-chosen id
    that collides would tell whether another project holds it)."""

    path: str


Declaration = Ref | ServerChosen


def scoped(*refs: Declaration) -> Callable[[F], F]:
    """Declare the ids a store method's arguments name (see the module docstring)."""

    def mark(fn: F) -> F:
        fn.__scope__ = tuple(refs)  # type: ignore[attr-defined]
        return fn

    return mark


def declaration(cls: type, method: str) -> tuple[Declaration, ...] | None:
    return getattr(getattr(cls, method, None), "__scope__", None)


def missing(table: str, ref_id: Any) -> NotFound:
    """The one error for an id that is not the caller's, whether it exists elsewhere or not."""
    noun, hint = NOUNS[table]
    return NotFound(f"no {noun} {ref_id!r} visible to you: {hint}")


def values_at(value: Any, path: str) -> Iterator[Any]:
    """The values at a dotted path through models, dicts and lists (`name[]` iterates)."""
    head, _, rest = path.partition(".")
    many = head.endswith("[]")
    key = head[:-2] if many else head
    inner = value.get(key) if isinstance(value, dict) else getattr(value, key, None)
    if inner is None:
        return
    items = inner if many else [inner]
    for item in items:
        if rest:
            yield from values_at(item, rest)
        elif item is not None:
            yield item


async def check(db, project: str, cls: type, method: str, arguments: dict[str, Any]) -> None:
    """Refuse the call unless every id its arguments name is a row of `project`."""
    refs = declaration(cls, method)
    if refs is None:
        raise Invalid(f"{method} is not a store method")
    wanted: list[tuple[Ref, Any]] = []
    for ref in refs:
        for value in values_at(arguments, ref.path):
            if isinstance(ref, ServerChosen):
                raise Invalid(f"{ref.path.rsplit('.', 1)[-1]} is chosen by the server on a shared "
                              f"knowledge server: omit it")
            wanted.append((ref, value))
    if not wanted:
        return
    async with db.read() as conn:
        for ref, value in wanted:
            if len(ref.tables) > 1 and isinstance(value, str) and not value.startswith(
                    tuple(PREFIXES.get(t, "") for t in ref.tables)):
                continue  # an id of none of these kinds: the method refuses it in its own words
            if not isinstance(value, str) or not await _owned(conn, ref.tables, value, project):
                raise missing(ref.tables[0], value)


async def _owned(conn, tables: tuple[str, ...], ref_id: str, project: str) -> bool:
    for table in tables:
        async with conn.execute(f"SELECT project FROM {table} WHERE id = ?", (ref_id,)) as cur:
            row = await cur.fetchone()
        if row is not None:
            return row[0] == project
    return False


class Guarded:
    """A store service seen by a project-scoped caller: only declared methods, each checked."""

    def __init__(self, target: Any, cls: type, db: Any, project: str):
        self._target, self._cls, self._db, self._project = target, cls, db, project

    @property
    def actor(self):
        return self._target.actor

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or declaration(self._cls, name) is None:
            raise AttributeError(f"{name} is not a declared store method")
        fn = getattr(self._cls, name)
        method = getattr(self._target, name)
        signature = inspect.signature(fn)

        @functools.wraps(method)
        async def call(*args, **kwargs):
            bound = signature.bind(None, *args, **kwargs)
            bound.apply_defaults()
            await check(self._db, self._project, self._cls, name, bound.arguments)
            return await method(*args, **kwargs)

        return call
