"""RetrievalStore on a real SQLite file: deduplication, repeated URLs, frozen forecasts,
outcome credit for the bench, project scoping, and the pure ranking helpers."""

from __future__ import annotations

import math
import sqlite3

import pytest

from evoteam.servers.knowledge.errors import NotFound
from evoteam.servers.knowledge.models import RunCreate
from evoteam.servers.knowledge.store import Actor
from evoteam.servers.retrieval.core import credit_documents
from evoteam.servers.retrieval.models import PredictionCreate, QueryCreate, RawResult
from evoteam.servers.retrieval.rank import fallback_queries, novel_queries, spearman
from evoteam.servers.retrieval.models import KnowledgeState
from evoteam.servers.retrieval.store import QueryResultsCreate, RetrievalStore, url_key

# The store tests run on both backends (the `store` fixture in conftest takes the backend).
BACKENDS = pytest.mark.parametrize("store", ["sqlite", "postgres"], indirect=True)


def results(*pairs: tuple[str, str]) -> list[RawResult]:
    return [RawResult(url=u, title=u.rsplit("/", 1)[-1], content=c, backend="tavily") for u, c in pairs]


async def put(rs: RetrievalStore, run_id: str, text: str, res: list[RawResult], pool=()):
    return await rs.record_query_results(QueryResultsCreate(
        query=QueryCreate(run_id=run_id, search_id=None, round=1, text=text, backend="tavily", results=len(res),
                          new_documents=0), results=res, pool=list(pool)))


def test_url_key():
    assert url_key("HTTP://Example.org:80/a/?utm_source=x&b=2#frag") == "https://example.org/a?b=2"
    assert url_key("https://example.org/a") == url_key("https://example.org/a/")
    assert url_key("file:///c/x.md#part-2") != url_key("file:///c/x.md")


@BACKENDS
async def test_documents_are_deduplicated_and_repeats_counted(store, run):
    rs = RetrievalStore(store)
    first = await put(rs, run.id, "q1", results(("https://a.org/x", "alpha text"), ("https://b.org/y", "beta text"),
                                                ("https://a.org/x/?utm_source=feed", "alpha text again")))
    assert len(first.documents) == 2  # the tracking-parameter copy is the same page
    assert not any(d.repeated_in_run for d in first.documents)
    second = await put(rs, run.id, "q2", results(("https://mirror.org/z", "Alpha   TEXT"),
                                                 ("https://c.org/new", "gamma")), pool=[first.documents[0].id])
    mirror, new = second.documents
    assert mirror.id == first.documents[0].id  # same content, other URL
    assert mirror.repeated_in_run and not mirror.new_in_search
    assert not new.repeated_in_run and new.new_in_search
    stats = await rs.stats(run.id)
    assert stats.results_returned == 4 and stats.distinct_urls == 3
    assert stats.repeated_url_rate == pytest.approx(0.25)
    assert stats.queries == 2 and (await rs.previous_queries(run.id)).items == ["q1", "q2"]


@BACKENDS
async def test_forecasts_are_frozen(store, run):
    rs = RetrievalStore(store)
    stored = await put(rs, run.id, "q", results(("https://a.org/x", "alpha")))
    from evoteam.servers.retrieval.models import SearchConfig, SearchState

    search = await rs.create_search(SearchState(id="srch_t", run_id=run.id, gate_id=None, direction="maximize",
                                                parent_score=1.0, config=SearchConfig(), predictor="agent",
                                                knowledge_state=KnowledgeState()))
    doc = stored.documents[0].id
    spec = PredictionCreate(run_id=run.id, search_id=search.id, document_id=doc, round=1, parent_score=1.0,
                            predicted_score=2.0, promising=True, predictor="agent")
    first = await rs.freeze_predictions([spec])
    again = await rs.freeze_predictions([spec.model_copy(update={"predicted_score": 9.0})])
    assert first[0].predicted_score == again[0].predicted_score == 2.0
    # The database itself refuses, whoever writes to it.
    if store.db.dialect == "postgres":
        import psycopg

        for sql in ("UPDATE retrieval_predictions SET predicted_score = 5", "DELETE FROM retrieval_predictions"):
            with psycopg.connect(store.db.url) as conn, pytest.raises(psycopg.errors.RaiseException, match="frozen"):
                conn.execute(sql)
        return
    conn = sqlite3.connect(store.db.path)
    try:
        with pytest.raises(sqlite3.IntegrityError, match="frozen"):
            conn.execute("UPDATE retrieval_predictions SET predicted_score = 5")
        with pytest.raises(sqlite3.IntegrityError, match="frozen"):
            conn.execute("DELETE FROM retrieval_predictions")
    finally:
        conn.close()


@BACKENDS
async def test_credit_documents_for_the_bench(store, run):
    rs = RetrievalStore(store)
    stored = await put(rs, run.id, "q", results(("https://a.org/x", "alpha"), ("https://b.org/y", "beta")))
    ids = [d.id for d in stored.documents]
    out = await credit_documents(store, run.id, ids + ["art_not_a_document"], realised_score=0.8,
                                 parent_score=1.0, direction="minimize", candidate_id="cand_1")
    assert out.improved is True and out.documents == ids and out.unknown_documents == ["art_not_a_document"]
    again = await credit_documents(store, run.id, ids, realised_score=0.8, parent_score=1.0, candidate_id="cand_1")
    assert again.outcome_id == out.outcome_id
    worse = await credit_documents(store, run.id, ids[:1], realised_score=0.5, parent_score=1.0)
    assert worse.improved is False  # the run maximises
    doc = await rs.get_document(ids[0])
    assert [o.realised_score for o in doc.outcomes] == [0.8, 0.5]
    assert doc.content == "alpha"
    # The bench, which knows both intervals, says whether the gain is beyond noise: that decides.
    noise = await credit_documents(store, run.id, ids[:1], realised_score=1.2, parent_score=1.0, improved=False)
    assert noise.improved is False


@BACKENDS
async def test_other_projects_are_invisible(store, run):
    rs = RetrievalStore(store.with_actor(Actor(user="eve", project="other")))
    with pytest.raises(NotFound):
        await rs.run_info(run.id)
    mine = RetrievalStore(store)
    stored = await put(mine, run.id, "q", results(("https://a.org/x", "alpha")))
    with pytest.raises(NotFound):
        await rs.get_document(stored.documents[0].id)
    other_run = await store.with_actor(Actor(user="eve", project="other")).start_run(RunCreate(goal="g"))
    out = await credit_documents(store.with_actor(Actor(user="eve", project="other")), other_run.id,
                                 [stored.documents[0].id], realised_score=1.0, parent_score=0.0)
    assert out.documents == [] and out.unknown_documents == [stored.documents[0].id]


def test_rank_helpers():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 1, 1], [1, 2, 3]) is None
    assert math.isclose(spearman([1, 2, 2, 3], [1, 3, 2, 4]), 0.9486832980505138)
    kept, rejected = novel_queries(["online softmax kernel", "Online   softmax kernel!", "warp shuffle"],
                                   ["kernel online softmax"], 5)
    assert kept == ["warp shuffle"] and len(rejected) == 2
    state = KnowledgeState(open_questions=["how to avoid three passes in softmax"])
    first = fallback_queries(state, [], [], 3)
    second = fallback_queries(state, first, ["online softmax running maximum rescaling"], 3)
    assert len(first) == 3 and len(second) == 3
    assert not set(first) & set(second)
    assert novel_queries(second, first, 3)[0] == second


@BACKENDS
async def test_linking_documents_to_a_gate_names_what_is_missing(store, run):
    from evoteam.servers.retrieval.models import GateCreate
    from evoteam.servers.retrieval.store import IdList

    rs = RetrievalStore(store)
    doc = (await put(rs, run.id, "q", results(("https://a.org/x", "alpha")))).documents[0]
    gate = await rs.create_gate(GateCreate(run_id=run.id, parent_candidate_id=None, parent_score=None,
                                           requested="retrieve", decision="retrieve", reason="r",
                                           knowledge_state=KnowledgeState(), n_candidates=1))
    with pytest.raises(NotFound, match="no gate 'gate_missing'"):
        await rs.link_gate_documents("gate_missing", IdList(ids=[doc.id]))
    with pytest.raises(NotFound, match="no document 'doc_missing'"):
        await rs.link_gate_documents(gate.id, IdList(ids=[doc.id, "doc_missing"]))
    await rs.link_gate_documents(gate.id, IdList(ids=[doc.id]))
    assert (await rs.latest_gate_for(run.id, IdList(ids=[doc.id]))).id == gate.id
