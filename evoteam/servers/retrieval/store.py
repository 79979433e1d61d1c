"""All database access of the retrieval server, in one class.

`RetrievalStore` wraps the knowledge store's SQLite file (`LocalKnowledgeStore.db`). Every
public method is async and takes and returns pydantic models, so the class can later be
proxied to a shared knowledge server without touching the core.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from datetime import datetime
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import aiosqlite
from pydantic import BaseModel, Field

from evoteam.errors import DomainError
from evoteam.servers.knowledge.errors import Invalid, NotFound
from evoteam.servers.knowledge.local import insert_row, new_id, now
from evoteam.servers.knowledge.scope import Ref, scoped
from evoteam.servers.knowledge.store import KnowledgeStore
from evoteam.servers.knowledge.measurements import rank_order
from evoteam.servers.knowledge.verified import RANKED
from evoteam.servers.retrieval.docsearch import matching_documents
from evoteam.servers.retrieval.models import (
    EXCERPT_CHARS,
    DecisionStats,
    Direction,
    Document,
    DocumentRef,
    ForecastPair,
    GateMark,
    GateCreate,
    GateRecord,
    KnowledgeState,
    OutcomeCreate,
    OutcomeReply,
    OutcomeRow,
    Prediction,
    PredictionCreate,
    QueryCreate,
    QueryRecord,
    RawResult,
    RetrievalSeries,
    RetrievalStats,
    SearchState,
    StoredDocument,
)

MAX_CONTENT_CHARS = 60_000
_TRACKING = re.compile(r"^(utm_|fbclid$|gclid$|ref$|ref_src$)")
_SPACE = re.compile(r"\s+")


def url_key(url: str) -> str:
    """The deduplication key of a URL: scheme and host lower-cased, default ports, tracking
    parameters and (for web pages) the fragment and trailing slash removed."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return url.strip()
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if parts.port and not ((scheme == "http" and parts.port == 80) or (scheme == "https" and parts.port == 443)):
        host = f"{host}:{parts.port}"
    query = urlencode(sorted((k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)
                             if not _TRACKING.match(k)))
    path = parts.path
    fragment = parts.fragment
    if scheme in ("http", "https"):
        path = path.rstrip("/") or "/"
        fragment = ""
        scheme = "https"  # http and https copies of a page are one document
    return urlunsplit((scheme, host, path, query, fragment))


def content_hash(text: str) -> str:
    return hashlib.sha256(_SPACE.sub(" ", text).strip().lower().encode("utf-8")).hexdigest()


def excerpt(text: str, chars: int = EXCERPT_CHARS) -> str:
    flat = _SPACE.sub(" ", text).strip()
    return flat if len(flat) <= chars else flat[: chars - 1].rstrip() + "…"


class RunInfo(BaseModel):
    id: str
    project: str
    goal: str = ""
    direction: Direction
    x0: float | None
    best_known: float | None
    best_score: float | None = None


class QueryResultsCreate(BaseModel):
    query: QueryCreate
    results: list[RawResult]
    pool: list[str] = Field(default_factory=list, description="document ids the search has already seen")


class QueryResults(BaseModel):
    query: QueryRecord
    documents: list[StoredDocument]


class LookupRow(BaseModel):
    """A stored document with what look-up ranks by."""

    ref: DocumentRef
    relevance: float = 0.0  # 0..1, from full-text rank against the open questions
    realised: list[OutcomeRow] = Field(default_factory=list)  # this run's outcomes
    best_prediction: float | None = None


class LookupRows(BaseModel):
    rows: list[LookupRow]


class LookupTexts(BaseModel):
    best: list[str] = Field(default_factory=list)
    worst: list[str] = Field(default_factory=list)


class StringList(BaseModel):
    items: list[str]


class IdList(BaseModel):
    ids: list[str]


# The rows a search's stored state names: its run, its gate and the documents it has seen.
STATE_REFS = (Ref("state.run_id", "runs"), Ref("state.gate_id", "retrieval_gates"),
              Ref("state.pool[]", "retrieval_documents"), Ref("state.pending[]", "retrieval_documents"),
              Ref("state.kept[]", "retrieval_documents"))


class RetrievalStore:
    """Documents, queries, gate decisions, frozen forecasts and outcomes."""

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

    @scoped(Ref("run_id", "runs"))
    async def run_info(self, run_id: str) -> RunInfo:
        async with self.db.read() as conn:
            row = await self._run_row(conn, run_id)
            async with conn.execute(
                f"SELECT score FROM candidates WHERE run_id = ? AND {RANKED} "
                f"AND split != 'heldout' ORDER BY {rank_order(row['direction'])} LIMIT 1", (run_id,)) as cur:
                best = await cur.fetchone()
        return RunInfo(id=row["id"], project=row["project"], goal=row["goal"], direction=row["direction"], x0=row["x0"],
                       best_known=row["best_known"], best_score=best["score"] if best else None)

    @scoped(Ref("candidate_id", "candidates"))
    async def candidate_score(self, candidate_id: str) -> float | None:
        async with self.db.read() as conn:
            async with conn.execute("SELECT run_id, score FROM candidates WHERE id = ?", (candidate_id,)) as cur:
                row = await cur.fetchone()
            if row is None:
                raise NotFound(f"no candidate {candidate_id!r}; pass parent_score instead, or a cand_ id "
                               f"the knowledge store lists")
            await self._run_row(conn, row["run_id"])
        return row["score"]

    # ------------------------------------------------------------ documents and queries

    @scoped(Ref("run_id", "runs"))
    async def previous_queries(self, run_id: str) -> StringList:
        async with self.db.read() as conn:
            await self._run_row(conn, run_id)
            async with conn.execute("SELECT text FROM retrieval_queries WHERE run_id = ? "
                                    "GROUP BY text ORDER BY min(created_at)", (run_id,)) as cur:
                return StringList(items=[r["text"] for r in await cur.fetchall()])

    @scoped(Ref("spec.query.run_id", "runs"), Ref("spec.query.search_id", "retrieval_searches"))
    async def record_query_results(self, spec: QueryResultsCreate) -> QueryResults:
        """Store a query, its results as documents (deduplicated by URL and content hash
        within the project), and one hit per result."""
        q = spec.query
        pool = set(spec.pool)
        async with self.db.write() as conn:
            run = await self._run_row(conn, q.run_id)
            project = run["project"]
            query_id = new_id("rq")
            prov = self._prov(project)
            stored: list[StoredDocument] = []
            hits: list[tuple[str, int, bool]] = []
            seen_here: set[str] = set()
            for rank, res in enumerate(spec.results):
                content = res.content[:MAX_CONTENT_CHARS]
                key, digest = url_key(res.url), content_hash(content or res.url)
                async with conn.execute(
                    "SELECT id, url, title, content FROM retrieval_documents WHERE project = ? AND url_key = ?",
                    (project, key)) as cur:
                    row = await cur.fetchone()
                if row is None and content.strip():
                    async with conn.execute(
                        "SELECT id, url, title, content FROM retrieval_documents WHERE project = ? "
                        "AND content_sha256 = ? LIMIT 1", (project, digest)) as cur:
                        row = await cur.fetchone()
                if row is None:
                    doc_id = new_id("doc")
                    title = (res.title or res.url)[:300]
                    await self._insert(conn, "retrieval_documents", {
                        "id": doc_id, "url": res.url, "url_key": key, "content_sha256": digest, "title": title,
                        "content": content, "backend": res.backend, **prov})
                    await conn.execute(
                        "INSERT INTO retrieval_documents_fts (title, body, doc_id, project) VALUES (?, ?, ?, ?)",
                        (title, content, doc_id, project))
                    doc = (doc_id, res.url, title, content)
                else:
                    doc = (row["id"], row["url"], row["title"], row["content"])
                if doc[0] in seen_here:
                    continue  # the same page twice in one result list
                seen_here.add(doc[0])
                async with conn.execute("SELECT 1 FROM retrieval_hits WHERE run_id = ? AND document_id = ? LIMIT 1",
                                        (q.run_id, doc[0])) as cur:
                    repeated = await cur.fetchone() is not None
                hits.append((doc[0], rank, repeated))
                stored.append(StoredDocument(id=doc[0], url=doc[1], title=doc[2], content=doc[3],
                                             new_in_search=doc[0] not in pool, repeated_in_run=repeated))
            new_docs = sum(1 for d in stored if d.new_in_search)
            await self._insert(conn, "retrieval_queries", {
                "id": query_id, "run_id": q.run_id, "search_id": q.search_id, "round": q.round, "text": q.text,
                "backend": q.backend, "results": len(stored), "new_documents": new_docs, **prov})
            for doc_id, rank, repeated in hits:
                await conn.execute(
                    "INSERT INTO retrieval_hits (run_id, query_id, document_id, rank, repeated) VALUES (?, ?, ?, ?, ?)",
                    (q.run_id, query_id, doc_id, rank, int(repeated)))
        record = QueryRecord(id=query_id, created_at=datetime.fromisoformat(prov["created_at"]),
                             **q.model_dump(exclude={"results", "new_documents"}), results=len(stored),
                             new_documents=new_docs)
        return QueryResults(query=record, documents=stored)

    @scoped(Ref("document_id", "retrieval_documents"))
    async def get_document(self, document_id: str) -> Document:
        async with self.db.read() as conn:
            async with conn.execute("SELECT * FROM retrieval_documents WHERE id = ?", (document_id,)) as cur:
                row = await cur.fetchone()
            if row is None or (self._project() is not None and row["project"] != self._project()):
                raise NotFound(f"no document {document_id!r}; ids look like doc_..., as search and lookup list them")
            async with conn.execute("SELECT * FROM retrieval_predictions WHERE document_id = ? "
                                    "ORDER BY created_at", (document_id,)) as cur:
                preds = [self._prediction(r) for r in await cur.fetchall()]
            async with conn.execute(
                "SELECT o.* FROM retrieval_outcomes o JOIN retrieval_outcome_documents d ON d.outcome_id = o.id "
                "WHERE d.document_id = ? ORDER BY o.created_at", (document_id,)) as cur:
                outs = [self._outcome(r) for r in await cur.fetchall()]
        return Document(id=row["id"], url=row["url"], title=row["title"], content=row["content"],
                        content_sha256=row["content_sha256"], backend=row["backend"],
                        first_seen_at=datetime.fromisoformat(row["created_at"]), predictions=preds, outcomes=outs)

    @scoped()
    async def existing_documents(self, ids: IdList) -> IdList:
        """The subset of `ids` that are stored documents visible to the caller."""
        if not ids.ids:
            return IdList(ids=[])
        marks = ", ".join("?" for _ in ids.ids)
        where, params = f"id IN ({marks})", list(ids.ids)
        if self._project() is not None:
            where += " AND project = ?"
            params.append(self._project())
        async with self.db.read() as conn:
            async with conn.execute(f"SELECT id FROM retrieval_documents WHERE {where}", params) as cur:
                found = {r["id"] for r in await cur.fetchall()}
        return IdList(ids=[i for i in ids.ids if i in found])

    @scoped(Ref("ids.ids[]", "retrieval_documents"), Ref("run_id", "runs"), Ref("search_id", "retrieval_searches"))
    async def document_refs(self, ids: IdList, run_id: str | None = None, search_id: str | None = None,
                            excerpt_chars: int = EXCERPT_CHARS) -> list[DocumentRef]:
        """Compact views of documents, in the order given, with the forecast made in
        `search_id` (else the latest in the run) and this run's outcomes."""
        refs = []
        async with self.db.read() as conn:
            for doc_id in ids.ids:
                async with conn.execute("SELECT id, url, title, content FROM retrieval_documents WHERE id = ?",
                                        (doc_id,)) as cur:
                    row = await cur.fetchone()
                if row is None:
                    continue
                refs.append(await self._ref(conn, row, run_id, search_id, excerpt_chars))
        return refs

    async def _ref(self, conn: aiosqlite.Connection, row: sqlite3.Row, run_id: str | None,
                   search_id: str | None, excerpt_chars: int = EXCERPT_CHARS) -> DocumentRef:
        pred = None
        if search_id:
            async with conn.execute("SELECT * FROM retrieval_predictions WHERE search_id = ? AND document_id = ?",
                                    (search_id, row["id"])) as cur:
                pred = await cur.fetchone()
        if pred is None and run_id:
            async with conn.execute("SELECT * FROM retrieval_predictions WHERE run_id = ? AND document_id = ? "
                                    "ORDER BY created_at DESC LIMIT 1", (run_id, row["id"])) as cur:
                pred = await cur.fetchone()
        outcomes, improved, best = 0, 0, None
        if run_id:
            async with conn.execute(
                "SELECT o.realised_score, o.improved, r.direction FROM retrieval_outcomes o "
                "JOIN retrieval_outcome_documents d ON d.outcome_id = o.id JOIN runs r ON r.id = o.run_id "
                "WHERE d.document_id = ? AND o.run_id = ?", (row["id"], run_id)) as cur:
                for r in await cur.fetchall():
                    outcomes += 1
                    improved += int(bool(r["improved"]))
                    s = r["realised_score"]
                    if best is None or (s > best if r["direction"] == "maximize" else s < best):
                        best = s
        return DocumentRef(
            id=row["id"], title=row["title"], url=row["url"], excerpt=excerpt(row["content"], excerpt_chars),
            predicted_score=pred["predicted_score"] if pred else None,
            promising=None if pred is None or pred["promising"] is None else bool(pred["promising"]),
            why=pred["why"] if pred else None, realised_score=best, outcomes=outcomes, improved=improved)

    @scoped(Ref("run_id", "runs"))
    async def lookup_rows(self, run_id: str, text: str, limit: int = 200) -> LookupRows:
        """Stored documents a look-up may return: those matching `text` (the open questions)
        in the project's documents, plus every document this run forecast or credited."""
        async with self.db.read() as conn:
            run = await self._run_row(conn, run_id)
            relevance: dict[str, float] = {}
            hits = await matching_documents(conn, text, run["project"], limit)
            for i, doc_id in enumerate(hits):
                relevance[doc_id] = 1.0 - i / max(len(hits), 1)
            async with conn.execute(
                "SELECT document_id FROM retrieval_predictions WHERE run_id = ? UNION "
                "SELECT d.document_id FROM retrieval_outcome_documents d JOIN retrieval_outcomes o "
                "ON o.id = d.outcome_id WHERE o.run_id = ?", (run_id, run_id)) as cur:
                ids = list(relevance) + [r[0] for r in await cur.fetchall() if r[0] not in relevance]
            rows = []
            for doc_id in ids:
                async with conn.execute("SELECT id, url, title, content FROM retrieval_documents WHERE id = ?",
                                        (doc_id,)) as cur:
                    row = await cur.fetchone()
                if row is None:
                    continue
                ref = await self._ref(conn, row, run_id, None)
                async with conn.execute(
                    "SELECT o.* FROM retrieval_outcomes o JOIN retrieval_outcome_documents d ON d.outcome_id = o.id "
                    "WHERE d.document_id = ? AND o.run_id = ?", (doc_id, run_id)) as cur:
                    outs = [self._outcome(r) for r in await cur.fetchall()]
                order = "MAX" if run["direction"] == "maximize" else "MIN"
                async with conn.execute(f"SELECT {order}(predicted_score) FROM retrieval_predictions "
                                        f"WHERE run_id = ? AND document_id = ?", (run_id, doc_id)) as cur:
                    (best_pred,) = await cur.fetchone()
                rows.append(LookupRow(ref=ref, relevance=relevance.get(doc_id, 0.0), realised=outs,
                                      best_prediction=best_pred))
        return LookupRows(rows=rows)

    @scoped(Ref("run_id", "runs"))
    async def forecast_texts(self, run_id: str, k: int = 5, chars: int = 2000) -> LookupTexts:
        """Texts of the run's documents with the best and with the worst forecasts so far:
        relevance feedback for the query writer."""
        async with self.db.read() as conn:
            run = await self._run_row(conn, run_id)
            best_first = "DESC" if run["direction"] == "maximize" else "ASC"
            worst_first = "ASC" if best_first == "DESC" else "DESC"
            out = {}
            for name, order in (("best", best_first), ("worst", worst_first)):
                async with conn.execute(
                    f"SELECT d.title, substr(d.content, 1, ?) AS body, max(p.predicted_score) AS s "
                    f"FROM retrieval_predictions p JOIN retrieval_documents d ON d.id = p.document_id "
                    f"WHERE p.run_id = ? GROUP BY d.id ORDER BY s {order} LIMIT ?", (chars, run_id, k)) as cur:
                    out[name] = [f"{r['title']}\n{r['body']}" for r in await cur.fetchall()]
        return LookupTexts(**out)

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
            improved = None
            if spec.parent_score is not None:
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
