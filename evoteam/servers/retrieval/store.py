"""All database access of the retrieval server: documents and queries here, decisions and
outcomes in records.py (its base class).

`RetrievalStore` wraps the knowledge store's SQLite file (`LocalKnowledgeStore.db`). Every
public method is async and takes and returns pydantic models, so the class can later be
proxied to a shared knowledge server without touching the core.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime

import aiosqlite

from evoteam.servers.knowledge.errors import NotFound
from evoteam.servers.knowledge.rows import new_id
from evoteam.servers.knowledge.readsql import best_ranked
from evoteam.servers.knowledge.scope import Ref, scoped
from evoteam.servers.retrieval.docsearch import matching_documents
from evoteam.servers.retrieval.doctext import MAX_CONTENT_CHARS, content_hash, excerpt, url_key
from evoteam.servers.retrieval.models import (
    EXCERPT_CHARS,
    Document,
    DocumentRef,
    QueryRecord,
    StoredDocument,
)
from evoteam.servers.retrieval.records import RetrievalRecords
from evoteam.servers.retrieval.storemodels import (
    IdList,
    LookupRow,
    LookupRows,
    LookupTexts,
    QueryResults,
    QueryResultsCreate,
    RunInfo,
    StringList,
)


class RetrievalStore(RetrievalRecords):
    """Documents, queries, gate decisions, frozen forecasts and outcomes."""

    @scoped(Ref("run_id", "runs"))
    async def run_info(self, run_id: str) -> RunInfo:
        async with self.db.read() as conn:
            row = await self._run_row(conn, run_id)
            async with conn.execute(best_ranked(row["direction"]), (run_id,)) as cur:
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
