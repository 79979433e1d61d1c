"""Team design validation, versioning, subagent files and spawn plans."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from evoteam.servers.knowledge.errors import NotFound
from evoteam.servers.team.materialise import (
    agent_file_text,
    parse_frontmatter,
    parse_role_marker,
    role_from_transcript,
)
from evoteam.servers.team.toolnaming import ToolNaming
from evoteam.servers.team.models import TeamDesign, slugify
from evoteam.servers.team.plan import spawn_plan
from evoteam.servers.team.validate import TeamDesignError, validate_design
from tests.team.conftest import design

# The team store runs on both backends (the `kb` fixture in conftest takes the backend).
BACKENDS = pytest.mark.parametrize("kb", ["sqlite", "postgres"], indirect=True)


def test_slugs():
    assert slugify("Profiling Scientist") == "profiling-scientist"
    assert slugify("  Knowledge Integrator (v2)! ") == "knowledge-integrator-v2"


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d["roles"].append({"name": "profiler", "mandate": "x"}), "same name"),
    (lambda d: d["coordination"]["stages"].append({"roles": ["Nobody"]}), "unknown role 'Nobody'"),
    (lambda d: d["coordination"]["stages"].extend([{"roles": ["Profiler"]}, {"roles": ["Profiler"]}]),
     "appears in two stages"),
    (lambda d: d["coordination"].update(handoffs=[{"from_role": "Profiler", "to_role": "Ghost", "what": "x"}]),
     "unknown role 'Ghost'"),
    (lambda d: d["roles"][0].update(mandate="   "), "empty mandate"),
    (lambda d: d["roles"][0].update(name="Team Member"), "generic subagent"),
])
def test_validation_errors_say_what_to_change(mutate, message):
    d = design("run_x", "Profiler", "Implementer")
    mutate(d)
    with pytest.raises(TeamDesignError) as err:
        validate_design(TeamDesign(**d))
    assert message in str(err.value)


def test_several_problems_are_listed_together():
    d = design("run_x", "A", "a")
    d["coordination"]["stages"] = [{"roles": ["zz"]}]
    with pytest.raises(TeamDesignError) as err:
        validate_design(TeamDesign(**d))
    assert "same name" in str(err.value) and "unknown role 'zz'" in str(err.value)


def test_schema_rejects_empty_team_and_nameless_role():
    with pytest.raises(ValidationError):
        TeamDesign(**{**design("run_x", "A"), "roles": []})
    with pytest.raises(ValidationError):
        TeamDesign(**design("run_x", "!!!"))


def test_budget_warning():
    d = design("run_x", "A", "B", budget_usd=4.0)
    assert any("add up to $8.00" in w for w in validate_design(TeamDesign(**d), budget_left=5.0))


@BACKENDS
async def test_versions_are_numbered_and_kept(kb, run, service_factory):
    svc = service_factory()
    first = await svc.design_team(TeamDesign(**design(run.id, "Profiler", "Implementer")))
    second = await svc.design_team(TeamDesign(**design(run.id, "Challenger")))
    assert (first.version, second.version) == (1, 2)
    assert (await kb.get_run(run.id)).current_version == 2
    v1 = await svc.get_team(run.id, 1)
    assert [r.name for r in v1.roles] == ["Profiler", "Implementer"]
    assert v1.created_by.user == "tester"
    assert [v.version for v in await svc.list_versions(run.id)] == [1, 2]
    # v1's planned roles were superseded by v2
    assert {s.status for s in await svc.team.list_sessions(run.id, 1)} == {"stopped"}
    assert any("stopped 2 role session" in w for w in second.warnings)
    # v1 ran without a reflection: v2's roles would read an empty history (mp41, 2026-12-05).
    assert any(w.startswith("team v1 has no entry in the evolution history: team.reflect on it now") for w in second.warnings)
    await svc.reflect(run.id, diagnosis="the challenger found nothing", version=2)
    third = await svc.design_team(TeamDesign(**design(run.id, "Builder")))
    assert not any("no entry in the evolution history" in w for w in third.warnings), third.warnings
    with pytest.raises(NotFound):
        await svc.get_team(run.id, 7)


async def test_the_reflection_on_the_last_version_is_found_in_a_long_history(kb, run, service_factory):
    """The store lists history oldest first: a first page of 100 missed a reflection written after
    a hundred earlier entries, and design_team warned of a reflection that was there (review
    2026-12-05)."""
    from evoteam.servers.knowledge.models import HistoryEntryCreate

    svc = service_factory()
    await svc.design_team(TeamDesign(**design(run.id, "Profiler")))
    await svc.design_team(TeamDesign(**design(run.id, "Challenger")))
    for i in range(101):
        await kb.add_history(HistoryEntryCreate(run_id=run.id, team_version=1, observed_behaviour=f"note {i}"))
    await svc.reflect(run.id, diagnosis="v2 found nothing", version=2)
    third = await svc.design_team(TeamDesign(**design(run.id, "Builder")))
    assert not any("evolution history" in w for w in third.warnings), third.warnings
    fourth = await svc.design_team(TeamDesign(**design(run.id, "Closer")))  # v3 has none
    assert any(w.startswith("team v3 has no entry in the evolution history") for w in fourth.warnings)


@BACKENDS
async def test_other_projects_runs_are_invisible(kb, run, service_factory):
    from evoteam.servers.team.store import TeamStore

    svc = service_factory()
    await svc.design_team(TeamDesign(**design(run.id, "Profiler")))
    outsider = TeamStore(kb.with_actor(kb.actor.model_copy(update={"project": "elsewhere"})))
    with pytest.raises(NotFound):
        await outsider.get_version(run.id)


@BACKENDS
async def test_materialised_files_are_agent_definitions(kb, run, service_factory, project):
    svc = service_factory()
    d = design(run.id, "Profiling Scientist", "Kernel Implementer", stages=[["Profiling Scientist"],
                                                                               ["Kernel Implementer"]])
    d["roles"][0].update(reads_first=["the last profile artifact"], must_not_touch=["main branch"],
                         mcp_servers=["knowledge", "bench", "retrieval"], model="sonnet")
    d["coordination"]["handoffs"] = [{"from_role": "Profiling Scientist", "to_role": "Kernel Implementer",
                                      "what": "the ranked list of bottlenecks"}]
    result = await svc.design_team(TeamDesign(**d))
    files = sorted((project / ".claude" / "agents").glob("*.md"))
    assert [f.name for f in files] == ["kernel-implementer.md", "profiling-scientist.md"]
    assert sorted(result.plan.materialised) == sorted(str(f) for f in files)
    front, body = parse_frontmatter((project / ".claude/agents/profiling-scientist.md").read_text())
    assert front["name"] == "profiling-scientist"
    assert front["description"].startswith("Profiling Scientist")
    assert front["model"] == "sonnet"
    tools = [t.strip() for t in front["tools"].split(",")]
    assert {"Read", "Bash", "mcp__knowledge__add_learning", "mcp__bench__evaluate", "mcp__retrieval__gate"} <= set(tools)
    assert "do the Profiling Scientist work" in body
    assert "the last profile artifact" in body and "Do not touch: main branch" in body
    assert "You hand to Kernel Implementer: the ranked list of bottlenecks" in body
    assert "stage 1 of 2" in body


def test_plugin_tool_prefix(run):
    from evoteam.servers.team.models import TeamVersion
    from evoteam.servers.knowledge.models import Provenance
    from datetime import datetime, UTC

    team = TeamVersion(**design(run.id, "Profiler"), version=1,
                       created_by=Provenance(user="u", created_at=datetime.now(UTC)))
    text = agent_file_text(team, team.roles[0], run, ToolNaming(prefix="mcp__plugin_evoteam_"))
    front, body = parse_frontmatter(text)
    assert "mcp__plugin_evoteam_knowledge__add_learning" in front["tools"]
    assert "mcp__plugin_evoteam_knowledge__learnings" in body
    assert ToolNaming.from_env({"EVOTEAM_PLUGIN": "1"}).tool("team", "reflect") == "mcp__plugin_evoteam_team__reflect"


@BACKENDS
async def test_spawn_plan_follows_stages(kb, run, service_factory):
    svc = service_factory()
    d = design(run.id, "Scout", "Builder", "Critic", stages=[["Scout"], ["Builder", "Critic"]])
    result = await svc.design_team(TeamDesign(**d))
    plan = result.plan
    assert [s.roles for s in plan.steps] == [["Scout"], ["Builder", "Critic"]]
    call = plan.steps[1].calls[0]
    assert call.subagent_type == "team-member" and call.run_in_background
    marker = parse_role_marker(call.prompt)
    assert (marker.slug, marker.version, marker.run_id) == ("builder", 1, run.id)
    assert "do the Builder work" in call.prompt
    assert "ONE message" in plan.instructions
    only = await svc.spawn_plan(run.id, roles=["critic"])
    assert [s.roles for s in only.steps] == [["Critic"]]


def test_unstaged_roles_start_first(run):
    from evoteam.servers.team.models import TeamVersion
    from evoteam.servers.knowledge.models import Provenance
    from datetime import datetime, UTC

    team = TeamVersion(**design(run.id, "Solo", "Later", stages=[["Later"]]), version=3,
                       created_by=Provenance(user="u", created_at=datetime.now(UTC)))
    plan = spawn_plan(team, run, subagent_type="general-purpose")
    assert [s.roles for s in plan.steps] == [["Solo", "Later"]]
    assert plan.steps[0].calls[0].subagent_type == "general-purpose"


def test_role_from_transcript(tmp_path):
    path = tmp_path / "agent-1.jsonl"
    path.write_text('{"type":"user","message":{"role":"user","content":"[evoteam role=scout version=2 run=run_ab-1]\\nTake on"}}\n')
    marker = role_from_transcript(path)
    assert (marker.slug, marker.version, marker.run_id) == ("scout", 2, "run_ab-1")
    assert role_from_transcript(tmp_path / "missing.jsonl") is None


@BACKENDS
async def test_a_users_own_agent_file_is_left_alone(kb, run, service_factory, project):
    folder = project / ".claude" / "agents"
    folder.mkdir(parents=True)
    (folder / "reviewer.md").write_text("---\nname: reviewer\ndescription: mine\n---\nmy reviewer\n")
    svc = service_factory()
    result = await svc.design_team(TeamDesign(**design(run.id, "Reviewer", "Builder")))
    assert (folder / "reviewer.md").read_text().endswith("my reviewer\n")
    assert any("left your own agent file" in w for w in result.warnings)
    assert (folder / "builder.md").is_file()
    await svc.reflect(run.id, diagnosis="v1 ran", version=1)
    again = await svc.design_team(TeamDesign(**design(run.id, "Builder")))  # our own file is replaced
    assert "team v2" in (folder / "builder.md").read_text() and not again.warnings[1:]


def test_a_hand_off_the_receiver_never_waits_for_is_said():
    """Stage k starts when stage k-1 has ended: a hand-off between roles that start together (or to
    one of an earlier stage) is accepted, but said, since its receiver never waits for it (a design
    handed a profile to a role of the same stage; review 2026-12-04)."""
    from evoteam.servers.team.models import TeamDesign
    from evoteam.servers.team.validate import validate_design

    def warned(stages, giver="Profiler", receiver="Builder") -> list[str]:
        d = design("run_x", "Profiler", "Builder", stages=stages)
        d["coordination"]["handoffs"] = [{"from_role": giver, "to_role": receiver, "what": "the profile"}]
        return [w for w in validate_design(TeamDesign(**d)) if "hand-off" in w]

    assert warned([["Profiler"], ["Builder"]]) == []
    same = warned([["Profiler", "Builder"]])
    assert len(same) == 1 and "start together" in same[0] and "later stage" in same[0]
    assert warned([]) == same  # no stages: every role starts at once
    assert "ends before the giver starts" in warned([["Builder"], ["Profiler"]])[0]
