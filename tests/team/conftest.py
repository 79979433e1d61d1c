"""Fixtures for the team server and the supervisor: a real SQLite store, a git project, and
fake runners/wakers that behave like the real ones without a model."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.models import LearningCreate, RunCreate
from evoteam.servers.knowledge.store import Actor
from evoteam.servers.team.core import TeamService
from evoteam.servers.team.runners import Progress, RoleJob, RoleOutcome
from evoteam.servers.team.store import TeamStore


def git_project(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "HOME": str(path), "PATH": "/usr/bin:/bin"}
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=path, check=True, env=env)
    (path / "README.md").write_text("project\n")
    subprocess.run(["git", "add", "."], cwd=path, check=True, env=env)
    subprocess.run(["git", "commit", "-q", "-m", "start"], cwd=path, check=True, env=env)
    return path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return git_project(tmp_path / "project")


@pytest.fixture
async def kb(request, tmp_path: Path) -> AsyncIterator[LocalKnowledgeStore]:
    """A store file; or, where a test asks for it (`indirect` parametrisation with "postgres"),
    a fresh PostgreSQL database."""
    backend = getattr(request, "param", "sqlite")
    where = request.getfixturevalue("postgres_url") if backend == "postgres" else tmp_path / "evoteam.db"
    async with LocalKnowledgeStore.open(where, Actor(user="tester", client="test")) as store:
        yield store


@pytest.fixture
async def run(kb):
    return await kb.start_run(RunCreate(goal="Make the toy kernel fast.", kit="toy", x0=1.0, best_known=3.0,
                                        budget_usd=10.0))


def design(run_id: str, *names: str, stages: list[list[str]] | None = None, **role_extra) -> dict:
    return {
        "run_id": run_id,
        "diagnosis": "knowledge gap: nobody measured where the time goes",
        "rationale": "a profiler first, then an implementer who acts on the profile",
        "roles": [{"name": n, "mandate": f"do the {n} work", "isolation": "shared", **role_extra} for n in names],
        "coordination": {"stages": [{"roles": s} for s in (stages or [])]},
    }


Behaviour = Callable[[RoleJob, Callable[[Progress], Awaitable[bool]]], Awaitable[RoleOutcome]]


class FakeRunner:
    """Runs roles by behaviour name (taken from the slug's first word, or `behaviours[slug]`):
    finish (adds a learning as the role, costs `cost`), crash (raises), over (ends over its cap),
    hang (runs until stopped, or until `release` is set and then finishes), fail (ends with an error result)."""

    kind = "claude"

    def __init__(self, kb: LocalKnowledgeStore, behaviours: dict[str, str] | None = None, cost: float = 0.5):
        self.kb = kb
        self.behaviours = behaviours or {}
        self.cost = cost
        self.jobs: list[RoleJob] = []
        self.started = asyncio.Event()
        self.release = asyncio.Event()

    async def run(self, job: RoleJob, report) -> RoleOutcome:
        self.jobs.append(job)
        self.started.set()
        first = job.slug.split("-")[0]
        behaviour = self.behaviours.get(job.slug) or self.behaviours.get(first) or first
        await report(Progress(turns=1, last_message=f"{job.role} starting", session_id=f"s-{job.slug}"))
        if behaviour == "crash":
            raise RuntimeError("the role's process died")
        if behaviour == "over":
            return RoleOutcome(status="over_budget", cost_usd=job.cap_usd or 1.0, turns=3,
                               error="the role reached its USD cap", session_id=f"s-{job.slug}")
        if behaviour == "fail":
            return RoleOutcome(status="failed", cost_usd=0.1, turns=2, error="error_during_execution: boom")
        if behaviour == "hang":
            while True:
                await asyncio.sleep(0.01)
                if self.release.is_set():
                    break
                if not await report(Progress(turns=2, last_message="still working")):
                    return RoleOutcome(status="stopped", turns=2, cost_usd=0.05, error="stopped on request")
        actor = self.kb.actor.model_copy(update={"role": job.role, "team_version": job.version})
        await self.kb.with_actor(actor).add_learning(LearningCreate(
            run_id=job.run_id, text=f"{job.role} measured something in v{job.version}", kind="observation"))
        return RoleOutcome(status="finished", cost_usd=self.cost, turns=4, last_message=f"{job.role} report: done",
                           session_id=f"s-{job.slug}")


@pytest.fixture
def service_factory(kb, project):
    def make(runner=None, **kw) -> TeamService:
        return TeamService(TeamStore(kb), project_dir=project, runner_factory=(lambda kind: runner) if runner else None,
                           **kw)
    return make
