"""Issue 22: what a model reads from the four servers. Tool schemas fit a budget, an argument a
tool does not have is refused by name (it used to be dropped silently), and result text carries
no null or empty fields."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import Client

from evoteam.config import Settings
from evoteam.servers.bench.server import build_server as bench_server
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.server import build_server as knowledge_server
from evoteam.servers.retrieval.server import build_server as retrieval_server
from evoteam.servers.team.server import build_server as team_server

SERVERS = {"knowledge": knowledge_server, "team": team_server, "retrieval": retrieval_server, "bench": bench_server}
SCHEMA_BUDGET = 25_000


def schema_chars(tool) -> int:
    """What a model is shown of a tool: its name, description and input schema, as JSON."""
    return len(json.dumps({"name": tool.name, "description": tool.description, "inputSchema": tool.input_schema},
                          separators=(",", ":"), ensure_ascii=False))


@pytest.fixture
async def store(tmp_path: Path):
    async with LocalKnowledgeStore.open(tmp_path / "kb.db") as opened:
        yield opened


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(db=tmp_path / "kb.db")


async def test_the_four_servers_tool_schemas_fit_the_budget(settings, store):
    total, count = 0, 0
    for name, build in SERVERS.items():
        async with Client(build(settings, store)) as client:
            tools = (await client.list_tools()).tools
        for tool in tools:
            text = json.dumps(tool.input_schema)
            assert '"title"' not in text.replace('"title":{', ''), (name, tool.name)  # no generated titles
            assert '{"type": "null"}' not in text, (name, tool.name)
        total += sum(schema_chars(t) for t in tools)
        count += len(tools)
    assert count >= 30
    assert total <= SCHEMA_BUDGET, f"{count} tools take {total} characters of schema"


@pytest.mark.parametrize("server, tool, arguments, bad, valid", [
    ("knowledge", "get_run", {"run_id": "run_x", "verbose": True}, "verbose", "run_id"),
    ("team", "budget", {"run_id": "run_x", "currency": "eur"}, "currency", "run_id"),
    ("retrieval", "score_documents", {"search_id": "srch_x", "scores": [], "knowledge_state": {}},
     "knowledge_state", "open_questions"),
    ("bench", "describe_kit", {"kit": "rmsnorm_cpu", "verbose": True}, "verbose", "detail"),
])
async def test_an_unknown_argument_is_refused_by_name(settings, store, server, tool, arguments, bad, valid):
    async with Client(SERVERS[server](settings, store)) as client:
        result = await client.call_tool(tool, arguments)
    assert result.is_error
    text = result.content[0].text
    assert f"'{bad}'" in text and valid in text, text
    assert "\n" not in text


async def test_result_text_is_compact_and_drops_empty_fields(settings, store):
    async with Client(knowledge_server(settings, store)) as client:
        result = await client.call_tool("start_run", {"goal": "make it fast"})
        said = client.instructions
    # Said where the model reads how the servers work: remeasure's empty within_noise_of_top read as
    # a promise the reply did not keep (model-play mp51).
    assert "A reply's text leaves out empty and null fields." in said
    async with Client(bench_server(settings, store)) as client:
        assert "changed, within_noise_of_top and\nbetter_than_top, where absent, are empty" in client.instructions
    assert not result.is_error
    text = result.content[0].text
    assert "null" not in text and "\n" not in text and ": " not in text
    shown = json.loads(text)
    # The structured content keeps every field of the schema; the text keeps every non-empty one.
    assert result.structured_content["best_score"] is None
    assert {k for k, v in result.structured_content.items() if v not in (None, "", [], {})} == set(shown)


def test_result_text_keeps_the_digits_a_leaderboard_moves_in():
    """Seven significant digits: a best known of 2.635983 read 2.636 (above itself), and two
    candidates 2.3e-7 apart both read 0.38122 (model-play 2026-12-04); noise digits still go."""
    from evoteam.servers.compact import rounded

    assert rounded(2.635983) == 2.635983 and rounded(0.380859) == 0.380859
    assert rounded(0.38122257) != rounded(0.38122234)
    assert rounded(1.1065070918246214) == 1.106507


async def test_result_text_leaves_out_the_range_of_too_few_runs(settings, store):
    """A single run's [x, x] read as exact beside an exact score's, and two runs' range as a 95%
    interval (model-plays 2026-12-04): where a result gives a count of too few runs, its text leaves
    the range out (programs still find it in structuredContent); five or more keep theirs."""
    from evoteam.servers.knowledge.models import CandidateCreate, RunCreate
    from evoteam.servers.knowledge.store import Actor

    run = await store.start_run(RunCreate(goal="g", kit="k", direction="minimize", x0=1.0))
    bench = store.with_actor(Actor(user=store.actor.user, verifier=True))
    for code, runs in (("a = 1\n", [0.40]), ("a = 2\n", [0.45, 0.44, 0.46, 0.45, 0.45]), ("a = 3\n", [0.41, 0.43])):
        await bench.record_candidate(CandidateCreate(run_id=run.id, code=code, status="PASSED", score=runs[0],
                                                     samples={"program": runs}, verified=True))
    async with Client(knowledge_server(settings, store)) as client:
        result = await client.call_tool("best_candidates", {"run_id": run.id})
    shown = {c["id"]: c for c in json.loads(result.content[0].text)["items"]}
    kept = {c["id"]: c for c in result.structured_content["items"]}
    few = [c for c in shown.values() if "runs" in c]
    assert [c["runs"] for c in few] == [1, 2] and all("score_interval" not in c for c in few)
    assert all(kept[c["id"]]["score_interval"] for c in few)
    (measured,) = [c for c in shown.values() if "runs" not in c]
    assert measured["score_interval"] == [0.44, 0.46]
    # A run whose best is one run: its [x, x] is left out wherever the best is given (review 2026-12-04).
    one = await store.start_run(RunCreate(goal="g", kit="k", direction="minimize", x0=1.0))
    await bench.record_candidate(CandidateCreate(run_id=one.id, code="a = 1\n", status="PASSED", score=0.4,
                                                 samples={"program": [0.4]}, verified=True))
    async with Client(knowledge_server(settings, store)) as client:
        for tool in ("trajectory", "get_run"):
            text = json.loads((await client.call_tool(tool, {"run_id": one.id})).content[0].text)
            assert "best_interval" not in text and text["best_runs"] == 1, (tool, text)
