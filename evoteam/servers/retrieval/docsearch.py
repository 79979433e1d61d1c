"""Full-text match of the project's stored documents, on either backend: FTS5's bm25 on SQLite,
a GIN-indexed tsvector with ts_rank on PostgreSQL (pgschema.py); any word may match, title
weighted above body, best first."""

from __future__ import annotations

from evoteam.servers.knowledge.rows import _WORD, fts_query
from evoteam.servers.knowledge.pgsearch import tsquery


async def matching_documents(conn, text: str, project: str, limit: int) -> list[str]:
    """Ids of the project's documents that match any word of `text`, best first."""
    if getattr(conn, "dialect", "sqlite") == "postgres":
        words = list(dict.fromkeys(w.lower() for w in _WORD.findall(text)))[:32]
        if not words:
            return []
        q, params = tsquery(words, any_word=True)
        sql = (f"SELECT doc_id FROM retrieval_documents_fts WHERE tsv @@ {q} AND project = ? "
               f"ORDER BY ts_rank(tsv, {q}) DESC, id LIMIT ?")
        args = [*params, project, *params, limit]
    else:
        match = fts_query(text, any_word=True)
        if not match:
            return []
        sql = ("SELECT doc_id FROM retrieval_documents_fts WHERE retrieval_documents_fts MATCH ? "
               "AND project = ? ORDER BY bm25(retrieval_documents_fts, 2.0, 1.0) LIMIT ?")
        args = [match, project, limit]
    async with conn.execute(sql, args) as cur:
        return [r[0] for r in await cur.fetchall()]
