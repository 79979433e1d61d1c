"""All database access of the team component, in one class.

`TeamStore` takes and returns pydantic models only, so that it can later be proxied to a
shared knowledge server without touching its callers. It works on the embedded store
(`LocalKnowledgeStore`); project scoping and provenance follow the knowledge store: a run
outside the caller's project is reported as missing.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime
from typing import Any

from evoteam.errors import DomainError
from evoteam.servers.knowledge.errors import NotFound
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.rows import new_id, now, provenance_of
from evoteam.servers.knowledge.models import Run
from evoteam.servers.knowledge.scope import Ref, scoped
from evoteam.servers.team import readsql
from evoteam.servers.knowledge.store import KnowledgeStore
from evoteam.servers.team.models import (
    TERMINAL,
    RoleSession,
    RunnerKind,
    SessionStatus,
    SessionUpdate,
    SupervisorWake,
    TeamDesign,
    TeamVersion,
    TeamVersionSummary,
)


def _dt(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


class TeamStore:
    """Team versions, role sessions and supervisor wakes of the runs in a knowledge store."""

    def __init__(self, store: KnowledgeStore):
        if not isinstance(store, LocalKnowledgeStore):
            raise DomainError("the team tools need the embedded store for now (EVOTEAM_DB); a shared knowledge "
                              "server (--knowledge-url) does not hold team versions yet")
        self.kb = store
        self.db = store.db

    @property
    def actor(self):
        return self.kb.actor

    @scoped(Ref("run_id", "runs"))
    async def run(self, run_id: str) -> Run:
        """The run, if the caller may see it (NotFound otherwise)."""
        return await self.kb.get_run(run_id)

    # ------------------------------------------------------------ versions

    def _version(self, row: sqlite3.Row) -> TeamVersion:
        design = json.loads(row["design"])
        return TeamVersion(**design, version=row["version"], created_by=provenance_of(row))

    @scoped(Ref("design.run_id", "runs"))
    async def create_version(self, design: TeamDesign) -> TeamVersion:
        """Store the next version of the run's team (1, 2, ...) and make it the run's current one."""
        run = await self.run(design.run_id)
        a = self.actor
        async with self.db.write() as conn:
            async with conn.execute("SELECT coalesce(max(version), 0) FROM team_versions WHERE run_id = ?",
                                    (design.run_id,)) as cur:
                (last,) = await cur.fetchone()
            version = last + 1
            await conn.execute(
                "INSERT INTO team_versions (run_id, version, design, project, user, client, role, team_version, "
                "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (design.run_id, version, design.model_dump_json(), run.project, a.user, a.client, a.role,
                 a.team_version, now()))
            await conn.execute("UPDATE runs SET current_version = ? WHERE id = ?", (version, design.run_id))
        return await self.get_version(design.run_id, version)

    @scoped(Ref("run_id", "runs"))
    async def get_version(self, run_id: str, version: int | None = None) -> TeamVersion:
        """A stored version; None means the latest."""
        await self.run(run_id)
        async with self.db.read() as conn:
            if version is None:
                sql, args = ("SELECT * FROM team_versions WHERE run_id = ? ORDER BY version DESC LIMIT 1",
                             (run_id,))
            else:
                sql, args = readsql.VERSION, (run_id, version)
            async with conn.execute(sql, args) as cur:
                row = await cur.fetchone()
        if row is None:
            if version is None:
                raise NotFound(f"run {run_id} has no team yet: design one with design_team")
            raise NotFound(f"run {run_id} has no team version {version}: list_versions shows the versions")
        return self._version(row)

    @scoped(Ref("run_id", "runs"))
    async def latest_version_number(self, run_id: str) -> int | None:
        async with self.db.read() as conn:
            async with conn.execute("SELECT max(version) FROM team_versions WHERE run_id = ?", (run_id,)) as cur:
                (value,) = await cur.fetchone()
        return value

    @scoped(Ref("run_id", "runs"))
    async def list_versions(self, run_id: str) -> list[TeamVersionSummary]:
        await self.run(run_id)
        async with self.db.read() as conn:
            async with conn.execute("SELECT * FROM team_versions WHERE run_id = ? ORDER BY version",
                                    (run_id,)) as cur:
                rows = await cur.fetchall()
        out = []
        for row in rows:
            v = self._version(row)
            out.append(TeamVersionSummary(run_id=run_id, version=v.version, roles=[r.name for r in v.roles],
                                          diagnosis=v.diagnosis[:500], created_at=v.created_by.created_at))
        return out

    # ------------------------------------------------------------ role sessions

    def _session(self, row: sqlite3.Row) -> RoleSession:
        return RoleSession(
            id=row["id"], run_id=row["run_id"], version=row["version"], role=row["role"], slug=row["slug"],
            runner=row["runner"], status=row["status"], stage=row["stage"], cap_usd=row["cap_usd"],
            cost_usd=row["cost_usd"], turns=row["turns"], last_message=row["last_message"], error=row["error"],
            session_id=row["session_id"], worktree=row["worktree"], branch=row["branch"], owner=row["owner"],
            started_at=_dt(row["started_at"]), ended_at=_dt(row["ended_at"]),
            updated_at=datetime.fromisoformat(row["updated_at"]))

    @scoped(Ref("run_id", "runs"))
    async def create_session(self, run_id: str, version: int, role: str, slug: str, runner: RunnerKind,
                             status: SessionStatus = "planned", stage: int = 0, cap_usd: float | None = None,
                             owner: str | None = None) -> RoleSession:
        run = await self.run(run_id)
        session_id = new_id("rs")
        at = now()
        async with self.db.write() as conn:
            await conn.execute(
                "INSERT INTO role_sessions (id, run_id, version, role, slug, runner, status, stage, cap_usd, owner, "
                "project, user, started_at, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (session_id, run_id, version, role, slug, runner, status, stage, cap_usd, owner, run.project,
                 self.actor.user, at if status == "running" else None, at, at))
        return await self.get_session(session_id)

    @scoped(Ref("session_id", "role_sessions"))
    async def get_session(self, session_id: str) -> RoleSession:
        async with self.db.read() as conn:
            async with conn.execute("SELECT * FROM role_sessions WHERE id = ?", (session_id,)) as cur:
                row = await cur.fetchone()
        if row is None:
            raise NotFound(f"no role session {session_id!r}: team_status lists the sessions of a run")
        await self.run(row["run_id"])
        return self._session(row)

    @scoped(Ref("session_id", "role_sessions"))
    async def update_session(self, session_id: str, update: SessionUpdate) -> RoleSession:
        """Apply a partial update; sets started_at on the first 'running' and ended_at on an end state.
        An ended session keeps its end state (a late 'running' or 'finished' does not revive it)."""
        current = await self.get_session(session_id)
        values: dict[str, Any] = {k: v for k, v in update.model_dump(exclude_none=True).items()}
        if current.status in TERMINAL:
            # The first end state and its reason win (e.g. stopped, then the runner reports
            # finished); a late 'running' never revives an ended session. Cost and turns still count.
            values.pop("status", None)
            values.pop("error", None)
        if values.get("error") == "":
            values["error"] = None  # "" clears an old error (e.g. when a session is started again)
        at = now()
        status = values.get("status")
        if status == "running" and current.started_at is None:
            values["started_at"] = at
        if status in TERMINAL:
            values["ended_at"] = at
        if "last_message" in values:
            values["last_message"] = values["last_message"][-2_000:]
        values["updated_at"] = at
        sets = ", ".join(f"{k} = ?" for k in values)
        async with self.db.write() as conn:
            await conn.execute(f"UPDATE role_sessions SET {sets} WHERE id = ?", (*values.values(), session_id))
        return await self.get_session(session_id)

    @scoped(Ref("run_id", "runs"))
    async def list_sessions(self, run_id: str, version: int | None = None,
                            status: list[SessionStatus] | None = None) -> list[RoleSession]:
        """Sessions of a run (of one version), oldest first."""
        await self.run(run_id)
        where, args = "run_id = ?", [run_id]
        if version is not None:
            where += " AND version = ?"
            args.append(version)
        if status:
            where += f" AND status IN ({', '.join('?' for _ in status)})"
            args.extend(status)
        async with self.db.read() as conn:
            async with conn.execute(readsql.sessions(where), args) as cur:
                return [self._session(r) for r in await cur.fetchall()]

    @scoped(Ref("run_id", "runs"))
    async def roles_not_ended(self, run_id: str, version: int) -> list[str]:
        """The names of a version's roles whose newest session has not ended (none started: planned)."""
        latest = await self.latest_sessions(run_id, version)
        return [role.name for role in (await self.get_version(run_id, version)).roles
                if role.slug not in latest or latest[role.slug].status not in TERMINAL]

    @scoped(Ref("run_id", "runs"))
    async def latest_sessions(self, run_id: str, version: int) -> dict[str, RoleSession]:
        """Role slug -> its most recent session in this version."""
        latest: dict[str, RoleSession] = {}
        for session in await self.list_sessions(run_id, version):
            latest[session.slug] = session
        return latest

    # ------------------------------------------------------------ supervisor wakes

    def _wake(self, row: sqlite3.Row) -> SupervisorWake:
        return SupervisorWake(
            id=row["id"], run_id=row["run_id"], seq=row["seq"], trigger=row["trigger"], status=row["status"],
            version_before=row["version_before"], version_after=row["version_after"], cost_usd=row["cost_usd"],
            session_id=row["session_id"], error=row["error"], owner=row["owner"],
            started_at=datetime.fromisoformat(row["started_at"]), ended_at=_dt(row["ended_at"]))

    @scoped(Ref("run_id", "runs"))
    async def start_wake(self, run_id: str, trigger: str, version_before: int | None,
                         owner: str | None = None) -> SupervisorWake:
        run = await self.run(run_id)
        wake_id = new_id("wake")
        async with self.db.write() as conn:
            async with conn.execute("SELECT coalesce(max(seq), 0) FROM supervisor_wakes WHERE run_id = ?",
                                    (run_id,)) as cur:
                (last,) = await cur.fetchone()
            await conn.execute(
                "INSERT INTO supervisor_wakes (id, run_id, seq, trigger, status, version_before, owner, project, "
                "user, started_at) VALUES (?, ?, ?, ?, 'running', ?, ?, ?, ?, ?)",
                (wake_id, run_id, last + 1, trigger, version_before, owner, run.project, self.actor.user, now()))
        return await self._get_wake(wake_id)

    async def _get_wake(self, wake_id: str) -> SupervisorWake:
        async with self.db.read() as conn:
            async with conn.execute("SELECT * FROM supervisor_wakes WHERE id = ?", (wake_id,)) as cur:
                row = await cur.fetchone()
        if row is None:
            raise NotFound(f"no supervisor wake {wake_id!r}")
        return self._wake(row)

    @scoped(Ref("wake_id", "supervisor_wakes"))
    async def end_wake(self, wake_id: str, status: str, version_after: int | None = None,
                       cost_usd: float = 0.0, session_id: str | None = None,
                       error: str | None = None) -> SupervisorWake:
        async with self.db.write() as conn:
            await conn.execute(
                "UPDATE supervisor_wakes SET status = ?, version_after = ?, cost_usd = ?, session_id = ?, error = ?, "
                "ended_at = ? WHERE id = ?", (status, version_after, cost_usd, session_id, error, now(), wake_id))
        return await self._get_wake(wake_id)

    @scoped(Ref("run_id", "runs"))
    async def list_wakes(self, run_id: str, status: str | None = None) -> list[SupervisorWake]:
        await self.run(run_id)
        where, args = "run_id = ?", [run_id]
        if status:
            where += " AND status = ?"
            args.append(status)
        async with self.db.read() as conn:
            async with conn.execute(f"SELECT * FROM supervisor_wakes WHERE {where} ORDER BY seq", args) as cur:
                return [self._wake(r) for r in await cur.fetchall()]
