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


def costs_unrecorded(cost_lines: int, has_work: bool) -> bool:
    """True when the run has done work (candidates, team versions) and no cost was recorded
    (team.budget and team_status; here so the quick `team status` read has it without the store)."""
    return has_work and cost_lines == 0
