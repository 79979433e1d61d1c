"""The team MCP server through a real MCP client (in memory)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import Client

from evoteam.config import Settings
from evoteam.servers.team.materialise import parse_frontmatter
from evoteam.servers.team.server import build_server
from tests.team.conftest import FakeRunner, design

# The team store runs on both backends (the `kb` fixture in conftest takes the backend).
BACKENDS = pytest.mark.parametrize("kb", ["sqlite", "postgres"], indirect=True)

REPO = Path(__file__).resolve().parents[2]


def data(result):
    assert not result.is_error, result.content[0].text
    return result.structured_content


@pytest.fixture
def client_factory(kb, project, tmp_path):
    def make(runner=None):
        server = build_server(Settings(db=tmp_path / "evoteam.db"), kb,
                              runner_factory=(lambda kind: runner) if runner else None, project_dir=project)
        return Client(server)
    return make


async def test_tools_are_few_documented_and_annotated(client_factory):
    async with client_factory() as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert {"design_team", "spawn_role", "team_status", "stop_role", "reflect", "budget"} <= set(tools)
    assert len(tools) <= 12
    for tool in tools.values():
        assert tool.description and len(tool.description) > 40, tool.name
        assert tool.output_schema is not None, tool.name
    assert tools["stop_role"].annotations.destructive_hint is True
    roles_schema = tools["design_team"].input_schema["properties"]["roles"]
    assert roles_schema["type"] == "array" and "items" in roles_schema


async def test_a_wrong_field_in_a_design_is_named_with_the_fields_it_has(client_factory, run):
    """A model going by the prose wrote `roles.0.reads` and `coordination: "parallel"` and read
    "Extra inputs are not permitted", "Input should be a valid dictionary" (model-play 2026-12-04):
    the error names the field it likely meant and the fields each place has, once."""
    async with client_factory() as client:
        d = design(run.id, "Profiler")
        d["roles"][0]["reads"] = ["the kit's README"]
        d["roles"][0]["mission"] = "x"
        d["coordination"] = "parallel"
        result = await client.call_tool("design_team", d)
    text = result.content[0].text
    assert result.is_error and "Extra inputs" not in text, text
    assert "roles.0.reads: no such field (did you mean 'reads_first'?)" in text, text
    assert "roles.0.mission: no such field;" in text and "did you mean 'isolation'" not in text, text
    assert text.count("the fields here: name, mandate,") == 1, text  # the role's fields, listed once
    assert "coordination: should be an object with the fields stages, handoffs" in text, text


@BACKENDS
async def test_design_status_reflect_budget(client_factory, run, project):
    async with client_factory() as client:
        d = design(run.id, "Profiler", "Implementer", stages=[["Profiler"], ["Implementer"]])
        result = data(await client.call_tool("design_team", d))
        assert result["version"] == 1 and len(result["plan"]["steps"]) == 2
        assert (project / ".claude/agents/profiler.md").is_file()
        status = data(await client.call_tool("team_status", {"run_id": run.id}))
        assert [r["status"] for r in status["roles"]] == ["planned", "planned"] and not status["finished"]
        plan = data(await client.call_tool("get_team", {"run_id": run.id, "plan": True}))
        assert plan["team"]["version"] == 1 and plan["plan"]["steps"][0]["roles"] == ["Profiler"]
        listed = data(await client.call_tool("list_versions", {"run_id": run.id}))
        assert listed["total"] == 1 and listed["next_cursor"] is None
        entry = data(await client.call_tool("reflect", {"run_id": run.id, "diagnosis": "stuck debugging",
                                                         "design_change": "add an auditor"}))
        assert entry["team_version"] == 1 and entry["provenance"]["role"] == "supervisor"
        # Nothing evaluated yet: not a version without a gain, which the stop rule would count (mp54).
        assert entry["versions_without_significant_gain"] == 0 and entry["version_result"]["gain"] == \
            "no ranked candidate yet: its roles have not ended, so the stop rule does not count it"
        # Its roles never ran: the reply says the reflection is early (model-play 2026-12-04).
        assert entry["roles_not_ended"] == ["Profiler", "Implementer"]
        budget = data(await client.call_tool("budget", {"run_id": run.id}))
        assert budget["budget_usd"] == 10.0 and budget["spent_usd"] == 0 and not budget["exhausted"]
        await client.call_tool("design_team", design(run.id, "Auditor"))
        first = data(await client.call_tool("list_versions", {"run_id": run.id, "limit": 1}))
        assert first["total"] == 2 and [v["version"] for v in first["items"]] == [1] and first["next_cursor"]
        second = data(await client.call_tool("list_versions", {"run_id": run.id, "limit": 1,
                                                                "cursor": first["next_cursor"]}))
        assert [v["version"] for v in second["items"]] == [2] and second["next_cursor"] is None


@BACKENDS
async def test_errors_are_tool_errors_that_say_what_to_do(client_factory, run):
    async with client_factory() as client:
        bad = design(run.id, "A", "a")
        result = await client.call_tool("design_team", bad)
        assert result.is_error and "distinct name" in result.content[0].text
        result = await client.call_tool("team_status", {"run_id": "run_nope"})
        assert result.is_error and "list_runs" in result.content[0].text
        result = await client.call_tool("spawn_role", {"run_id": run.id, "role": "Ghost"})
        assert result.is_error and "design_team" in result.content[0].text
        await client.call_tool("design_team", design(run.id, "Solo"))
        result = await client.call_tool("spawn_role", {"run_id": run.id, "role": "Ghost"})
        assert result.is_error and "its roles are Solo" in result.content[0].text
        result = await client.call_tool("reflect", {"run_id": run.id})
        assert result.is_error and "at least one" in result.content[0].text


@BACKENDS
async def test_spawn_role_runs_headless_and_records_cost(client_factory, kb, run):
    # "hang" until released, then finish: a role that finished at once made the second spawn
    # legitimately succeed, so the refusal is checked while the role is certainly running
    runner = FakeRunner(kb, behaviours={"solo": "hang"}, cost=0.75)
    async with client_factory(runner) as client:
        await client.call_tool("design_team", design(run.id, "Solo"))
        session = data(await client.call_tool("spawn_role", {"run_id": run.id, "role": "solo", "cap_usd": 3}))
        assert session["status"] == "running" and session["cap_usd"] == 3.0
        again = await client.call_tool("spawn_role", {"run_id": run.id, "role": "Solo"})
        assert again.is_error and "already running" in again.content[0].text
        runner.release.set()
        while True:  # the role runs as a task of the server; wait for it through the status tool
            status = data(await client.call_tool("team_status", {"run_id": run.id}))
            if status["finished"]:
                break
        assert status["roles"][0]["status"] == "finished" and status["roles"][0]["cost_usd"] == 0.75
        assert runner.jobs[0].env["EVOTEAM_ROLE"] == "Solo" and runner.jobs[0].env["EVOTEAM_TEAM_VERSION"] == "1"
        budget = data(await client.call_tool("budget", {"run_id": run.id}))
        assert budget["by_role"] == {"Solo": 0.75} and budget["by_version"] == {"v1": 0.75}


@BACKENDS
async def test_record_role_result_prices_the_transcript(client_factory, run, tmp_path):
    transcript = tmp_path / "agent-9.jsonl"
    transcript.write_text(json.dumps({"type": "assistant", "message": {
        "id": "m1", "model": "claude-sonnet-4-5", "usage": {"input_tokens": 1_000_000, "output_tokens": 0}}}) + "\n")
    async with client_factory() as client:
        await client.call_tool("design_team", design(run.id, "Scout", "Builder"))
        session = data(await client.call_tool("record_role_result", {
            "run_id": run.id, "role": "Scout", "summary": "found the hot loop", "transcript_path": str(transcript)}))
        assert session["status"] == "finished" and session["cost_usd"] == pytest.approx(3.0)
        assert session["last_message"] == "found the hot loop"
        await client.call_tool("record_role_result", {"run_id": run.id, "role": "Builder", "status": "failed",
                                                      "cost_usd": 0.5})
        status = data(await client.call_tool("team_status", {"run_id": run.id}))
        assert status["finished"] and status["spent_usd"] == pytest.approx(3.5)
        stop = data(await client.call_tool("stop_role", {"run_id": run.id}))
        assert stop["stopped"] == []  # nothing left to stop


async def test_run_report_names_the_newest_versions_roles_not_ended(client_factory, run):
    """A supervisor resuming a run whose roles never reported (no hooks) read run_report as a
    finished version; only reflect's reply said otherwise (model-play mp42, 2026-12-05)."""
    async with client_factory() as client:
        await client.call_tool("design_team", design(run.id, "Scout", "Builder"))
        report = data(await client.call_tool("run_report", {"run_id": run.id}))
        assert report["roles_not_ended"] == ["Scout", "Builder"]
        await client.call_tool("record_role_result", {"run_id": run.id, "role": "Scout", "summary": "done"})
        assert data(await client.call_tool("run_report", {"run_id": run.id}))["roles_not_ended"] == ["Builder"]
        await client.call_tool("record_role_result", {"run_id": run.id, "role": "Builder", "summary": "done"})
        ended = await client.call_tool("run_report", {"run_id": run.id})
    assert data(ended)["roles_not_ended"] == [] and "roles_not_ended" not in ended.content[0].text


@BACKENDS
async def test_stop_role_tool(client_factory, kb, run):
    runner = FakeRunner(kb, behaviours={"stuck": "hang"})
    async with client_factory(runner) as client:
        await client.call_tool("design_team", design(run.id, "Stuck", "Idle"))
        await client.call_tool("spawn_role", {"run_id": run.id, "role": "Stuck"})
        stop = data(await client.call_tool("stop_role", {"run_id": run.id, "reason": "redesign"}))
        assert sorted((s["role"], s["status"]) for s in stop["stopped"]) == [("Idle", "stopped"), ("Stuck", "stopped")]
        status = data(await client.call_tool("team_status", {"run_id": run.id}))
        assert status["finished"] and status["roles"][0]["error"] == "redesign"


def test_shipped_team_member_agent_parses():
    front, body = parse_frontmatter((REPO / "agents" / "team-member.md").read_text())
    assert front["name"] == "team-member" and front["description"]
    assert "tools" not in front  # inherits every tool, whatever the MCP prefix
    assert "brief" in body


async def test_a_reflection_on_a_version_whose_best_was_not_remeasured_says_to_remeasure(client_factory, kb, run):
    """A model reflected on v1's gain as significant with v1's best in run_report's remeasure_missing,
    unsure whether the re-measurement was per version or once at the end (mp70)."""
    import random

    from evoteam.codehash import code_hash
    from evoteam.report.summary import VersionLine
    from evoteam.servers.knowledge.models import CandidateCreate
    from evoteam.servers.knowledge.store import Actor
    from evoteam.servers.team.reflection import remeasure_first

    rng = random.Random(3)
    async with client_factory() as client:
        await client.call_tool("design_team", design(run.id, "Builder"))
        bench = kb.with_actor(Actor(user="u", client="t", role="Builder", team_version=1, verifier=True))
        best = (await bench.record_candidate(CandidateCreate(
            run_id=run.id, code="a = 2\n", code_hash=code_hash("a = 2\n"), status="PASSED", score=2.0, verified=True,
            samples={w: [2.0 * (1 + rng.uniform(-.05, .05)) for _ in range(10)] for w in "ab"}))).id
        entry = data(await client.call_tool("reflect", {"run_id": run.id, "outcome": "2x"}))
        report = data(await client.call_tool("run_report", {"run_id": run.id}))
    assert report["remeasure_missing"] == [best], report
    assert entry["remeasure_first"] == (
        f"the newest re-measurement did not measure v1's best {best}: bench.remeasure on the run (it measures every "
        "version's best) before you crown it or design the next version on its gain, which is read here from "
        "separate evaluations"), entry
    # Measured by the newest re-measurement, or no best yet: nothing to say.
    line = VersionLine.model_validate(entry["version_result"])
    assert remeasure_first(line, []) is None and remeasure_first(line.model_copy(update={"best_candidate_id": None}),
                                                                [best]) is None
