"""Issue 22, "budget that never moves": installed without hooks, nothing records a run's costs.
The budget and the run report say so, and the stop rule (team.budget says exhausted) still fires;
the supervisor guide reaches a session in every install route, through the team server."""

from __future__ import annotations

import pytest

from mcp import Client

from evoteam.config import Settings
from evoteam.report.summary import summarise_run
from evoteam.servers.knowledge.models import CandidateCreate, CostCreate
from evoteam.servers.team.budget import VERSIONS_WITHOUT_COSTS
from evoteam.servers.team.models import TeamDesign
from evoteam.servers.team.server import build_server
from evoteam.servers.team.sentences import describe_spend
from tests.team.conftest import design


async def finish_version(svc, run_id: str, name: str) -> None:
    await svc.design_team(TeamDesign(**design(run_id, name)))
    await svc.record_role_result(run_id, name, summary=f"{name} done.")  # no cost: no hook, no transcript


async def test_without_recorded_costs_the_budget_says_so_and_still_runs_out(kb, run, service_factory):
    svc = service_factory()
    fresh = await svc.budget(run.id)
    # Nothing done yet: no warning, but not a bare "recorded" either (a model read it as the hooks
    # at work, model-play 2026-12-03): the note says none is recorded yet and when that means none.
    assert fresh.costs_recorded and "no cost recorded yet" in fresh.note and "turns false" in fresh.note
    # ...and what then ends the run, from the first reply: the skill has the model tell the user now (mp67).
    assert f"exhausted then counts finished team versions instead: {VERSIONS_WITHOUT_COSTS}" in fresh.note
    await kb.record_candidate(CandidateCreate(run_id=run.id, code="x = 1", status="PASSED", score=1.2))
    for n in range(VERSIONS_WITHOUT_COSTS):
        report = await svc.budget(run.id)
        assert not report.costs_recorded and "costs unrecorded" in report.note
        assert not report.exhausted and report.left_usd is None, n  # what is left is not known
        # The count is the default: a user's own number of versions is theirs to stop at (mp70 read "2 of 3
        # (more only when the user asks)" as one more to run after the two the user asked for).
        assert n == 0 or f"{n} of {VERSIONS_WITHOUT_COSTS}, the default (where the user named a number of versions, " \
            "stop at theirs" in report.note, report.note
        await finish_version(svc, run.id, f"Role {n}")
    report = await svc.budget(run.id)
    assert report.exhausted and report.spent_usd == 0
    # team_status says it too: "left_usd: 10.0" beside the budget's "costs unrecorded" read as money left (mp71).
    status = await svc.team_status(run.id)
    assert not status.costs_recorded and status.left_usd is None and status.budget_usd == 10.0
    assert describe_spend(status) == "$0.00 of $10.00 (costs unrecorded: team budget counts versions)"
    assert await svc.roles_not_ended(run.id, 1) == []  # its role ended: a reflection on v1 is not early
    summary = await summarise_run(kb, run.id)
    assert summary.costs and "costs unrecorded" in summary.costs


async def test_a_recorded_cost_turns_the_dollar_budget_back_on(kb, run, service_factory):
    svc = service_factory()
    for n in range(VERSIONS_WITHOUT_COSTS):
        await finish_version(svc, run.id, f"Role {n}")
    await kb.record_cost(CostCreate(run_id=run.id, usd=1.0, source="reported"))
    report = await svc.budget(run.id)
    assert report.costs_recorded and report.note is None and not report.exhausted  # $1 of $10
    assert report.left_usd == pytest.approx(9.0)
    status = await svc.team_status(run.id)
    assert status.costs_recorded and status.left_usd == pytest.approx(9.0)
    assert describe_spend(status) == "$1.00 of $10.00"
    assert (await summarise_run(kb, run.id)).costs is None


async def test_the_supervisor_guide_is_served_by_the_team_server(kb, project, tmp_path, monkeypatch):
    monkeypatch.delenv("CLAUDE_PLUGIN_ROOT", raising=False)  # as in an --mcp-only install
    server = build_server(Settings(db=tmp_path / "evoteam.db"), kb, project_dir=project)
    async with Client(server) as client:
        resources = {str(r.uri) for r in (await client.list_resources()).resources}
        assert "evoteam://team/supervisor-guide" in resources
        text = (await client.read_resource("evoteam://team/supervisor-guide")).contents[0].text
        prompt = await client.get_prompt("supervisor_guide", {"run_id": "run_x"})
    assert "mcp__team__design_team" in text and "mcp__team__reflect" in text
    assert "run_x" in prompt.messages[0].content.text


def test_the_skill_points_at_the_guide_where_it_cannot_inline_it():
    from pathlib import Path

    skill = (Path(__file__).resolve().parents[2] / "skills" / "evolve-team" / "SKILL.md").read_text()
    fallback = skill.split('2>/dev/null || echo "', 1)[1].split('"`', 1)[0]
    assert "evoteam://team/supervisor-guide" in fallback and "`" not in fallback  # a backquote would end the !`…`
    assert "costs unrecorded" in skill.replace('"', "")
