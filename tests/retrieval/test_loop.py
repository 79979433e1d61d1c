"""The whole loop through a real MCP client: gate → search → outcome → look-up, over the
local-corpus fixture, with the scripted Anthropic predictor and with the agent predictor."""

from __future__ import annotations

from pathlib import Path

from mcp import Client

from evoteam.config import Settings
from evoteam.servers.retrieval.backends import BackendSet, LocalBackend
from evoteam.servers.retrieval.predictor import AgentPredictor, AnthropicPredictor
from evoteam.servers.retrieval.server import build_server
from tests.retrieval.conftest import ScriptedModel, keyword_forecaster

QUESTIONS = ["how to avoid three passes over the row in a softmax kernel",
             "how to reduce a row maximum quickly inside a warp"]


def make_server(store, corpus_dir: Path, predictor):
    settings = Settings(db=Path("/nonexistent/unused.db"), corpus_dirs=[corpus_dir], search_backends=["local"])
    return build_server(settings, store, predictor=predictor, backends=BackendSet([LocalBackend([corpus_dir])]))


async def call(client: Client, tool: str, args: dict, **kw) -> dict:
    result = await client.call_tool(tool, args, **kw)
    assert not result.is_error, result.content
    return result.structured_content


def title_of(doc: dict) -> str:
    return doc["title"].lower()


async def test_anthropic_loop_ranks_the_helpful_document_first(store, run, corpus_dir):
    model = ScriptedModel()
    server = make_server(store, corpus_dir, AnthropicPredictor("sk-test", "claude-test", transport=model.transport))
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done, total, message):
        progress.append((done, total, message))

    async with Client(server) as client:
        gate = await call(client, "gate", {"run_id": run.id, "decision": "retrieve", "open_questions": QUESTIONS,
                                           "known": ["the kernel is memory bound"], "parent_score": 1.0})
        assert gate["decision"] == "retrieve" and gate["n_candidates"] == 4 and gate["decided_by"] == "caller"

        found = await call(client, "search", {"gate_id": gate["gate_id"]}, progress_callback=on_progress)
        assert found["status"] == "done" and found["round"] == 3
        kept = found["documents"]
        assert 1 <= len(kept) <= 3
        best = kept[0]
        assert "online softmax" in title_of(best)
        assert best["predicted_score"] == 2.6 and best["promising"] is True
        assert found["promising"] >= 1
        assert len(best["excerpt"]) <= 280
        # queries evolved: round 2 and 3 used the predictor's proposals, never repeating round 1
        rounds = found["rounds_done"]
        assert len(rounds) == 3
        assert rounds[0]["queries"] != rounds[1]["queries"]
        assert set(rounds[0]["queries"]).isdisjoint(rounds[1]["queries"])
        assert any("single-pass" in s for s in found["knowledge_state"]["learned"])
        assert progress and progress[-1][0] == progress[-1][1] == 3
        # The server-side predictor's calls are charged to the run's budget.
        costs = [c for c in await store.list_costs(run.id) if c.source == "retrieval_predictor"]
        assert costs and sum(c.detail["input_tokens"] for c in costs) == 100 * len(model.requests)
        assert (await store.spend(run.id)).spent_usd > 0
        # one scoring call per round with new documents, plus one query-writing call
        tools_called = [r["tool_choice"]["name"] for r in model.requests]
        assert tools_called[0] == "propose_queries"
        assert tools_called.count("submit_forecasts") == sum(1 for r in rounds if r["new_documents"])

        listing = await call(client, "lookup", {"run_id": run.id, "limit": 50})
        by_title = {title_of(d): d for d in listing["documents"]}
        online = best["id"]
        weak = next(d for t, d in by_title.items() if d["id"] != online and d["predicted_score"] is not None
                    and d["predicted_score"] < 1.4)
        warp = next(d for t, d in by_title.items() if "warp shuffle" in t)
        assert not any("mirror" in d["url"] for d in listing["documents"]), "content-hash duplicate kept twice"

        out = await call(client, "record_outcome", {"run_id": run.id, "gate_id": gate["gate_id"],
                                                    "document_ids": [online], "realised_score": 2.2,
                                                    "candidate_id": "cand_a"})
        assert out["improved"] is True and out["decision"] == "retrieve"
        again = await call(client, "record_outcome", {"run_id": run.id, "document_ids": [online],
                                                      "realised_score": 2.2, "candidate_id": "cand_a"})
        assert again["outcome_id"] == out["outcome_id"]  # idempotent per candidate
        await call(client, "record_outcome", {"run_id": run.id, "gate_id": gate["gate_id"],
                                              "document_ids": [warp["id"]], "realised_score": 1.3,
                                              "parent_score": 1.0})
        await call(client, "record_outcome", {"run_id": run.id, "document_ids": [weak["id"]],
                                              "realised_score": 0.8, "parent_score": 1.0})

        # look-up asked about warps still puts the document that actually helped first
        look = await call(client, "gate", {"run_id": run.id, "decision": "look-up", "parent_score": 2.2,
                                           "open_questions": ["warp shuffle reduction of the row maximum"]})
        assert look["n_candidates"] == 4
        assert look["documents"][0]["id"] == online
        assert look["documents"][0]["realised_score"] == 2.2 and look["documents"][0]["improved"] == 1

        full = await call(client, "lookup", {"document_id": online})
        assert "running maximum" in full["document"]["content"]
        assert full["document"]["predictions"][0]["predicted_score"] == 2.6

        stats = await call(client, "retrieval_stats", {"run_id": run.id})
        assert stats["searches"] == 1 and stats["outcomes"] == 3
        assert stats["distinct_urls"] == stats["results_returned"] - round(stats["repeated_url_rate"]
                                                                           * stats["results_returned"])
        assert stats["spearman_pairs"] == 3 and stats["spearman_predicted_vs_realised"] == 1.0
        assert stats["retrievals_with_promising"] == 1.0
        rates = {d["decision"]: d for d in stats["by_decision"]}
        assert rates["retrieve"]["outcomes"] == 2 and rates["retrieve"]["improvement_rate"] == 1.0
        assert rates["look-up"]["gates"] == 1


async def test_agent_predictor_loop(store, run, corpus_dir):
    server = make_server(store, corpus_dir, AgentPredictor())
    async with Client(server) as client:
        auto = await call(client, "gate", {"run_id": run.id, "open_questions": QUESTIONS, "parent_score": 1.0})
        assert auto["decision"] == "retrieve" and auto["decided_by"] == "rule"

        reply = await call(client, "search", {"gate_id": auto["gate_id"],
                                              "queries": ["single pass softmax running maximum"]})
        rounds_scored = 0
        seen_ids: set[str] = set()
        while reply["status"] == "needs_scores":
            docs = reply["to_score"]
            assert docs and all(d["predicted_score"] is None for d in docs)
            assert not seen_ids & {d["id"] for d in docs}, "a document was offered for scoring twice"
            seen_ids |= {d["id"] for d in docs}
            rows = [{"document_id": d["id"], "why": "agent",
                     "predicted_score": keyword_forecaster({"title": d["title"], "body": d["excerpt"]})}
                    for d in docs]
            garbage = [{"document_id": docs[0]["id"], "predicted_score": "2.0"},
                       {"document_id": "doc_unknown", "predicted_score": 2.0},
                       {"document_id": docs[-1]["id"], "predicted_score": -1e40},
                       {"predicted_score": 1.0}]
            reply = await call(client, "score_documents", {
                "search_id": reply["search_id"], "scores": garbage + rows,
                "open_questions": ["how to fuse the normalisation"],
                "next_queries": [f"fused softmax normalisation pass {rounds_scored}"]})
            rounds_scored += 1
            assert rounds_scored <= 3
        assert reply["status"] == "done" and rounds_scored >= 1
        assert any(r["dropped"] >= 4 for r in reply["rounds_done"])
        assert any("dropped" in n for n in reply["notes"])
        best = reply["documents"][0]
        assert "online softmax" in title_of(best) and best["promising"] is True

        # a finished search refuses more forecasts: they are frozen
        late = await client.call_tool("score_documents", {"search_id": reply["search_id"], "scores": []})
        assert late.is_error and "frozen" in late.content[0].text

        await call(client, "record_outcome", {"run_id": run.id, "document_ids": [best["id"]], "realised_score": 1.9,
                                              "parent_score": 1.0})
        second = await call(client, "gate", {"run_id": run.id, "open_questions": QUESTIONS, "parent_score": 1.9})
        assert second["decision"] == "look-up"  # a stored document already helped
        assert second["documents"][0]["id"] == best["id"]

        noop = await call(client, "gate", {"run_id": run.id, "decision": "auto", "known": ["all clear"]})
        assert noop["decision"] == "no-op" and noop["n_candidates"] == 1


async def test_tool_errors_say_what_to_do(store, run, corpus_dir):
    server = make_server(store, corpus_dir, AgentPredictor())
    async with Client(server) as client:
        bad = await client.call_tool("gate", {"run_id": "run_missing", "decision": "no-op"})
        assert bad.is_error and "start_run" in bad.content[0].text
        bad = await client.call_tool("search", {})
        assert bad.is_error and "gate_id" in bad.content[0].text
        bad = await client.call_tool("lookup", {"document_id": "doc_nope"})
        assert bad.is_error and "doc_" in bad.content[0].text
        bad = await client.call_tool("record_outcome", {"run_id": run.id, "realised_score": 1.0,
                                                        "gate_id": "gate_nope"})
        assert bad.is_error

    empty = build_server(Settings(db=Path("/nonexistent"), corpus_dirs=[], search_backends=["local", "tavily"]),
                         store, predictor=AgentPredictor())
    async with Client(empty) as client:
        bad = await client.call_tool("search", {"run_id": run.id, "queries": ["softmax"]})
        assert bad.is_error
        assert "TAVILY_API_KEY" in bad.content[0].text and "evoteam corpus index" in bad.content[0].text


async def test_stdio_server_lists_its_tools(tmp_path: Path, corpus_dir: Path):
    import os
    import sys

    from mcp import StdioServerParameters

    env = {**os.environ, "EVOTEAM_DB": str(tmp_path / "stdio.db"), "EVOTEAM_CORPUS": str(corpus_dir),
           "HOME": str(tmp_path), "EVOTEAM_PREDICTOR": "auto"}
    env.pop("ANTHROPIC_API_KEY", None)
    env.pop("TAVILY_API_KEY", None)
    params = StdioServerParameters(command=sys.executable, args=["-m", "evoteam.cli", "serve", "retrieval"],
                                   env=env, cwd=str(tmp_path))
    async with Client(params) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert names == {"gate", "search", "score_documents", "lookup", "record_outcome", "retrieval_stats"}
        stats = await client.call_tool("retrieval_stats", {})
        assert not stats.is_error and stats.structured_content["searches"] == 0


async def test_auto_gate_asks_the_anthropic_predictor_and_falls_back_to_the_rule(store, run, corpus_dir):
    model = ScriptedModel(gate_decision="no-op")
    server = make_server(store, corpus_dir, AnthropicPredictor("sk-test", "claude-test", transport=model.transport))
    async with Client(server) as client:
        gate = await call(client, "gate", {"run_id": run.id, "open_questions": QUESTIONS})
    assert gate["decision"] == "no-op" and gate["decided_by"] == "anthropic" and gate["n_candidates"] == 1
    assert model.requests[-1]["tool_choice"]["name"] == "choose_gate"

    import httpx2

    down = httpx2.MockTransport(lambda r: httpx2.Response(529, json={"type": "error", "error": {
        "type": "overloaded_error", "message": "overloaded"}}))
    server = make_server(store, corpus_dir, AnthropicPredictor("sk-test", "claude-test", transport=down,
                                                               max_retries=0))
    async with Client(server) as client:
        gate = await call(client, "gate", {"run_id": run.id, "open_questions": QUESTIONS})
    assert gate["decision"] == "retrieve" and gate["decided_by"] == "rule"
    assert "predictor unavailable" in gate["reason"]


async def test_server_without_a_store_opens_the_configured_one(tmp_path: Path, corpus_dir: Path):
    from evoteam.servers.knowledge.local import LocalKnowledgeStore
    from evoteam.servers.knowledge.models import RunCreate

    db = tmp_path / "own.db"
    async with LocalKnowledgeStore.open(db) as s:
        run = await s.start_run(RunCreate(goal="g"))
    settings = Settings(db=db, corpus_dirs=[corpus_dir], search_backends=["local"], predictor="agent")
    async with Client(build_server(settings)) as client:
        reply = await call(client, "search", {"run_id": run.id, "queries": ["online softmax"], "rounds": 1})
    assert reply["status"] == "needs_scores" and reply["to_score"]
