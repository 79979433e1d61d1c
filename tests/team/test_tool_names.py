"""A design whose texts name a tool no evoteam server has is refused before anything is stored,
with the nearest tool's name: mp67 wrote `knowledge.record_learning` in the knowledge plan, and the
brief handed it to every role beside the right `add_learning`, with no warning."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from evoteam.config import Settings
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.team.models import TeamDesign
from evoteam.servers.team.validate import SERVER_TOOL_NAMES, TeamDesignError, validate_design
from tests.servers.test_agent_context import SERVERS
from tests.team.conftest import design


async def test_the_list_of_tool_names_is_what_the_servers_register(tmp_path: Path):
    async with LocalKnowledgeStore.open(tmp_path / "kb.db") as store:
        for name, build in SERVERS.items():
            async with Client(build(Settings(db=tmp_path / "kb.db"), store)) as client:
                registered = {t.name for t in (await client.list_tools()).tools}
            assert registered == SERVER_TOOL_NAMES[name], name


@pytest.mark.parametrize("where, text, said", [
    ("shared_writes", "findings via knowledge.record_learning", "the knowledge plan names knowledge.record_learning, "
     "which the knowledge server does not have (did you mean knowledge.add_learning"),
    ("mandate", "then call mcp__plugin_evoteam_bench__evaluate_kernel on it", "role 'Profiler' names "
     "bench.evaluate_kernel, which the bench server does not have (did you mean bench.evaluate or "
     "bench.evaluation_result?)"),
    ("mandate", "read `mcp__knowledge__learning` first", "role 'Profiler' names knowledge.learning, which the "
     "knowledge server does not have (did you mean knowledge.learnings"),
    ("handoff", "the profile, stored with knowledge.put_artefact", "the coordination names knowledge.put_artefact, "
     "which the knowledge server does not have (did you mean knowledge.put_artifact or knowledge.get_artifact?): "
     "the brief would send the role to it; if it is no tool, write it without `knowledge.`"),
])
def test_a_tool_no_server_has_is_refused_with_the_nearest(where, text, said):
    d = design("run_x", "Profiler", "Implementer")
    if where == "mandate":
        d["roles"][0]["mandate"] += f"; {text}"
    elif where == "handoff":  # the coordination reaches every brief too (review)
        d["coordination"]["handoffs"] = [{"from_role": "Profiler", "to_role": "Implementer", "what": text}]
    else:
        d["knowledge_plan"] = {where: [text]}
    with pytest.raises(TeamDesignError) as err:
        validate_design(TeamDesign(**d))
    assert said in str(err.value), str(err.value)


def test_real_tools_paths_and_words_pass():
    d = design("run_x", "Profiler")
    d["roles"][0]["mandate"] += ("; read docs/knowledge.md and team.md, call knowledge.add_learning, "
                                 "`mcp__bench__evaluate`, mcp__plugin_evoteam_team__budget, bench: compare by id, "
                                 "each team.version's notes, the knowledge.search tool, knowledge.run_id, "
                                 "bench.split_dev")
    d["knowledge_plan"] = {"shared_reads": ["knowledge.learnings", "bench.describe_kit rmsnorm_cpu"]}
    assert validate_design(TeamDesign(**d)) == []


def test_names_under_the_users_tool_prefix_are_checked_and_other_servers_tools_are_not(monkeypatch):
    """Under an EVOTEAM_TOOL_PREFIX of the user's own (toolnaming.ToolNaming) a typo is caught as
    under the two built-in prefixes; another MCP server's tool whose name ends like one of ours
    (`mcp__github_retrieval__search_code`) is none of ours, and passes (review)."""
    monkeypatch.setenv("EVOTEAM_TOOL_PREFIX", "mcp__acme_tools_")
    d = design("run_x", "Profiler")
    d["roles"][0]["mandate"] += "; then mcp__acme_tools_bench__evaluate_kernel"
    with pytest.raises(TeamDesignError) as err:
        validate_design(TeamDesign(**d))
    assert "role 'Profiler' names bench.evaluate_kernel, which the bench server does not have (did you mean " \
        "bench.evaluate or bench.evaluation_result?)" in str(err.value), str(err.value)
    d = design("run_x", "Profiler")
    d["roles"][0]["mandate"] += ("; mcp__acme_tools_team__budget, mcp__github_retrieval__search_code, "
                                 "mcp__my_knowledge__get_artifacts, mcp__slack_team__budget_alert")
    assert validate_design(TeamDesign(**d)) == []
