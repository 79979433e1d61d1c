"""The retrieval store's records of decisions: gates, searches, frozen forecasts, outcomes, and
the series and statistics read from them. `RetrievalStore` (store.py) adds documents and
queries on top; both are one store service ("retrieval").
"""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime
from typing import Any

import aiosqlite

from evoteam.errors import DomainError
from evoteam.servers.knowledge.errors import Invalid, NotFound
from evoteam.servers.knowledge.rows import insert_row, new_id, now
from evoteam.servers.knowledge.scope import Ref, scoped
from evoteam.servers.knowledge.store import KnowledgeStore
from evoteam.servers.retrieval.models import (
    DecisionStats,
    ForecastPair,
    GateCreate,
    GateMark,
    GateRecord,
    KnowledgeState,
    OutcomeCreate,
    OutcomeReply,
    OutcomeRow,
    Prediction,
    PredictionCreate,
    RetrievalSeries,
    RetrievalStats,
    SearchState,
)
from evoteam.servers.retrieval.storemodels import IdList

# The rows a search's stored state names: its run, its gate and the documents it has seen.
STATE_REFS = (Ref("state.run_id", "runs"), Ref("state.gate_id", "retrieval_gates"),
              Ref("state.pool[]", "retrieval_documents"), Ref("state.pending[]", "retrieval_documents"),
              Ref("state.kept[]", "retrieval_documents"))


class RetrievalRecords:
    """Gate decisions, searches, frozen forecasts and outcomes (and the shared plumbing)."""


    def __init__(self, store: KnowledgeStore):
        db = getattr(store, "db", None)
        if db is None:
            raise DomainError(
                "the retrieval server needs the embedded knowledge store for now; unset "
                "EVOTEAM_KNOWLEDGE_URL / --knowledge-url for this server")
        self.store = store
        self.db = db

    @property
    def actor(self):
        return self.store.actor

    # ------------------------------------------------------------ helpers

    def _prov(self, project: str) -> dict[str, Any]:
        return self.store.provenance_values(project)

    def _project(self) -> str | None:
        return self.actor.project

    async def _run_row(self, conn: aiosqlite.Connection, run_id: str) -> sqlite3.Row:
        return await self.store.visible_run_row(conn, run_id)

    _insert = staticmethod(insert_row)

    # ------------------------------------------------------------ gates and searches

    @scoped(Ref("spec.run_id", "runs"), Ref("spec.parent_candidate_id", "candidates"))
    async def create_gate(self, spec: GateCreate) -> GateRecord:
        async with self.db.write() as conn:
            run = await self._run_row(conn, spec.run_id)
            gate_id = new_id("gate")
            prov = self._prov(run["project"])
            await self._insert(conn, "retrieval_gates", {
                "id": gate_id, "run_id": spec.run_id, "parent_candidate_id": spec.parent_candidate_id,
                "parent_score": spec.parent_score, "requested": spec.requested, "decision": spec.decision,
                "reason": spec.reason, "knowledge_state": spec.knowledge_state.model_dump_json(),
                "n_candidates": spec.n_candidates, **prov})
        return GateRecord(id=gate_id, created_at=datetime.fromisoformat(prov["created_at"]), **spec.model_dump())

    @scoped(Ref("gate_id", "retrieval_gates"))
    async def get_gate(self, gate_id: str) -> GateRecord:
        async with self.db.read() as conn:
            async with conn.execute("SELECT * FROM retrieval_gates WHERE id = ?", (gate_id,)) as cur:
                row = await cur.fetchone()
            if row is None:
                raise NotFound(f"no gate {gate_id!r}; call gate first and pass the gate_id it returns")
            await self._run_row(conn, row["run_id"])
        return self._gate(row)

    @staticmethod
    def _gate(row: sqlite3.Row) -> GateRecord:
        return GateRecord(
            id=row["id"], run_id=row["run_id"], parent_candidate_id=row["parent_candidate_id"],
            parent_score=row["parent_score"], requested=row["requested"], decision=row["decision"],
            reason=row["reason"], knowledge_state=KnowledgeState.model_validate_json(row["knowledge_state"]),
            n_candidates=row["n_candidates"], created_at=datetime.fromisoformat(row["created_at"]))

    @scoped(Ref("gate_id", "retrieval_gates"), Ref("ids.ids[]", "retrieval_documents"))
    async def link_gate_documents(self, gate_id: str, ids: IdList) -> None:
        async with self.db.write() as conn:
            async with conn.execute("SELECT 1 FROM retrieval_gates WHERE id = ?", (gate_id,)) as cur:
                if await cur.fetchone() is None:
                    raise NotFound(f"no gate {gate_id!r}; call gate first and pass the gate_id it returns")
            if ids.ids:
                marks = ", ".join("?" for _ in ids.ids)
                async with conn.execute(f"SELECT id FROM retrieval_documents WHERE id IN ({marks})", ids.ids) as cur:
                    missing = set(ids.ids) - {row["id"] for row in await cur.fetchall()}
                if missing:
                    raise NotFound(f"no document {sorted(missing)[0]!r}; ids look like doc_..., as search and "
                                   "lookup list them")
            for rank, doc_id in enumerate(ids.ids):
                await conn.execute("INSERT OR IGNORE INTO retrieval_gate_documents (gate_id, document_id, rank) "
                                   "VALUES (?, ?, ?)", (gate_id, doc_id, rank))

    @scoped(Ref("run_id", "runs"), Ref("ids.ids[]", "retrieval_documents"))
    async def latest_gate_for(self, run_id: str, ids: IdList) -> GateRecord | None:
        """The most recent gate of the run that handed out any of these documents."""
        if not ids.ids:
            return None
        marks = ", ".join("?" for _ in ids.ids)
        async with self.db.read() as conn:
            async with conn.execute(
                f"SELECT g.* FROM retrieval_gates g JOIN retrieval_gate_documents d ON d.gate_id = g.id "
                f"WHERE g.run_id = ? AND d.document_id IN ({marks}) ORDER BY g.created_at DESC LIMIT 1",
                [run_id, *ids.ids]) as cur:
                row = await cur.fetchone()
        return self._gate(row) if row else None

    @scoped(*STATE_REFS)
    async def create_search(self, state: SearchState) -> SearchState:
        """Store a new search under an id the store chooses; returns the state with that id."""
        state = state.model_copy(update={"id": new_id("srch")})
        async with self.db.write() as conn:
            run = await self._run_row(conn, state.run_id)
            prov = self._prov(run["project"])
            await self._insert(conn, "retrieval_searches", {
                "id": state.id, "run_id": state.run_id, "gate_id": state.gate_id, "status": state.status,
                "state": state.model_dump_json(), "updated_at": prov["created_at"], **prov})
        return state

    @scoped(Ref("state.id", "retrieval_searches"), *STATE_REFS)
    async def save_search(self, state: SearchState) -> SearchState:
        async with self.db.write() as conn:
            await conn.execute("UPDATE retrieval_searches SET status = ?, state = ?, updated_at = ? WHERE id = ?",
                               (state.status, state.model_dump_json(), now(), state.id))
        return state

    @scoped(Ref("search_id", "retrieval_searches"))
    async def get_search(self, search_id: str) -> SearchState:
        async with self.db.read() as conn:
            async with conn.execute("SELECT run_id, state FROM retrieval_searches WHERE id = ?", (search_id,)) as cur:
                row = await cur.fetchone()
            if row is None:
                raise NotFound(f"no search {search_id!r}; pass the search_id that search returned")
            await self._run_row(conn, row["run_id"])
        return SearchState.model_validate_json(row["state"])

    # ------------------------------------------------------------ forecasts

    @staticmethod
    def _prediction(row: sqlite3.Row) -> Prediction:
        return Prediction(
            id=row["id"], run_id=row["run_id"], search_id=row["search_id"], document_id=row["document_id"],
            round=row["round"], parent_score=row["parent_score"], predicted_score=row["predicted_score"],
            promising=None if row["promising"] is None else bool(row["promising"]), why=row["why"],
            predictor=row["predictor"], created_at=datetime.fromisoformat(row["created_at"]))

    @scoped(Ref("specs[].run_id", "runs"), Ref("specs[].search_id", "retrieval_searches"), Ref("specs[].document_id", "retrieval_documents"))
    async def freeze_predictions(self, specs: list[PredictionCreate]) -> list[Prediction]:
        """Store forecasts. A document already forecast in the same search keeps its first
        forecast (frozen); the returned list holds the forecasts in force."""
        if not specs:
            return []
        async with self.db.write() as conn:
            run = await self._run_row(conn, specs[0].run_id)
            for spec in specs:
                await conn.execute(
                    "INSERT OR IGNORE INTO retrieval_predictions (id, run_id, search_id, document_id, round, "
                    "parent_score, predicted_score, promising, why, predictor, project, user, client, role, "
                    "team_version, created_at) VALUES (:id, :run_id, :search_id, :document_id, :round, "
                    ":parent_score, :predicted_score, :promising, :why, :predictor, :project, :user, :client, "
                    ":role, :team_version, :created_at)",
                    {"id": new_id("pred"), **spec.model_dump(),
                     "promising": None if spec.promising is None else int(spec.promising),
                     **self._prov(run["project"])})
            marks = ", ".join("?" for _ in specs)
            async with conn.execute(
                f"SELECT * FROM retrieval_predictions WHERE search_id = ? AND document_id IN ({marks})",
                [specs[0].search_id, *[s.document_id for s in specs]]) as cur:
                return [self._prediction(r) for r in await cur.fetchall()]

    @scoped(Ref("search_id", "retrieval_searches"))
    async def search_predictions(self, search_id: str) -> list[Prediction]:
        async with self.db.read() as conn:
            async with conn.execute("SELECT * FROM retrieval_predictions WHERE search_id = ? ORDER BY created_at",
                                    (search_id,)) as cur:
                return [self._prediction(r) for r in await cur.fetchall()]

    # ------------------------------------------------------------ outcomes

    @staticmethod
    def _outcome(row: sqlite3.Row) -> OutcomeRow:
        return OutcomeRow(
            id=row["id"], run_id=row["run_id"], gate_id=row["gate_id"], candidate_id=row["candidate_id"],
            realised_score=row["realised_score"], parent_score=row["parent_score"],
            improved=None if row["improved"] is None else bool(row["improved"]),
            created_at=datetime.fromisoformat(row["created_at"]))

    @scoped(Ref("spec.run_id", "runs"), Ref("spec.gate_id", "retrieval_gates"), Ref("spec.candidate_id", "candidates"))
    async def record_outcome(self, spec: OutcomeCreate) -> OutcomeReply:
        """Credit the documents with a realised score (idempotent per candidate id)."""
        async with self.db.write() as conn:
            run = await self._run_row(conn, spec.run_id)
            direction = spec.direction or run["direction"]
            if spec.candidate_id:
                async with conn.execute("SELECT * FROM retrieval_outcomes WHERE candidate_id = ?",
                                        (spec.candidate_id,)) as cur:
                    done = await cur.fetchone()
                if done is not None and done["run_id"] != spec.run_id:
                    # The key is unique across the store: answering with that outcome would hand
                    # one run (another project's, perhaps) another run's scores and documents, and
                    # drop this run's credit without a word.
                    raise Invalid(f"candidate_id {spec.candidate_id!r} already has an outcome in another run: "
                                  f"pass this run's own candidate id, or leave candidate_id out")
                if done is not None:
                    return await self._outcome_reply(conn, done)
            decision = None
            if spec.gate_id:
                async with conn.execute("SELECT run_id, decision FROM retrieval_gates WHERE id = ?",
                                        (spec.gate_id,)) as cur:
                    g = await cur.fetchone()
                if g is None or g["run_id"] != spec.run_id:
                    raise Invalid(f"gate {spec.gate_id!r} is not a gate of run {spec.run_id!r}")
                decision = g["decision"]
            known, unknown = [], []
            for doc_id in dict.fromkeys(spec.document_ids):
                async with conn.execute("SELECT project FROM retrieval_documents WHERE id = ?", (doc_id,)) as cur:
                    row = await cur.fetchone()
                (known if row is not None and row["project"] == run["project"] else unknown).append(doc_id)
            improved = spec.improved
            if improved is None and spec.parent_score is not None:
                improved = (spec.realised_score > spec.parent_score if direction == "maximize"
                            else spec.realised_score < spec.parent_score)
            outcome_id = new_id("out")
            await self._insert(conn, "retrieval_outcomes", {
                "id": outcome_id, "run_id": spec.run_id, "gate_id": spec.gate_id, "candidate_id": spec.candidate_id,
                "realised_score": spec.realised_score, "parent_score": spec.parent_score,
                "improved": None if improved is None else int(improved), **self._prov(run["project"])})
            for doc_id in known:
                await conn.execute("INSERT INTO retrieval_outcome_documents (outcome_id, document_id) VALUES (?, ?)",
                                   (outcome_id, doc_id))
        return OutcomeReply(outcome_id=outcome_id, run_id=spec.run_id, gate_id=spec.gate_id, decision=decision,
                            documents=known, unknown_documents=unknown, improved=improved,
                            realised_score=spec.realised_score)

    async def _outcome_reply(self, conn: aiosqlite.Connection, row: sqlite3.Row) -> OutcomeReply:
        async with conn.execute("SELECT document_id FROM retrieval_outcome_documents WHERE outcome_id = ?",
                                (row["id"],)) as cur:
            docs = [r[0] for r in await cur.fetchall()]
        decision = None
        if row["gate_id"]:
            async with conn.execute("SELECT decision FROM retrieval_gates WHERE id = ?", (row["gate_id"],)) as cur:
                g = await cur.fetchone()
            decision = g["decision"] if g else None
        return OutcomeReply(outcome_id=row["id"], run_id=row["run_id"], gate_id=row["gate_id"], decision=decision,
                            documents=docs, improved=None if row["improved"] is None else bool(row["improved"]),
                            realised_score=row["realised_score"])

    # ------------------------------------------------------------ stats

    @staticmethod
    async def _forecast_pairs(conn: aiosqlite.Connection, where: str, params: list) -> list[tuple[float, float]]:
        """(predicted, realised) for each (outcome, document) pair, against the forecast made for
        that document in the same run most recently before the outcome."""
        async with conn.execute(
            f"SELECT o.realised_score AS realised, (SELECT p.predicted_score FROM retrieval_predictions p "
            f"WHERE p.document_id = d.document_id AND p.run_id = o.run_id AND p.created_at <= o.created_at "
            f"ORDER BY p.created_at DESC LIMIT 1) AS predicted FROM retrieval_outcomes o "
            f"JOIN retrieval_outcome_documents d ON d.outcome_id = o.id WHERE {where}", params) as cur:
            return [(r["predicted"], r["realised"]) for r in await cur.fetchall() if r["predicted"] is not None]

    @scoped(Ref("run_id", "runs"))
    async def report_series(self, run_id: str) -> RetrievalSeries:
        """What a run report draws of retrieval: every gate decision in time order, each
        predicted-vs-realised pair, and the URL counts of `stats`."""
        stats = await self.stats(run_id)
        async with self.db.read() as conn:
            async with conn.execute("SELECT created_at, decision FROM retrieval_gates WHERE run_id = ? "
                                    "ORDER BY created_at, id", (run_id,)) as cur:
                gates = [GateMark(at=datetime.fromisoformat(r["created_at"]), decision=r["decision"])
                         for r in await cur.fetchall()]
            pairs = await self._forecast_pairs(conn, "o.run_id = ?", [run_id])
        return RetrievalSeries(gates=gates, pairs=[ForecastPair(predicted=p, realised=r) for p, r in pairs],
                               distinct_urls=stats.distinct_urls, results_returned=stats.results_returned,
                               repeated_url_rate=stats.repeated_url_rate,
                               spearman=stats.spearman_predicted_vs_realised)

    @scoped(Ref("run_id", "runs"))
    async def stats(self, run_id: str | None) -> RetrievalStats:
        """Counts for one run, or for every run visible to the caller."""
        from evoteam.servers.retrieval.rank import spearman

        async with self.db.read() as conn:
            if run_id:
                await self._run_row(conn, run_id)
                where, params = "{a}run_id = ?", [run_id]
            elif self._project() is not None:
                where, params = "{a}run_id IN (SELECT id FROM runs WHERE project = ?)", [self._project()]
            else:
                where, params = "1 = 1", []
            scope = where.format(a="")

            def sc(alias: str) -> str:
                return where.format(a=alias + ".")

            async def one(sql: str, extra: list | None = None) -> Any:
                async with conn.execute(sql, [*params, *(extra or [])]) as cur:
                    return (await cur.fetchone())[0]

            searches = await one(f"SELECT count(*) FROM retrieval_searches WHERE {scope}")
            queries = await one(f"SELECT count(*) FROM retrieval_queries WHERE {scope}")
            results = await one(f"SELECT count(*) FROM retrieval_hits WHERE {scope}")
            repeated = await one(f"SELECT coalesce(sum(repeated), 0) FROM retrieval_hits WHERE {scope}")
            distinct = await one(
                f"SELECT count(DISTINCT d.url_key) FROM retrieval_hits h JOIN retrieval_documents d "
                f"ON d.id = h.document_id WHERE {sc('h')}")
            predictions = await one(f"SELECT count(*) FROM retrieval_predictions WHERE {scope}")
            outcomes = await one(f"SELECT count(*) FROM retrieval_outcomes WHERE {scope}")
            pairs = await self._forecast_pairs(conn, sc("o"), params)
            by_decision = []
            async with conn.execute(
                f"SELECT g.decision AS decision, count(DISTINCT g.id) AS gates, count(o.id) AS outcomes, "
                f"coalesce(sum(o.improved), 0) AS improved, count(o.improved) AS judged "
                f"FROM retrieval_gates g LEFT JOIN retrieval_outcomes o ON o.gate_id = g.id "
                f"WHERE {sc('g')} GROUP BY g.decision ORDER BY g.decision", params) as cur:
                for r in await cur.fetchall():
                    by_decision.append(DecisionStats(
                        decision=r["decision"], gates=r["gates"], outcomes=r["outcomes"], improved=r["improved"],
                        improvement_rate=r["improved"] / r["judged"] if r["judged"] else None))
            async with conn.execute(f"SELECT state FROM retrieval_searches WHERE {scope} AND status = 'done'",
                                    params) as cur:
                finished = [json.loads(r["state"]) for r in await cur.fetchall()]
            with_promising = 0
            for state in finished:
                if state.get("kept"):
                    marks = ", ".join("?" for _ in state["kept"])
                    async with conn.execute(
                        f"SELECT count(*) FROM retrieval_predictions WHERE search_id = ? AND promising = 1 "
                        f"AND document_id IN ({marks})", [state["id"], *state["kept"]]) as cur:
                        if (await cur.fetchone())[0]:
                            with_promising += 1
        rho = spearman([p for p, _ in pairs], [r for _, r in pairs]) if len(pairs) >= 3 else None
        return RetrievalStats(
            run_id=run_id, searches=searches, queries=queries, results_returned=results, distinct_urls=distinct,
            repeated_url_rate=repeated / results if results else None, predictions=predictions, outcomes=outcomes,
            spearman_predicted_vs_realised=rho, spearman_pairs=len(pairs), by_decision=by_decision,
            retrievals_with_promising=with_promising / len(finished) if finished else None)
