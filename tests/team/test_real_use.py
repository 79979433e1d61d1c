"""Teams in real use (issue 12): an orphan's spend, `team status` wording, the supervisor's own spend."""

from __future__ import annotations

import json

from evoteam.servers.team.core import TeamService
from evoteam.servers.team.models import SessionUpdate, TeamDesign
from evoteam.servers.team.store import TeamStore
from tests.team.conftest import design


async def test_an_orphans_spend_is_recorded_once(kb, run, project, tmp_path, monkeypatch):
    config = tmp_path / "claude-config"
    transcript = config / "projects" / "-some-worktree" / "sess-orphan.jsonl"
    transcript.parent.mkdir(parents=True)
    usage = {"input_tokens": 100_000, "output_tokens": 1_000}
    transcript.write_text("\n".join(json.dumps(x) for x in [
        {"type": "user", "message": {"role": "user", "content": "[evoteam role=profiler version=1 run=x]"}},
        {"type": "assistant", "message": {"id": "m1", "model": "claude-sonnet-4-5", "usage": usage,
                                          "content": [{"type": "text", "text": "working"}]}}]) + "\n")
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(config))
    svc = TeamService(TeamStore(kb), project_dir=project, write_agent_files=False)
    await svc.design_team(TeamDesign(**design(run.id, "Profiler")))
    (session,) = await svc.team.list_sessions(run.id)
    session = await svc.team.update_session(session.id, SessionUpdate(status="running", session_id="sess-orphan",
                                                                       owner="supervise:elsewhere:1:abc"))
    assert await svc.reconcile_orphan(session) is False  # no process recorded, nothing to kill
    await svc.reconcile_orphan(session)  # a second restart does not count it again
    spend = await kb.spend(run.id)
    assert [(x.role, x.team_version, round(x.usd, 6)) for x in spend.lines] == [("Profiler", 1, 0.315)]


def test_team_status_says_not_started_until_a_role_runs(project, tmp_path):
    import asyncio

    from click.testing import CliRunner

    from evoteam.cli import main
    from evoteam.servers.knowledge.local import LocalKnowledgeStore
    from evoteam.servers.knowledge.models import RunCreate
    from evoteam.servers.knowledge.store import Actor

    db = tmp_path / "status.db"

    async def setup(mark: str | None = None):
        async with LocalKnowledgeStore.open(db, Actor(user="t")) as kb:
            svc = TeamService(TeamStore(kb), project_dir=project, write_agent_files=False)
            if mark:
                await svc.mark_running(mark, "Profiler", 1)
                return mark
            run = await kb.start_run(RunCreate(goal="g", budget_usd=3))
            await svc.design_team(TeamDesign(**design(run.id, "Profiler", "Builder")))
            return run.id

    run_id = asyncio.run(setup())

    def status_line() -> str:
        out = CliRunner().invoke(main, ["team", "status", run_id], env={"EVOTEAM_DB": str(db), "HOME": str(tmp_path)})
        assert out.exit_code == 0, out.output
        return out.output.splitlines()[0]

    assert status_line().endswith("not started")
    asyncio.run(setup(run_id))
    assert status_line().endswith("working")


async def test_a_budget_the_supervisor_alone_spends_stops_the_run(kb, run, project):
    """Headless: the wakes' own cost counts; a supervisor that spends the whole budget (10 USD)
    designing v1 ends the run before any role starts."""
    from tests.team.conftest import FakeRunner
    from tests.team.test_driver import FakeSupervisor, make_driver

    runner = FakeRunner(kb)
    supervisor = FakeSupervisor(kb, project, [design("", "Profiler")], cost=12.0)
    result = await make_driver(kb, project, runner, supervisor, run).run()
    assert result.reason == "budget spent" and runner.jobs == []
    assert (await kb.get_run(run.id)).status == "budget_spent"
    assert [(x.role, x.usd) for x in (await kb.spend(run.id)).lines] == [("supervisor", 12.0)]


def test_team_status_gives_the_best_with_its_interval_quick_or_not(project, tmp_path):
    """team_status gave a bare best_score (3.70314) where get_run gave its interval: a score with a
    95% interval gives it, the tool and both paths of the CLI alike; a program's range of too few
    runs is no such interval and is left out."""
    import asyncio
    import random

    from click.testing import CliRunner

    from evoteam.cli import main
    from evoteam.codehash import code_hash
    from evoteam.servers.knowledge.local import LocalKnowledgeStore
    from evoteam.servers.knowledge.models import CandidateCreate, RunCreate
    from evoteam.servers.knowledge.quickread import ENV_SWITCH
    from evoteam.servers.knowledge.store import Actor

    db = tmp_path / "status.db"
    rng = random.Random(1)

    async def setup(samples: dict) -> tuple[str, object]:
        async with LocalKnowledgeStore.open(db, Actor(user="t", verifier=True)) as kb:
            run = await kb.start_run(RunCreate(goal="g", budget_usd=3))
            code = "a = 1\n"
            await kb.record_candidate(CandidateCreate(run_id=run.id, code=code, code_hash=code_hash(code),
                                                      status="PASSED", score=3.7, samples=samples, verified=True))
            svc = TeamService(TeamStore(kb), project_dir=project, write_agent_files=False)
            await svc.design_team(TeamDesign(**design(run.id, "Profiler")))
            return run.id, await svc.team_status(run.id)

    def line(run_id: str, quick: bool) -> str:
        env = {"EVOTEAM_DB": str(db), "HOME": str(tmp_path), ENV_SWITCH: "1" if quick else "0"}
        out = CliRunner().invoke(main, ["team", "status", run_id], env=env)
        assert out.exit_code == 0, out.output
        return out.output.splitlines()[0]

    kernel, status = asyncio.run(setup({w: [3.7 * (1 + rng.uniform(-0.1, 0.1)) for _ in range(10)] for w in "ab"}))
    lo, hi = status.best_interval
    assert lo < status.best_score < hi
    assert line(kernel, True) == line(kernel, False) and f"({lo:.3g}–{hi:.3g})" in line(kernel, True)
    program, status = asyncio.run(setup({"program": [3.6, 3.7, 3.8]}))  # three runs: a range, not a 95% interval
    assert status.best_interval is None
    assert line(program, True) == line(program, False) and "best 3.7 cand_" in line(program, True)
    exact, status = asyncio.run(setup({"program": [2.635983] * 5}))  # exact: every digit, not 2.64
    assert status.best_interval is None and "best 2.635983 cand_" in line(exact, True) == line(exact, False)
