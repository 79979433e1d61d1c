"""Issue 22 and 27: the gate knows which search backends exist and consults the store before the
web; its next steps name only arguments the tools have, and stop asking for record_outcome after
bench evaluate credited the documents."""

from __future__ import annotations

import re
from pathlib import Path

from mcp import Client

from evoteam.config import Settings
from evoteam.servers.knowledge.models import LearningCreate, RunCreate
from evoteam.servers.retrieval.backends import BackendSet, LocalBackend, build_backends
from evoteam.servers.retrieval.predictor import AgentPredictor
from evoteam.servers.retrieval.server import build_server

QUESTIONS = ["how to avoid three passes over the row in a softmax kernel"]


async def call(client: Client, tool: str, args: dict) -> dict:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content
    return result.structured_content


def local_corpus_server(store, corpus_dir: Path):
    """The retrieval server with a local corpus as its only backend."""
    settings = Settings(db=Path("/nonexistent/unused.db"), corpus_dirs=[corpus_dir], search_backends=["local"])
    return build_server(settings, store, predictor=AgentPredictor(), backends=BackendSet([LocalBackend([corpus_dir])]))


def default_install(tmp_path: Path) -> Settings:
    """What a fresh machine has: no corpus configured, no Tavily key."""
    return Settings(db=tmp_path / "unused.db")


async def test_without_a_backend_the_gate_never_says_retrieve(store, run, tmp_path):
    settings = default_install(tmp_path)
    backends = build_backends(settings)
    assert backends.backends == []
    async with Client(build_server(settings, store, predictor=AgentPredictor(), backends=backends)) as client:
        for decision in ("auto", "retrieve"):
            gate = await call(client, "gate", {"run_id": run.id, "decision": decision, "open_questions": QUESTIONS})
            assert gate["decision"] != "retrieve", gate
            assert "no search backend" in gate["reason"]
            assert "knowledge.search" in gate["reason"], gate["reason"]  # the way to what the store holds
        failed = await client.call_tool("search", {"run_id": run.id})
    assert failed.is_error and "knowledge.search" in failed.content[0].text


async def test_the_store_answers_before_the_web(store, run, corpus_dir):
    """A local corpus is there, yet a learning of an earlier run already answers the question."""
    earlier = await store.start_run(RunCreate(goal=run.goal, direction="maximize"))
    learning = await store.add_learning(LearningCreate(
        run_id=earlier.id, kind="technique",
        text="An online softmax (running max and sum in one pass over the row) avoids three passes: 1.8x."))
    async with Client(local_corpus_server(store, corpus_dir)) as client:
        gate = await call(client, "gate", {"run_id": run.id, "open_questions": QUESTIONS})
        assert gate["decision"] == "look-up", gate
        assert [hit["id"] for hit in gate["knowledge"]] == [learning.id]
        assert learning.id in gate["reason"]
        # Only stored knowledge, no documents: the next step says how to build on it, not how to credit docs.
        assert "parent_id" in gate["next_step"] and "doc_" not in gate["next_step"]
        # The argument that gives the code, not detail's raw rounds (3,250 characters read; mp74).
        assert "include_code=true" in gate["next_step"] and "detail=true" not in gate["next_step"], gate["next_step"]
        # A question the store does not answer still goes to the corpus.
        other = await call(client, "gate", {"run_id": run.id, "open_questions": ["is the L2 flush covering buffers"]})
        assert other["decision"] == "retrieve"


async def test_a_gate_search_score_cycle_names_only_real_arguments(store, run, corpus_dir):
    async with Client(local_corpus_server(store, corpus_dir)) as client:
        schemas = {t.name: set(t.input_schema["properties"]) for t in (await client.list_tools()).tools}
        gate = await call(client, "gate", {"run_id": run.id, "decision": "retrieve", "open_questions": QUESTIONS})
        found = await call(client, "search", {"gate_id": gate["gate_id"], "rounds": 1})
        assert found["status"] == "needs_scores"
        hint = found["next_step"]
        named = re.sub(r"\[.*?\]|'[^']*'", "", re.search(r"score_documents\((.*?)\)", hint).group(1))  # row fields aside
        arguments = {a for a in re.findall(r"[a-z_]+", named) if a not in ("optionally", "and")}
        assert "search_id" in arguments and "scores" in arguments
        assert arguments <= schemas["score_documents"], (arguments, hint)
        assert all(len(doc["excerpt"]) <= 300 for doc in found["to_score"])
        scores = [{"document_id": d["id"], "predicted_score": 1.5, "why": "plausible"} for d in found["to_score"]]
        done = await call(client, "score_documents", {"search_id": found["search_id"], "scores": scores,
                                                      "open_questions": ["which reduction order"]})
        assert done["status"] == "done"
        # Credit goes through bench evaluate's documents_used; the text does not ask for it twice.
        assert "documents_used" in done["next_step"] and "no record_outcome needed" in done["next_step"]
        assert "documents_used" in gate["next_step"] and "no record_outcome needed" in gate["next_step"]


async def test_the_tasks_own_words_do_not_make_a_note_an_answer(store, corpus_dir):
    """Every note of a task speaks its vocabulary: a question about a method no one had tried was
    "answered" by three of the run's own notes that shared only the goal's words ("step",
    "overlap"), and the gate sent the model to them (model-play mp32, 2026-12-04)."""
    run = await store.start_run(RunCreate(goal="Erdos minimum overlap: find a step function h on [0, 2] with integral "
                                               "1 that makes the largest overlap as small as possible.",
                                          direction="minimize"))
    note = await store.add_learning(LearningCreate(
        run_id=run.id, kind="observation",
        text="A random local search on the step heights from the cosine shape lowers the overlap to 0.3840."))
    async with Client(local_corpus_server(store, corpus_dir)) as client:
        untried = await call(client, "gate", {"run_id": run.id, "open_questions": [
            "which optimisation method (subgradient, linear programming) reaches a smaller overlap for the step "
            "function?"]})
        assert untried["decision"] == "retrieve" and not untried.get("knowledge"), untried
        # A question the note does answer, in words beyond the goal's, still finds it.
        tried = await call(client, "gate", {"run_id": run.id, "open_questions": [
            "does a random local search on the heights from the cosine shape help?"]})
        assert tried["decision"] == "look-up" and [h["id"] for h in tried["knowledge"]] == [note.id], tried


def test_a_goal_that_names_the_method_still_finds_its_note():
    """Where the goal itself names the method a question asks about, one other shared word beside
    three of the goal's is enough (a review's case on the GDN kit); the goal's words alone are not."""
    from evoteam.servers.knowledge.models import SearchHit
    from evoteam.servers.retrieval.known import answers, content_words

    goal = frozenset(content_words("Gated delta net prefill: a chunked WY transform replaces the token-by-token "
                                   "recurrence; tune it"))
    question = "does the chunked WY transform beat the token-by-token recurrence, and at which chunk size?"

    def hit(text: str) -> SearchHit:
        return SearchHit(kind="learning", id="lrn_1", run_id="run_1", title="technique", snippet=text, rank=-1.0)

    assert answers(question, hit("Chunked WY transform, chunk 64: 2.3x over the token recurrence"), goal)
    assert not answers(question, hit("the token recurrence with a chunked transform is slow"), goal)
