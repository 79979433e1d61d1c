"""The team component's read rules that the command line also applies on its own (a role's
slug, the states that end a session, the queries of a version and of its sessions), with no
third-party import: the team store (store.py) and `evoteam team status`'s quick read
(quickstatus.py) share them, so the two cannot drift apart."""

from __future__ import annotations

import re

# A session in one of these states has ended (models.SessionStatus lists every state).
TERMINAL: frozenset[str] = frozenset({"finished", "failed", "over_budget", "stopped", "skipped"})

_SLUG = re.compile(r"[^a-z0-9]+")

# One stored version of a run's team (parameters: run id, version).
VERSION = "SELECT * FROM team_versions WHERE run_id = ? AND version = ?"


def slugify(name: str) -> str:
    """The file and agent name of a role: lowercase words joined by '-' ("Profiling Scientist"
    -> "profiling-scientist")."""
    return _SLUG.sub("-", name.lower()).strip("-")[:60].strip("-")


def sessions(where: str) -> str:
    """The query of a run's role sessions matching `where`, oldest first."""
    return f"SELECT * FROM role_sessions WHERE {where} ORDER BY created_at, id"


def team_interval(interval: list[float] | None, unknown: bool) -> list[float] | None:
    """The best's interval as team_status gives it: only a 95% one (a range of too few runs, or a
    zero-width point, is not one; knowledge.get_run says what it is)."""
    return interval if interval and not unknown and interval[0] != interval[1] else None
