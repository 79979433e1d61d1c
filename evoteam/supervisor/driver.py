"""The headless supervisor driver behind `evoteam supervise`.

It owns one run. It wakes the supervisor (a fresh headless session each time) when the run
has no team yet, when the current team has finished, and when the check interval passes; it
starts the roles of the current version in the stages the design sets (at most
`max_parallel` at once), each capped so that the run's budget holds; it stops everything when
the budget is spent. All of its state is in the store, so a driver killed at any point and
started again continues the run: sessions that were running become `interrupted` and are
started again, a wake that was cut off is repeated.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from evoteam.errors import DomainError
from evoteam.report.summary import summarise_run
from evoteam.servers.knowledge.models import Run
from evoteam.servers.knowledge.pairedbest import describe_best
from evoteam.servers.team.core import SUPERVISOR_ROLE, TeamService
from evoteam.servers.team.cost import record_cost_as
from evoteam.servers.team.models import TERMINAL, RoleSpec, SessionUpdate, TeamStatus
from evoteam.servers.team.store import TeamStore
from evoteam.servers.team.validate import stage_of
from evoteam.supervisor.modes import Mode, static_design
from evoteam.supervisor.prompts import read_prompt, render, supervisor_prompt
from evoteam.supervisor.waker import Waker, WakeRequest

log = logging.getLogger("evoteam.supervisor")

Trigger = Literal["start", "team_finished", "interval", "resume"]

REASONS = {
    "start": "The run has no team yet. Assess the task from the store and design team version 1.",
    "team_finished": "Every role of the current team version has ended. Reflect on it, then design the next "
                     "version.",
    "interval": "The periodic check: the current team is still working. Look at its progress; redesign only "
                "if the evidence says it is stuck.",
    "resume": "The driver restarted and your previous wake was cut off. Check what was already recorded "
              "(history, team versions) before you act, and do not record it twice.",
}


class DriverConfig(BaseModel):
    interval_s: float = 1800.0
    poll_s: float = 5.0
    max_parallel: int | None = None
    runner: Literal["claude", "codex"] = "claude"
    supervisor_cap_usd: float | None = None    # per wake
    role_cap_usd: float | None = None          # per role session
    max_versions: int | None = None
    max_failed_wakes: int = 3
    # Stop after this many team versions in a row without a significant gain (None: never).
    stall_versions: int | None = 3
    mode: Mode = "evolving"
    team_roles: list[RoleSpec] | None = None   # --mode fixed --team FILE


class DriverEvent(BaseModel):
    at: datetime
    kind: str
    text: str


class DriverResult(BaseModel):
    run_id: str
    reason: str
    versions: int | None
    spent_usd: float
    budget_usd: float | None
    best_score: float | None
    wakes: int


class RunLocked(DomainError):
    pass


class RunLock:
    """One driver per run and store: an exclusive lock on a file beside the database (freed
    by the OS when the process dies, so a killed driver never blocks its successor)."""

    def __init__(self, db_path: Path, run_id: str):
        self.path = Path(f"{db_path}.{run_id}.supervisor.lock")
        self._fh = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(self.path, "a+")  # noqa: SIM115
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            fh.close()
            raise RunLocked(f"another `evoteam supervise` drives this run already (lock {self.path})") from exc
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        self._fh = fh

    def release(self) -> None:
        if self._fh is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fh, fcntl.LOCK_UN)
            self._fh.close()
            self._fh = None


class DatabaseRunLock:
    """One driver per run on a shared PostgreSQL store: an advisory lock in the database itself
    (freed by the server when the holder's connection ends), so drivers on different machines
    exclude each other as drivers on one machine do through the file lock."""

    def __init__(self, url: str, run_id: str):
        from evoteam.servers.knowledge.pglock import AdvisoryLock

        self._lock = AdvisoryLock(url, "supervisor", run_id)

    def acquire(self) -> None:
        if not self._lock.try_acquire():
            raise RunLocked(f"another `evoteam supervise` drives this run already (advisory lock in "
                            f"{self._lock.where})")

    def release(self) -> None:
        self._lock.release()


def run_lock(store: Path | str, run_id: str) -> RunLock | DatabaseRunLock:
    """The one-driver-per-run lock for a store: a file beside a SQLite store, an advisory lock in
    a PostgreSQL one."""
    from evoteam.config import is_store_url

    return DatabaseRunLock(store, run_id) if is_store_url(store) else RunLock(Path(store), run_id)


class SupervisorDriver:
    def __init__(self, service: TeamService, run_id: str, *, waker: Waker, config: DriverConfig | None = None,
                 settings=None, on_event: Callable[[DriverEvent, TeamStatus | None], None] | None = None,
                 lock_path: Path | str | None = None):
        self.svc = service
        self.team: TeamStore = service.team
        self.kb = service.kb
        self.run_id = run_id
        self.waker = waker
        self.config = config or DriverConfig()
        self.settings = settings
        self.on_event = on_event
        self.lock = run_lock(lock_path, run_id) if lock_path else None
        self.events: list[DriverEvent] = []
        self.wakes = 0
        self._failed_wakes = 0
        self._status: TeamStatus | None = None

    # ------------------------------------------------------------ events

    def _event(self, kind: str, text: str) -> None:
        event = DriverEvent(at=datetime.now(UTC), kind=kind, text=text)
        self.events.append(event)
        del self.events[:-200]
        log.info("%s: %s", kind, text)
        if self.on_event:
            with contextlib.suppress(Exception):
                self.on_event(event, self._status)

    async def _refresh(self) -> TeamStatus:
        self._status = await self.svc.team_status(self.run_id)
        return self._status

    # ------------------------------------------------------------ main loop

    async def run(self) -> DriverResult:
        if self.lock:
            self.lock.acquire()
        try:
            reason = await self._loop()
        finally:
            await self.svc.shutdown("interrupted")
            if self.lock:
                self.lock.release()
        run = await self.kb.get_run(self.run_id)
        spend = await self.kb.spend(self.run_id)
        self._event("stop", reason)
        return DriverResult(run_id=self.run_id, reason=reason, versions=run.current_version,
                            spent_usd=spend.spent_usd, budget_usd=spend.budget_usd, best_score=run.best_score,
                            wakes=self.wakes)

    async def _loop(self) -> str:
        resume_trigger = await self._resume()
        while True:
            run = await self.kb.get_run(self.run_id)
            if run.status != "active":
                return f"run is {run.status}"
            spend = await self.kb.spend(self.run_id)
            if spend.left_usd is not None and spend.left_usd <= 0:
                await self._budget_stop(run, spend.spent_usd)
                return "budget spent"
            status = await self._refresh()
            if resume_trigger and status.version is not None and not status.finished:
                resume_trigger = None  # the team still works: schedule it; the interval wakes the supervisor
            if status.finished and status.roles and all(r.status == "skipped" for r in status.roles):
                reasons = sorted({r.error or "skipped" for r in status.roles})
                return f"every role of team v{status.version} was skipped: {'; '.join(reasons)}"
            if status.version is None or status.finished:
                if status.version is not None and status.finished and self.config.max_versions is not None \
                        and status.version >= self.config.max_versions:
                    await self._reflect_final(run, f"stopped after {status.version} team versions (--max-versions)")
                    await self.kb.update_run(self.run_id, status="finished")
                    return f"reached {status.version} team versions"
                if status.version is not None and status.finished and self.config.stall_versions:
                    stalled = (await summarise_run(self.kb, self.run_id)).versions_without_significant_gain
                    if stalled >= self.config.stall_versions:
                        why = (f"stopped: {stalled} team versions in a row without a significant gain "
                               f"(--stall-versions {self.config.stall_versions})")
                        await self._reflect_final(run, why)
                        await self.kb.update_run(self.run_id, status="finished", reason=why)
                        return why
                trigger: Trigger = resume_trigger or ("start" if status.version is None else "team_finished")
                resume_trigger = None
                if self.config.mode != "evolving":
                    await self._design_static(status.version)
                    continue
                designed = await self._wake(trigger, status.version)
                if not designed:
                    if self._failed_wakes >= self.config.max_failed_wakes:
                        return (f"the supervisor designed no team in {self._failed_wakes} wakes in a row; "
                                f"see the log, fix the cause and run again to continue")
                continue
            await self._schedule(status.version)
            await self.svc.wait_for_change(timeout=self._time_to_next_check())
            for session_id in await self.svc.reap_stopped():
                self._event("role", f"ended {session_id}: stopped from outside the driver")
            if self.config.mode == "evolving" and await self._interval_due():
                before = (await self.kb.get_run(self.run_id)).current_version
                await self._wake("interval", before)
                after = (await self.kb.get_run(self.run_id)).current_version
                if after != before:
                    await self._stop_older(after)

    # ------------------------------------------------------------ resume

    async def _resume(self) -> Trigger | None:
        """Take over what a dead driver left: running sessions become interrupted (and are
        started again), a wake that never ended is marked and repeated."""
        trigger: Trigger | None = None
        for session in await self.team.list_sessions(self.run_id, status=["running", "queued"]):
            if session.runner == "subagent":
                continue
            if session.owner != self.svc.owner:
                killed = await self.svc.reconcile_orphan(session)
                await self.team.update_session(session.id, SessionUpdate(
                    status="interrupted", error="its driver stopped; restarted by the next driver"))
                self._event("resume", f"{session.role} (v{session.version}) was cut off"
                                      f"{' (its process outlived the driver and was ended)' if killed else ''}; "
                                      f"it will start again")
        for wake in await self.team.list_wakes(self.run_id, status="running"):
            await self.team.end_wake(wake.id, "interrupted", error="the driver stopped during this wake")
            run = await self.kb.get_run(self.run_id)
            if run.current_version == wake.version_before:
                trigger = "resume"
            self._event("resume", f"wake {wake.seq} ({wake.trigger}) was cut off")
        return trigger

    # ------------------------------------------------------------ roles

    async def _schedule(self, version: int) -> None:
        """Start the roles of the earliest unfinished stage, within max_parallel and the budget."""
        team = await self.team.get_version(self.run_id, version)
        latest = await self.team.latest_sessions(self.run_id, version)
        stages = stage_of(team)
        open_stages = [stages[s] for s, sess in latest.items() if sess.status not in TERMINAL and s in stages]
        if not open_stages:
            return
        stage = min(open_stages)
        waiting = [latest[r.slug] for r in team.roles if stages[r.slug] == stage
                   and latest.get(r.slug) is not None
                   and latest[r.slug].status in ("planned", "queued", "interrupted")]
        running = [s for s in latest.values() if s.status == "running"]
        if not waiting:
            return
        slots = len(waiting)
        if self.config.max_parallel is not None:
            slots = max(0, self.config.max_parallel - len(running))
        spend = await self.kb.spend(self.run_id)
        share = None
        if spend.left_usd is not None:
            share = spend.left_usd / max(1, len(running) + min(slots, len(waiting)))
        for session in waiting[:slots]:
            spec = team.role(session.slug)
            caps = [c for c in (spec.budget_usd if spec else None, self.config.role_cap_usd, share) if c is not None]
            cap = min(caps) if caps else None
            if session.runner == "subagent":
                kind = (spec.runner if spec else None) or self.config.runner
                session = await self.team.update_session(session.id, SessionUpdate(runner=kind))
            await self.svc.start_session(session, cap_usd=cap)
            self._event("role", f"started {session.role} (v{version}, {session.runner}"
                                f"{f', cap ${cap:.2f}' if cap is not None else ''})")

    async def _stop_older(self, version: int | None) -> None:
        if version is None:
            return
        for session in await self.team.list_sessions(self.run_id, status=["planned", "queued", "running",
                                                                          "interrupted"]):
            if session.version < version:
                await self.svc._stop(session, f"superseded by team v{version}")
                self._event("role", f"stopped {session.role} (v{session.version}): superseded by v{version}")

    # ------------------------------------------------------------ wakes

    def _time_to_next_check(self) -> float:
        return max(0.05, min(self.config.poll_s, self.config.interval_s))

    async def _interval_due(self) -> bool:
        wakes = await self.team.list_wakes(self.run_id)
        if not wakes:
            return False
        last = wakes[-1].ended_at or wakes[-1].started_at
        return (datetime.now(UTC) - last).total_seconds() >= self.config.interval_s

    async def _wake_message(self, seq: int, trigger: Trigger, run: Run, status: TeamStatus) -> str:
        roles = "\n".join(f"- {r.role}: {r.status}, {r.turns} turns, ${r.cost_usd:.2f}"
                          f"{f' — {r.error}' if r.error else ''}"
                          f"{f' — last: {r.last_message[:300]!r}' if r.last_message else ''}" for r in status.roles)
        task = {
            "start": "Design team version 1 with design_team.",
            "team_finished": f"Reflect on version {status.version} with reflect, then design version "
                             f"{(status.version or 0) + 1} with design_team.",
            "interval": "Decide whether the team needs redesigning now; if not, end your turn.",
            "resume": "Finish what the cut-off wake was doing.",
        }[trigger]
        spend = await self.kb.spend(self.run_id)
        return render(read_prompt("wake"), seq=seq, trigger=trigger, reason=REASONS[trigger], run_id=run.id,
                      goal=run.goal.strip().splitlines()[0][:300] if run.goal.strip() else "", kit=run.kit or "none",
                      direction=run.direction, x0=run.x0, best_known=run.best_known,
                      best=describe_best(run.model_copy(update={"paired_best": status.paired_best if (
                          status.best_candidate_id == run.best_candidate_id) else None})),  # read by status already
                      ndg=None if run.ndg is None else f"{run.ndg:.1f}", candidates=run.candidates,
                      learnings=run.learnings, spent_usd=f"{spend.spent_usd:.2f}",
                      budget="no budget" if spend.budget_usd is None else f"${spend.budget_usd:.2f}",
                      left_usd="unlimited" if spend.left_usd is None else f"{spend.left_usd:.2f}",
                      version=status.version if status.version is not None else "none",
                      roles=("Roles of that version:\n" + roles) if roles else "", task=task)

    async def _wake(self, trigger: Trigger, version_before: int | None) -> bool:
        """Run one supervisor session; True when it designed a new version."""
        run = await self.kb.get_run(self.run_id)
        status = await self._refresh()
        spend = await self.kb.spend(self.run_id)
        record = await self.team.start_wake(self.run_id, trigger, version_before, owner=self.svc.owner)
        self.wakes += 1
        self._event("wake", f"supervisor wake {record.seq}: {trigger}")
        caps = [c for c in (self.config.supervisor_cap_usd, spend.left_usd) if c is not None]
        env = {**self.svc.env, "EVOTEAM_ROLE": SUPERVISOR_ROLE, "EVOTEAM_RUN": self.run_id}
        if version_before is not None:
            env["EVOTEAM_TEAM_VERSION"] = str(version_before)
        request = WakeRequest(run_id=self.run_id, seq=record.seq, trigger=trigger,
                              system_prompt=supervisor_prompt("headless", self.run_id, self.svc.naming),
                              message=await self._wake_message(record.seq, trigger, run, status),
                              cwd=self.svc.project_dir, cap_usd=min(caps) if caps else None, env=env)
        try:
            outcome = await self.waker.wake(request)
        except Exception as exc:  # noqa: BLE001
            from evoteam.supervisor.waker import WakeOutcome

            outcome = WakeOutcome(status="failed", error=f"{type(exc).__name__}: {exc}")
        if outcome.cost_usd > 0:
            await record_cost_as(self.kb, self.run_id, outcome.cost_usd, "sdk_result", role=SUPERVISOR_ROLE,
                                 team_version=version_before,
                                 detail={"wake": record.id, "trigger": trigger, "status": outcome.status},
                                 idempotency_key=f"wake:{record.id}")
        after = (await self.kb.get_run(self.run_id)).current_version
        designed = after is not None and after != version_before
        await self.team.end_wake(record.id, "done" if outcome.status == "done" else "failed", version_after=after,
                                 cost_usd=outcome.cost_usd, session_id=outcome.session_id, error=outcome.error)
        if outcome.status != "done":
            self._event("error", f"supervisor wake {record.seq} {outcome.status}: {outcome.error}")
        if designed:
            self._failed_wakes = 0
            self._event("design", f"team v{after} designed")
            await self._refresh()
        elif trigger != "interval":
            self._failed_wakes += 1
            self._event("error", f"wake {record.seq} designed no new team version"
                                 f"{': ' + outcome.last_message[:200] if outcome.last_message else ''}")
        return designed

    async def _design_static(self, version_before: int | None) -> None:
        """Fixed and solo modes: the same team again as the next version, no supervisor."""
        version = (version_before or 0) + 1
        if version_before is not None:
            await self.svc.reflect(self.run_id, outcome=f"{self.config.mode} mode: version {version_before} ended; "
                                                        f"the same team starts again as v{version}",
                                   version=version_before, idempotency_key=f"static:{self.run_id}:{version_before}")
        await self.svc.design_team(static_design(self.config.mode, self.run_id, version, self.config.team_roles))
        self._event("design", f"team v{version} ({self.config.mode} mode, not redesigned)")
        await self._refresh()

    # ------------------------------------------------------------ the end

    async def _budget_stop(self, run: Run, spent: float) -> None:
        stopped = []
        if run.current_version is not None:
            stopped = await self.svc.stop_role(self.run_id, None, run.current_version, reason="the run's budget is spent")
        self._event("budget", f"budget spent (${spent:.2f} of ${run.budget_usd:.2f}); stopped "
                              f"{len(stopped)} role(s)")
        await self._reflect_final(run, f"the run stopped: its budget is spent (${spent:.2f} of "
                                       f"${run.budget_usd:.2f}); best score {run.best_score}")
        await self.kb.update_run(self.run_id, status="budget_spent")

    async def _reflect_final(self, run: Run, outcome: str) -> None:
        with contextlib.suppress(Exception):
            await self.svc.reflect(self.run_id, outcome=outcome, version=run.current_version,
                                   idempotency_key=f"final:{self.run_id}")
