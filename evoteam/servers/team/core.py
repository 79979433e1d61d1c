"""The team core: what the `team` tools and the headless supervisor both call.

`TeamService` designs and stores team versions, writes the subagent files, builds spawn
plans, runs headless roles (as asyncio tasks in this process, each isolated from the
others), stops them, records results, reflections and costs, and reports status and budget.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from pathlib import Path
from typing import Any, Literal

from evoteam.errors import DomainError
from evoteam.evalqueue import summarise
from evoteam.report.summary import RunSummary, summarise_run
from evoteam.servers.knowledge.bestline import run_interval
from evoteam.servers.knowledge.listing import newest_history
from evoteam.servers.knowledge.models import HistoryEntry, HistoryEntryCreate, Run
from evoteam.servers.knowledge.pairedbest import with_paired_best
from evoteam.servers.knowledge.store import KnowledgeStore
from evoteam.servers.team.budget import budget_report
from evoteam.servers.team.readsql import costs_unrecorded
from evoteam.servers.team.briefing import (
    best_candidate,
    missing_read_warnings,
    missing_reads,
    place_roles,
    shared_tree_warnings,
    with_missing_noted,
    worktree_note,
)
from evoteam.servers.team.cost import PriceTable, find_transcript, record_cost_as, record_transcript_cost
from evoteam.plugin.gitexclude import keep_out_of_git
from evoteam.servers.team.launch import proc_file
from evoteam.servers.team.materialise import (
    GENERIC_AGENT,
    materialise,
    role_brief,
    role_description,
    role_marker,
    role_tools,
)
from evoteam.servers.team.toolnaming import ToolNaming
from evoteam.servers.team.models import (
    ACTIVE,
    TERMINAL,
    BudgetReport,
    DesignResult,
    RoleSession,
    RoleSpec,
    RoleState,
    SessionStatus,
    SessionUpdate,
    SpawnPlan,
    TeamDesign,
    TeamStatus,
    TeamVersion,
    TeamVersionSummary,
)
from evoteam.servers.team.plan import spawn_plan
from evoteam.servers.team.runners import Progress, RoleJob, RoleOutcome, RunnerFactory, default_runner_factory
from evoteam.servers.team.sentences import sentence_tail
from evoteam.servers.team.store import TeamStore
from evoteam.servers.team.validate import stage_of, validate_design
from evoteam.servers.team.worktrees import ensure_worktree

log = logging.getLogger("evoteam.team")

SUPERVISOR_ROLE = "supervisor"


def new_owner(label: str = "team") -> str:
    """An id for this process's runtime, recorded on the sessions it runs."""
    return f"{label}:{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


def role_env(settings: Any) -> dict[str, str]:
    """Environment that lets a role's MCP servers reach the same store as its supervisor."""
    env: dict[str, str] = {}
    if getattr(settings, "knowledge_url", None):
        env["EVOTEAM_KNOWLEDGE_URL"] = settings.knowledge_url
        if settings.token:
            env["EVOTEAM_TOKEN"] = settings.token
    elif getattr(settings, "db", None):
        env["EVOTEAM_DB"] = str(settings.db)
    if getattr(settings, "project", None):
        env["EVOTEAM_PROJECT"] = settings.project
    return env


class TeamService:
    """`team` is a `TeamStore` (or its remote proxy from `component_store("team", store)`);
    `kb` is the knowledge store it works on (default: the team store's own)."""

    def __init__(self, team: TeamStore, *, kb: KnowledgeStore | None = None, project_dir: Path | None = None, naming: ToolNaming | None = None,
                 runner_factory: RunnerFactory | None = None, owner: str | None = None,
                 prices: PriceTable | None = None, default_runner: Literal["claude", "codex"] = "claude",
                 subagent_type: str = GENERIC_AGENT, spawn_mode: Literal["run", "queue"] = "run",
                 env: dict[str, str] | None = None, default_role_cap_usd: float | None = None,
                 write_agent_files: bool = True, queue_dir: Path | None = None):
        self.team = team
        # Where this host's bench pool and Ray queues say who runs and waits (team_status).
        self.queue_dir = queue_dir
        self.kb = kb if kb is not None else getattr(team, "kb", None) or team.store
        self.project_dir = Path(project_dir or os.getcwd())
        self.naming = naming or ToolNaming()
        self.runner_factory = runner_factory or default_runner_factory()
        self.owner = owner or new_owner()
        self.prices = prices or PriceTable()
        self.default_runner = default_runner
        self.subagent_type = subagent_type
        self.spawn_mode = spawn_mode
        self.env = env or {}
        self.default_role_cap_usd = default_role_cap_usd
        self.write_agent_files = write_agent_files
        self._tasks: dict[str, asyncio.Task] = {}
        self._stopping: dict[str, SessionStatus] = {}
        self._changed = asyncio.Condition()
        self._generation = 0

    # ------------------------------------------------------------ versions

    async def design_team(self, design: TeamDesign) -> DesignResult:
        """Validate and store version v+1, write its subagent files, plan its start."""
        run = await self.team.run(design.run_id)
        spend = await self.kb.spend(design.run_id)
        warnings = validate_design(design, spend.left_usd)
        if run.status in ("finished", "failed", "budget_spent"):
            raise DomainError(f"run {run.id} is {run.status}; start a new run to design more teams")
        missing = missing_reads(design, self.project_dir)
        team = await self.team.create_version(with_missing_noted(design, missing))
        superseded = await self._supersede(run.id, team.version)
        if superseded:
            warnings.append(f"stopped {len(superseded)} role session(s) of earlier versions: "
                            f"{', '.join(f'{s.role} (v{s.version})' for s in superseded)}")
        if team.version > 1 and not any(e.team_version == team.version - 1
                                        for e in await newest_history(self.kb, run.id, 100)):
            # Its roles' brief lists the history as a read: empty, it told a role nothing of why
            # its team exists (model-play mp41, 2026-12-05).
            warnings.append(f"team v{team.version - 1} has no entry in the evolution history: team.reflect on it now, "
                            f"before v{team.version}'s roles start (their brief has them read the history first)")
        stages = stage_of(team)
        places = await place_roles(team, run, self.project_dir)
        warnings += shared_tree_warnings(team, places)
        warnings += missing_read_warnings(missing, self.project_dir)
        for role in team.roles:
            session = await self.team.create_session(run.id, team.version, role.name, role.slug, "subagent",
                                                     status="planned", stage=stages[role.slug])
            if places[role.slug].worktree:
                await self.team.update_session(session.id, SessionUpdate(worktree=places[role.slug].worktree,
                                                                         branch=places[role.slug].branch))
        notes = {slug: place.note for slug, place in places.items()}
        run, best = await best_candidate(self.kb, run)
        files: list[str] = []
        if self.write_agent_files:
            try:
                kept: list[Path] = []
                files = [str(p) for p in materialise(team, run, self.project_dir, self.naming, skipped=kept,
                                                     notes=notes, best=best)]
                warnings += [f"left your own agent file {p} alone; role {p.stem} is spawned through the plan"
                             for p in kept]
            except OSError as exc:
                warnings.append(f"could not write the subagent files under {self.project_dir}/.claude/agents: "
                                f"{exc}; the spawn plan does not need them")
        plan = spawn_plan(team, run, self.naming, self.subagent_type, materialised=files,
                          project_dir=self.project_dir if files else None, notes=notes, best=best)
        return DesignResult(version=team.version, run_id=run.id, roles=[r.name for r in team.roles], plan=plan,
                            warnings=warnings)

    async def _supersede(self, run_id: str, version: int) -> list[RoleSession]:
        stopped = []
        for session in await self.team.list_sessions(run_id, status=["planned", "queued", "running", "interrupted"]):
            if session.runner == "subagent" and session.status == "running":
                continue  # an in-session subagent at work: nothing here can stop it; its report still counts
            if session.version < version:
                stopped.append(await self._stop(session, f"superseded by team v{version}"))
        return stopped

    async def get_team(self, run_id: str, version: int | None = None) -> TeamVersion:
        return await self.team.get_version(run_id, version)

    async def list_versions(self, run_id: str) -> list[TeamVersionSummary]:
        return await self.team.list_versions(run_id)

    async def spawn_plan(self, run_id: str, version: int | None = None, roles: list[str] | None = None) -> SpawnPlan:
        team = await self.team.get_version(run_id, version)
        run = await self.team.run(run_id)
        if roles:
            unknown = [r for r in roles if team.role(r) is None]
            if unknown:
                raise DomainError(f"team v{team.version} has no role {unknown[0]!r}; its roles are "
                                  f"{', '.join(r.name for r in team.roles)}")
        sessions = await self.team.latest_sessions(run_id, team.version)
        notes = {slug: worktree_note(s.worktree, s.branch) for slug, s in sessions.items() if s.worktree and s.branch}
        run, best = await best_candidate(self.kb, run)
        return spawn_plan(team, run, self.naming, self.subagent_type, only=roles,
                          project_dir=self.project_dir if self.write_agent_files else None, notes=notes, best=best)

    # ------------------------------------------------------------ headless roles

    async def _role(self, run_id: str, role: str, version: int | None) -> tuple[TeamVersion, RoleSpec]:
        team = await self.team.get_version(run_id, version)
        spec = team.role(role)
        if spec is None:
            raise DomainError(f"team v{team.version} has no role {role!r}; its roles are "
                              f"{', '.join(r.name for r in team.roles)}")
        return team, spec

    async def spawn_role(self, run_id: str, role: str, version: int | None = None,
                         runner: Literal["claude", "codex"] | None = None, cap_usd: float | None = None,
                         queue: bool | None = None) -> RoleSession:
        """Start one role headless (or queue it, in queue mode). Returns its session."""
        team, spec = await self._role(run_id, role, version)
        run = await self.team.run(run_id)
        if run.status in ("finished", "failed", "paused", "budget_spent"):
            raise DomainError(f"run {run_id} is {run.status}; nothing new is started in it")
        current = (await self.team.latest_sessions(run_id, team.version)).get(spec.slug)
        if current is not None and current.status in ACTIVE:
            raise DomainError(f"{spec.name} (v{team.version}) is already {current.status} as {current.id}; "
                              f"stop_role it first to restart it")
        spend = await self.kb.spend(run_id)
        if spend.left_usd is not None and spend.left_usd <= 0:
            raise DomainError(f"the budget of run {run_id} is spent (${spend.spent_usd:.2f} of "
                              f"${spend.budget_usd:.2f}); nothing new is started")
        caps = [c for c in (cap_usd, spec.budget_usd, self.default_role_cap_usd, spend.left_usd) if c is not None]
        cap = min(caps) if caps else None
        kind = runner or spec.runner or self.default_runner
        queued = self.spawn_mode == "queue" if queue is None else queue
        status: SessionStatus = "queued" if queued else "running"
        update = SessionUpdate(status=status, runner=kind, cap_usd=cap, owner=None if queued else self.owner,
                               error="")
        if current is not None and current.status in ("planned", "interrupted"):
            session = await self.team.update_session(current.id, update)
        else:
            session = await self.team.create_session(run_id, team.version, spec.name, spec.slug, kind,
                                                     status=status, stage=stage_of(team)[spec.slug], cap_usd=cap,
                                                     owner=None if queued else self.owner)
        if not queued:
            self._launch(session, team, spec, run)
        return session

    async def start_session(self, session: RoleSession, cap_usd: float | None = None) -> RoleSession:
        """Run an existing (queued, planned or interrupted) session in this process."""
        team, spec = await self._role(session.run_id, session.slug, session.version)
        run = await self.team.run(session.run_id)
        kind = session.runner if session.runner in ("claude", "codex") else (spec.runner or self.default_runner)
        resumed = session.status == "interrupted"
        session = await self.team.update_session(session.id, SessionUpdate(
            status="running", runner=kind, owner=self.owner, error="",
            cap_usd=cap_usd if cap_usd is not None else session.cap_usd))
        self._launch(session, team, spec, run, resumed=resumed)
        return session

    def _launch(self, session: RoleSession, team: TeamVersion, spec: RoleSpec, run: Run,
                resumed: bool = False) -> None:
        task = asyncio.create_task(self._execute(session, team, spec, run, resumed), name=f"role:{session.id}")
        self._tasks[session.id] = task

    async def _execute(self, session: RoleSession, team: TeamVersion, spec: RoleSpec, run: Run,
                       resumed: bool = False) -> None:
        outcome: RoleOutcome | None = None
        try:
            try:
                cwd, note = self.project_dir, None
                if spec.isolation == "worktree":
                    cwd, branch = await ensure_worktree(self.project_dir, run.id, team.version, spec.slug)
                    note = worktree_note(cwd, branch)
                    await self.team.update_session(session.id, SessionUpdate(worktree=str(cwd), branch=branch))
                said, best = await best_candidate(self.kb, run)
                job = RoleJob(
                    run_id=run.id, version=team.version, role=spec.name, slug=spec.slug,
                    brief=role_brief(team, spec, said, self.naming, note, best),
                    kickoff=(f"{role_marker(run.id, team.version, spec.slug)}\nBegin your work as the {spec.name} "
                             f"of team v{team.version} now. Do the mandatory reads first, then work on your mandate "
                             f"until your deliverables are done or you are clearly blocked, recording as you go. "
                             f"End with your report."
                             + (" You were started before and cut off: first check what you (this role, this "
                                "version) already recorded and committed, and continue from there." if resumed
                                else "")),
                    cwd=cwd, cap_usd=session.cap_usd, model=spec.model, tools=role_tools(spec, self.naming),
                    mcp_servers=list(spec.mcp_servers), description=role_description(team, spec),
                    env={**self.env, "EVOTEAM_ROLE": spec.name, "EVOTEAM_TEAM_VERSION": str(team.version),
                         "EVOTEAM_RUN": run.id, "EVOTEAM_ROLE_SESSION": session.id},
                    proc_file=proc_file(self.project_dir, session.id))
                keep_out_of_git(self.project_dir, [".evoteam/"])  # the guard's proc files go there
                runner = self.runner_factory(session.runner if session.runner != "subagent" else self.default_runner)

                async def report(progress: Progress) -> bool:
                    current = await self.team.update_session(session.id, SessionUpdate(
                        turns=progress.turns, last_message=progress.last_message or None,
                        session_id=progress.session_id))
                    return current.status not in TERMINAL

                outcome = await runner.run(job, report)
            except DomainError as exc:
                outcome = RoleOutcome(status="failed", cost_known=False, error=str(exc))
            except Exception as exc:  # noqa: BLE001 - one role's crash never reaches the others
                log.exception("role %s crashed", spec.name)
                outcome = RoleOutcome(status="failed", cost_known=False, error=f"{type(exc).__name__}: {exc}")
        except asyncio.CancelledError:
            status = self._stopping.pop(session.id, "interrupted")
            with contextlib.suppress(Exception):
                await asyncio.shield(self.team.update_session(session.id, SessionUpdate(
                    status=status, error="stopped on request" if status == "stopped" else "the runtime shut down")))
            await self._notify()
            raise
        finally:
            self._tasks.pop(session.id, None)
        try:
            await self._finish(session, spec, team, outcome)
        finally:
            await self._notify()

    async def _finish(self, session: RoleSession, spec: RoleSpec, team: TeamVersion, outcome: RoleOutcome) -> None:
        if outcome.cost_usd > 0:
            await record_cost_as(self.kb, session.run_id, outcome.cost_usd, "sdk_result" if session.runner == "claude"
                                 else f"{session.runner}_usage", role=spec.name, team_version=team.version,
                                 detail={"session": session.id, "status": outcome.status, **outcome.detail},
                                 idempotency_key=f"role:{session.id}:{outcome.session_id or 'end'}")
        await self.team.update_session(session.id, SessionUpdate(
            status=outcome.status, cost_usd=outcome.cost_usd, turns=outcome.turns,
            last_message=outcome.last_message or None, error=outcome.error, session_id=outcome.session_id))

    async def _notify(self) -> None:
        async with self._changed:
            self._generation += 1
            self._changed.notify_all()

    async def wait_for_change(self, timeout: float | None) -> bool:
        """Wait until a role run by this process ends (True) or the timeout passes (False)."""
        async with self._changed:
            start = self._generation
            try:
                await asyncio.wait_for(self._changed.wait_for(lambda: self._generation != start), timeout)
                return True
            except TimeoutError:
                return False

    def running_here(self) -> list[str]:
        return [sid for sid, task in self._tasks.items() if not task.done()]

    async def _stop(self, session: RoleSession, reason: str, status: SessionStatus = "stopped") -> RoleSession:
        task = self._tasks.get(session.id)
        updated = await self.team.update_session(session.id, SessionUpdate(status=status, error=reason))
        if task is not None and not task.done():
            self._stopping[session.id] = status
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        return updated

    async def stop_role(self, run_id: str, role: str | None = None, version: int | None = None,
                        reason: str = "stopped by the supervisor") -> list[RoleSession]:
        """Stop a role (or every role) of a version: running sessions are ended, planned and
        queued ones will not start."""
        team = await self.team.get_version(run_id, version)
        slug = None
        if role is not None:
            spec = team.role(role)
            if spec is None:
                raise DomainError(f"team v{team.version} has no role {role!r}; its roles are "
                                  f"{', '.join(r.name for r in team.roles)}")
            slug = spec.slug
        stopped = []
        for session in (await self.team.latest_sessions(run_id, team.version)).values():
            if (slug is None or session.slug == slug) and session.status not in TERMINAL:
                stopped.append(await self._stop(session, reason))
        return stopped

    async def reap_stopped(self) -> list[str]:
        """End the local tasks of sessions that were stopped from elsewhere (another process's
        stop_role, or a new version designed by the supervisor's own team server), without
        waiting for their runner to notice. Returns the session ids ended."""
        ended = []
        for session_id in self.running_here():
            session = await self.team.get_session(session_id)
            task = self._tasks.get(session_id)
            if session.status in TERMINAL and task is not None and not task.done():
                self._stopping[session_id] = session.status
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
                ended.append(session_id)
        return ended

    async def reconcile_orphan(self, session: RoleSession) -> bool:
        """A headless session whose driver died: end its process group if it still runs (its
        guard recorded it), and count what it spent (priced from its CLI transcript, once).
        Returns True when a live process was killed."""
        from evoteam.servers.team.procguard import kill_recorded

        killed = kill_recorded(proc_file(self.project_dir, session.id))
        transcript = find_transcript(session.session_id) if session.session_id else None
        if transcript is not None:
            record, _ = await record_transcript_cost(self.kb, session.run_id, transcript, role=session.role,
                                                     team_version=session.version, prices=self.prices)
            if record.usd > 0:
                await self.team.update_session(session.id, SessionUpdate(cost_usd=session.cost_usd + record.usd))
        return killed

    async def shutdown(self, status: SessionStatus = "interrupted") -> None:
        """End every role this process runs (marking them `status`), e.g. on exit."""
        for session_id, task in list(self._tasks.items()):
            if not task.done():
                self._stopping[session_id] = status
                task.cancel()
        for task in list(self._tasks.values()):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    # ------------------------------------------------------------ in-session roles

    async def record_role_result(self, run_id: str, role: str, version: int | None = None,
                                 status: Literal["finished", "failed", "over_budget", "stopped"] = "finished",
                                 summary: str = "", cost_usd: float | None = None,
                                 transcript_path: str | None = None, turns: int | None = None) -> RoleSession:
        """Record that an in-session role (a subagent) ended: its status, final report and cost
        (given in USD, or priced from its transcript)."""
        team, spec = await self._role(run_id, role, version)
        session = (await self.team.latest_sessions(run_id, team.version)).get(spec.slug)
        if session is None or session.status in TERMINAL and session.runner != "subagent":
            session = await self.team.create_session(run_id, team.version, spec.name, spec.slug, "subagent",
                                                     status="running", stage=stage_of(team)[spec.slug])
        usd = cost_usd
        if transcript_path:
            if not Path(transcript_path).is_file():
                raise DomainError(f"no transcript at {transcript_path}; pass cost_usd instead")
            record, _ = await record_transcript_cost(self.kb, run_id, transcript_path, role=spec.name,
                                                     team_version=team.version, prices=self.prices)
            usd = record.usd
        elif cost_usd is not None and cost_usd > 0:
            await record_cost_as(self.kb, run_id, cost_usd, "reported", role=spec.name, team_version=team.version,
                                 detail={"session": session.id}, idempotency_key=f"role-result:{session.id}")
        if session.status in TERMINAL:  # e.g. the supervisor recorded it, then the hook prices the transcript
            if usd is not None and transcript_path:
                return await self.team.update_session(session.id, SessionUpdate(cost_usd=usd))
            return session
        return await self.team.update_session(session.id, SessionUpdate(
            status=status, last_message=summary or None, cost_usd=usd, runner="subagent", turns=turns or None))

    async def mark_running(self, run_id: str, role: str, version: int | None = None) -> RoleSession:
        """Mark an in-session role as started (e.g. from a SubagentStart hook)."""
        team, spec = await self._role(run_id, role, version)
        session = (await self.team.latest_sessions(run_id, team.version)).get(spec.slug)
        if session is None or session.status in TERMINAL:
            return await self.team.create_session(run_id, team.version, spec.name, spec.slug, "subagent",
                                                  status="running", stage=stage_of(team)[spec.slug])
        return await self.team.update_session(session.id, SessionUpdate(status="running"))

    # ------------------------------------------------------------ reports

    async def team_status(self, run_id: str, version: int | None = None) -> TeamStatus:
        run = await self.team.run(run_id)
        version = version if version is not None else run.current_version
        roles: list[RoleState] = []
        finished = False
        if version is not None:
            team = await self.team.get_version(run_id, version)
            latest = await self.team.latest_sessions(run_id, version)
            stages = stage_of(team)
            for spec in team.roles:
                s = latest.get(spec.slug)
                if s is None:
                    roles.append(RoleState(role=spec.name, slug=spec.slug, status="planned", runner="subagent",
                                           stage=stages[spec.slug], cost_usd=0.0, cap_usd=None, turns=0,
                                           last_message=""))
                    continue
                roles.append(RoleState(role=s.role, slug=s.slug, status=s.status, runner=s.runner, stage=s.stage,
                                       cost_usd=s.cost_usd, cap_usd=s.cap_usd, turns=s.turns,
                                       last_message=sentence_tail(s.last_message, 500), error=s.error,
                                       session_id=s.session_id,
                                       branch=s.branch))
            finished = all(r.status in TERMINAL for r in roles)
        spend = await self.kb.spend(run_id)
        run = await with_paired_best(self.kb, run)
        # "left_usd: 10.0" beside team.budget's "costs unrecorded" read as money left (mp71).
        unrecorded = costs_unrecorded(len(spend.lines), bool(run.candidates or run.current_version))
        return TeamStatus(run_id=run_id, run_status=run.status, version=version, finished=finished, roles=roles,
                          best_score=run.best_score, ndg=run.ndg, best_candidate_id=run.best_candidate_id,
                          paired_best=run.paired_best, best_within_noise_of=run.best_within_noise_of,
                          best_interval=run_interval(run),
                          candidates=run.candidates, learnings=run.learnings,
                          spent_usd=spend.spent_usd, budget_usd=spend.budget_usd, costs_recorded=not unrecorded,
                          left_usd=None if unrecorded else spend.left_usd,
                          evaluations=summarise(self.queue_dir, run_id) if self.queue_dir is not None else None)

    async def reflect(self, run_id: str, observed_behaviour: str = "", diagnosis: str = "", design_change: str = "",
                      outcome: str = "", version: int | None = None,
                      idempotency_key: str | None = None) -> HistoryEntry:
        """Record an evolution-history entry for a version (default: the current one)."""
        run = await self.team.run(run_id)
        version = version if version is not None else run.current_version
        if not any(s.strip() for s in (observed_behaviour, diagnosis, design_change, outcome)):
            raise DomainError("a reflection needs at least one of observed_behaviour, diagnosis, design_change, "
                              "outcome")
        actor = self.kb.actor.model_copy(update={"role": self.kb.actor.role or SUPERVISOR_ROLE,
                                                 "team_version": version})
        return await self.kb.with_actor(actor).add_history(HistoryEntryCreate(
            run_id=run_id, team_version=version, observed_behaviour=observed_behaviour, diagnosis=diagnosis,
            design_change=design_change, outcome=outcome, idempotency_key=idempotency_key))

    async def run_report(self, run_id: str) -> RunSummary:
        """The run's summary, with the newest version's roles not yet ended (a resumed run whose
        roles never reported read as a finished version; mp42, 2026-12-05)."""
        summary = await summarise_run(self.kb, run_id)
        summary.roles_not_ended = await self.roles_not_ended(run_id, (await self.team.run(run_id)).current_version)
        return summary

    async def roles_not_ended(self, run_id: str, version: int | None) -> list[str]:
        """The roles of a version whose newest session has not ended (a reflection on it is early:
        a model reflected on a version whose roles were all still planned; model-play 2026-12-04)."""
        return [] if version is None else await self.team.roles_not_ended(run_id, version)

    async def budget(self, run_id: str) -> BudgetReport:
        return await budget_report(self.team, self.kb, run_id)
