"""`evoteam supervise --mode fixed|solo`: the static baselines of a matched-budget comparison.
The supervisor never wakes, the same team starts again each version, the run stops at its
budget, and `evoteam compare` then puts a solo run beside an evolving run of the same kit."""

from __future__ import annotations

import subprocess
import sys

import pytest

from evoteam.config import SOURCE_ROOT, load_settings
from evoteam.servers.bench.evaluation.core import evaluate_candidate
from evoteam.servers.knowledge.models import LearningCreate, RunCreate
from evoteam.servers.team.core import TeamService
from evoteam.servers.team.runners import Progress, RoleOutcome
from evoteam.servers.team.store import TeamStore
from evoteam.supervisor.cli import resolve_run
from evoteam.supervisor.driver import DriverConfig, SupervisorDriver
from evoteam.supervisor.modes import FIXED_TEAM
from tests.team.conftest import FakeRunner, design
from tests.team.test_driver import FakeSupervisor

KIT = "rmsnorm_cpu"
BETTER = SOURCE_ROOT / "task_kits" / KIT / "examples" / "better.py"


class NeverWake:
    async def wake(self, request):
        raise AssertionError(f"a static mode woke the supervisor ({request.trigger})")


class EvaluatingRunner:
    """A role that does real work: it evaluates the better kernel with the bench and records a
    learning, as its role and version."""

    kind = "claude"

    def __init__(self, kb, cost: float):
        self.kb, self.cost, self.jobs = kb, cost, []

    async def run(self, job, report) -> RoleOutcome:
        self.jobs.append(job)
        await report(Progress(turns=1, last_message="evaluating", session_id=f"s-{job.slug}"))
        writer = self.kb.with_actor(self.kb.actor.model_copy(update={"role": job.role, "team_version": job.version}))
        result = await evaluate_candidate(load_settings(), KIT, code=BETTER.read_text(), store=writer, run_id=job.run_id)
        await writer.add_learning(LearningCreate(run_id=job.run_id, text=f"fused pass scores {result.score}",
                                                 kind="observation"))
        return RoleOutcome(status="finished", cost_usd=self.cost, turns=3, last_message="done")


def _driver(kb, project, runner, waker, run_id, **config):
    svc = TeamService(TeamStore(kb), project_dir=project, runner_factory=lambda kind: runner,
                      write_agent_files=False)
    return SupervisorDriver(svc, run_id, waker=waker, config=DriverConfig(interval_s=0.01, poll_s=0.05, **config))


async def test_fixed_mode_restarts_the_same_staged_team_without_a_supervisor(kb, project):
    run = await kb.start_run(RunCreate(goal="g", kit="toy", budget_usd=8.5))
    runner = FakeRunner(kb, cost=1.0)
    result = await _driver(kb, project, runner, NeverWake(), run.id, mode="fixed").run()
    assert result.reason == "budget spent" and result.wakes == 0
    versions = await TeamStore(kb).list_versions(run.id)
    assert len(versions) >= 2
    assert all(v.roles == [r.name for r in FIXED_TEAM] for v in versions)
    assert all(v.diagnosis.startswith("fixed mode (ablation)") for v in versions)
    # Stages hold: in every version the Planner ran (and ended) before the other three started.
    first = [j for j in runner.jobs if j.version == 1]
    assert first[0].role == "Planner" and {j.role for j in first[1:4]} == {"Hardware Researcher", "Implementer",
                                                                            "Profiler"}


async def test_a_run_is_continued_only_in_its_own_mode(kb, project):
    settings = load_settings()
    solo = await kb.start_run(RunCreate(goal="g", kit=KIT, budget_usd=1.0))
    await _driver(kb, project, FakeRunner(kb, cost=1.0), NeverWake(), solo.id, mode="solo").run()
    evolving = await kb.start_run(RunCreate(goal="g", kit=KIT, budget_usd=5.0))
    await kb.update_run(solo.id, status="active")  # as if its budget had been raised
    found, how = await resolve_run(kb, settings, KIT, None, None, False, "evolving")
    assert found.id == evolving.id and how == "continuing"
    found, _ = await resolve_run(kb, settings, KIT, None, None, False, "solo")
    assert found.id == solo.id
    with pytest.raises(Exception, match="solo mode"):
        await resolve_run(kb, settings, None, None, solo.id, False, "evolving")


async def test_a_run_that_ranks_against_its_kit_is_not_continued(kb, project):
    """The bench refuses to record in a run whose direction is not its kit's, so the supervisor
    never drives one: it starts a run of its own."""
    wrong = await kb.start_run(RunCreate(goal="g", kit=KIT, direction="minimize", budget_usd=1.0))
    found, how = await resolve_run(kb, load_settings(), KIT, 2.0, None, False, "evolving")
    assert how == "started" and found.id != wrong.id and found.direction == "maximize"


async def test_solo_and_evolving_runs_of_one_kit_compare_in_one_command(kb, project, tmp_path):
    evolving = await kb.start_run(RunCreate(goal="fast RMSNorm", kit=KIT, budget_usd=2.5))
    teams = [design("", "Profiler", "Implementer"), design("", "Challenger")]
    sup = FakeSupervisor(kb, project, teams, cost=0.1)
    await _driver(kb, project, EvaluatingRunner(kb, cost=0.5), sup, evolving.id).run()

    solo = await kb.start_run(RunCreate(goal="fast RMSNorm", kit=KIT, budget_usd=1.2))
    solo_runner = EvaluatingRunner(kb, cost=0.5)
    result = await _driver(kb, project, solo_runner, NeverWake(), solo.id, mode="solo").run()
    assert result.reason == "budget spent" and {j.role for j in solo_runner.jobs} == {"Engineer"}
    # Every candidate of the solo run carries its role and version.
    page = await kb.list_candidates(solo.id, limit=100)
    assert page.items and all(c.provenance.role == "Engineer" and c.provenance.team_version for c in page.items)

    out = tmp_path / "compare.html"
    env = {"EVOTEAM_DB": str(kb.db.path), "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-m", "evoteam.cli", "compare", evolving.id, solo.id, "-o", str(out)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    page_text = out.read_text()
    assert evolving.id in page_text and solo.id in page_text and "first ≥" in page_text
