"""Two projects on one shared knowledge server: alice's (seeded with one row of every kind,
each carrying a secret word) and bob's (the same kinds, his own). The isolation tests call
everything as bob, with alice's ids, and compare with ids that exist nowhere."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import Any

from evoteam.servers.knowledge.connect import component_store
from evoteam.servers.knowledge.models import (
    ArtifactCreate,
    CandidateCreate,
    CostCreate,
    HistoryEntryCreate,
    LearningCreate,
    RunCreate,
)
from evoteam.servers.knowledge.store import KnowledgeStore
from evoteam.servers.retrieval.models import (
    GateCreate,
    KnowledgeState,
    OutcomeCreate,
    PredictionCreate,
    QueryCreate,
    RawResult,
    SearchConfig,
    SearchState,
)
from evoteam.servers.retrieval.store import IdList, QueryResultsCreate
from evoteam.servers.team.models import SessionUpdate, TeamDesign

SECRET = "zebracorn"  # a word only alice's rows contain
SHARED_URL = "https://shared.example/page"  # a page both projects fetched

Ids = dict[str, str]  # table -> one id of that table


def design(run_id: str) -> dict:
    return {"run_id": run_id, "diagnosis": "start", "rationale": "one role",
            "roles": [{"name": "Solo", "mandate": "do the work", "isolation": "shared"}]}


def search_state(ids: Ids, search_id: str = "srch_new") -> SearchState:
    return SearchState(id=search_id, run_id=ids["runs"], gate_id=ids["retrieval_gates"], direction="maximize",
                       parent_score=1.0, config=SearchConfig(), knowledge_state=KnowledgeState(), predictor="test",
                       pool=[ids["retrieval_documents"]])


async def seed(store: KnowledgeStore, word: str) -> Ids:
    """One row of every kind in the caller's project; every text carries `word`."""
    retrieval, team = component_store("retrieval", store), component_store("team", store)
    run = await store.start_run(RunCreate(goal=f"goal {word}", kit="rmsnorm_cpu", budget_usd=5, x0=1.0, best_known=3.0))
    ids: Ids = {"runs": run.id}
    ids["artifacts"] = (await store.put_artifact(ArtifactCreate(run_id=run.id, name="a.txt", text=f"art {word}"))).id
    ids["candidates"] = (await store.record_candidate(CandidateCreate(
        run_id=run.id, code=f"code {word}", status="PASSED", score=2.0, notes=f"notes {word}"))).id
    ids["learnings"] = (await store.add_learning(LearningCreate(
        run_id=run.id, text=f"learning {word}", evidence=[ids["candidates"]], idempotency_key="shared-key"))).id
    ids["history"] = (await store.add_history(HistoryEntryCreate(run_id=run.id, outcome=f"history {word}"))).id
    ids["costs"] = (await store.record_cost(CostCreate(run_id=run.id, usd=0.5, source=f"src {word}"))).id
    gate = await retrieval.create_gate(GateCreate(
        run_id=run.id, parent_candidate_id=ids["candidates"], parent_score=2.0, requested="retrieve",
        decision="retrieve", reason=f"reason {word}", knowledge_state=KnowledgeState(), n_candidates=1))
    ids["retrieval_gates"] = gate.id
    state = await retrieval.create_search(SearchState(
        id="srch_x", run_id=run.id, gate_id=gate.id, direction="maximize", parent_score=2.0, config=SearchConfig(),
        knowledge_state=KnowledgeState(), predictor="test"))
    ids["retrieval_searches"] = state.id
    stored = await retrieval.record_query_results(QueryResultsCreate(
        query=QueryCreate(run_id=run.id, search_id=state.id, round=0, text=f"query {word}", backend="test",
                          results=0, new_documents=0),
        results=[RawResult(url=SHARED_URL, title=f"title {word}", content=f"page {word}",
                           backend="test")]))
    ids["retrieval_documents"] = stored.documents[0].id
    await retrieval.link_gate_documents(gate.id, IdList(ids=[ids["retrieval_documents"]]))
    await retrieval.freeze_predictions([PredictionCreate(
        run_id=run.id, search_id=state.id, document_id=ids["retrieval_documents"], round=0, parent_score=2.0,
        predicted_score=2.5, promising=True, why=f"why {word}", predictor="test")])
    await retrieval.record_outcome(OutcomeCreate(run_id=run.id, document_ids=[ids["retrieval_documents"]],
                                                 realised_score=2.2, parent_score=2.0, gate_id=gate.id,
                                                 candidate_id=ids["candidates"]))
    await team.create_version(TeamDesign(**design(run.id)))
    ids["role_sessions"] = (await team.create_session(run.id, 1, "Solo", "solo", "claude")).id
    ids["supervisor_wakes"] = (await team.start_wake(run.id, f"trigger {word}", None)).id
    return ids


def missing_like(ref_id: str) -> str:
    """An id of the same kind that exists nowhere."""
    prefix = ref_id.split("_", 1)[0]
    return f"{prefix}_0000000000000000"


def substitute(ids: Ids, table: str, value: str) -> Ids:
    return {**ids, table: value}


# ---------------------------------------------------------------- store methods, as bob

def store_calls(i: Ids) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Valid arguments for every store method (several calls where a method has a
    project-wide form); ids come from `i`."""
    R, A, C, D = i["runs"], i["artifacts"], i["candidates"], i["retrieval_documents"]
    G, S, L = i["retrieval_gates"], i["retrieval_searches"], i["learnings"]
    return {
        ("knowledge", "start_run"): [{"spec": RunCreate(goal="bob's other goal")},
                                     {"spec": RunCreate(goal="bob's seeded goal", seeded_from=R)}],
        ("knowledge", "get_run"): [{"run_id": R}],
        ("knowledge", "list_runs"): [{}],
        ("knowledge", "update_run"): [{"run_id": R, "status": "finished", "reason": "bob ends it"},
                                      {"run_id": R, "status": "active"}],
        ("knowledge", "add_learning"): [{"spec": LearningCreate(run_id=R, text="bob", evidence=[C, A],
                                                                supersedes=L)}],
        ("knowledge", "list_learnings"): [{"run_id": R, "include_superseded": True}],
        ("knowledge", "render_learnings"): [{"run_id": R}],
        ("knowledge", "add_history"): [{"spec": HistoryEntryCreate(run_id=R, outcome="bob")}],
        ("knowledge", "list_history"): [{"run_id": R}],
        ("knowledge", "render_history"): [{"run_id": R}],
        ("knowledge", "put_artifact"): [{"spec": ArtifactCreate(run_id=R, name="b.txt", text="bob")}],
        ("knowledge", "get_artifact"): [{"artifact_id": A}],
        ("knowledge", "list_artifacts"): [{"run_id": R}],
        ("knowledge", "record_candidate"): [{"spec": CandidateCreate(run_id=R, code="b", parent_id=C, artifact_id=A)}],
        ("knowledge", "get_candidate"): [{"candidate_id": C}],
        ("knowledge", "list_candidates"): [{"run_id": R}],
        ("knowledge", "best_candidates"): [{"run_id": R}],
        ("knowledge", "trajectory"): [{"run_id": R}],
        ("knowledge", "record_cost"): [{"spec": CostCreate(run_id=R, usd=0.1, source="bob")}],
        ("knowledge", "list_costs"): [{"run_id": R}],
        ("knowledge", "spend"): [{"run_id": R}],
        ("knowledge", "search"): [{"query": f"{SECRET} goal page code"}, {"query": f"{SECRET} goal", "run_id": R}],
        ("retrieval", "run_info"): [{"run_id": R}],
        ("retrieval", "candidate_score"): [{"candidate_id": C}],
        ("retrieval", "previous_queries"): [{"run_id": R}],
        ("retrieval", "record_query_results"): [{"spec": QueryResultsCreate(
            query=QueryCreate(run_id=R, search_id=S, round=1, text="bob q", backend="test", results=0,
                              new_documents=0),
            results=[RawResult(url=SHARED_URL, content="bob's copy", backend="test")])}],
        ("retrieval", "get_document"): [{"document_id": D}],
        ("retrieval", "existing_documents"): [{"ids": IdList(ids=[D])}],
        ("retrieval", "document_refs"): [{"ids": IdList(ids=[D]), "run_id": R, "search_id": S}],
        ("retrieval", "lookup_rows"): [{"run_id": R, "text": f"{SECRET} page"}],
        ("retrieval", "forecast_texts"): [{"run_id": R}],
        ("retrieval", "create_gate"): [{"spec": GateCreate(
            run_id=R, parent_candidate_id=C, parent_score=1.0, requested="no-op", decision="no-op", reason="",
            knowledge_state=KnowledgeState(), n_candidates=1)}],
        ("retrieval", "get_gate"): [{"gate_id": G}],
        ("retrieval", "link_gate_documents"): [{"gate_id": G, "ids": IdList(ids=[D])}],
        ("retrieval", "latest_gate_for"): [{"run_id": R, "ids": IdList(ids=[D])}],
        ("retrieval", "create_search"): [{"state": search_state(i)}],
        ("retrieval", "save_search"): [{"state": search_state(i, S)}],
        ("retrieval", "get_search"): [{"search_id": S}],
        ("retrieval", "freeze_predictions"): [{"specs": [PredictionCreate(
            run_id=R, search_id=S, document_id=D, round=1, parent_score=1.0, predicted_score=1.5, promising=True,
            predictor="test")]}],
        ("retrieval", "search_predictions"): [{"search_id": S}],
        ("retrieval", "record_outcome"): [{"spec": OutcomeCreate(run_id=R, document_ids=[D], realised_score=2.0,
                                                                 gate_id=G, candidate_id=C)}],
        ("retrieval", "stats"): [{"run_id": R}, {"run_id": None}],
        ("retrieval", "report_series"): [{"run_id": R}],
        ("team", "run"): [{"run_id": R}],
        ("team", "create_version"): [{"design": TeamDesign(**design(R))}],
        ("team", "get_version"): [{"run_id": R, "version": 1}],
        ("team", "latest_version_number"): [{"run_id": R}],
        ("team", "list_versions"): [{"run_id": R}],
        ("team", "create_session"): [{"run_id": R, "version": 1, "role": "Solo", "slug": "solo", "runner": "claude"}],
        ("team", "get_session"): [{"session_id": i["role_sessions"]}],
        ("team", "update_session"): [{"session_id": i["role_sessions"], "update": SessionUpdate(turns=3)}],
        ("team", "list_sessions"): [{"run_id": R}],
        ("team", "latest_sessions"): [{"run_id": R, "version": 1}],
        ("team", "roles_not_ended"): [{"run_id": R, "version": 1}],
        ("team", "start_wake"): [{"run_id": R, "trigger": "bob", "version_before": None}],
        ("team", "end_wake"): [{"wake_id": i["supervisor_wakes"], "status": "failed", "error": "ended by bob"}],
        ("team", "list_wakes"): [{"run_id": R}],
    }


# ---------------------------------------------------------------- what alice holds

# Browser sessions belong to a token (as tokens do), not to a project's rows.
GLOBAL_TABLES = {"blobs", "tokens", "schema_versions", "idempotency", "browser_sessions"}


def snapshot(db: Path, alice: Ids, project: str) -> dict[str, list]:
    """Every row that belongs to alice's project, table by table. A table that cannot be
    tied to a project (no project, run_id, gate_id or outcome_id column) fails the test:
    isolation must know where each new table's rows belong."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        out: dict[str, list] = {}
        for table in tables:
            if table in GLOBAL_TABLES or table.startswith("sqlite_") or re.search(r"_(data|idx|docsize|config|content)$",
                                                                                 table):
                continue
            cols = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
            if "project" in cols:
                where, args = "project = ?", [project]
            elif "run_id" in cols:
                where, args = "run_id IN (SELECT id FROM runs WHERE project = ?)", [project]
            elif "gate_id" in cols:
                where, args = "gate_id IN (SELECT id FROM retrieval_gates WHERE project = ?)", [project]
            elif "outcome_id" in cols:
                where, args = "outcome_id IN (SELECT id FROM retrieval_outcomes WHERE project = ?)", [project]
            else:
                raise AssertionError(f"table {table} has no column that ties its rows to a project")
            rows = conn.execute(f"SELECT * FROM {table} WHERE {where}", args).fetchall()
            out[table] = sorted(json.dumps(r, default=str) for r in rows)
        return out
    finally:
        conn.close()


def leaks(value: Any, alice: Ids, allowed: str | None = None) -> list[str]:
    """Alice's secret word or ids found in a result (other than `allowed`, the id the caller sent)."""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    found = [SECRET] if SECRET in text else []
    found += [v for v in alice.values() if v != allowed and v in text]
    return found
