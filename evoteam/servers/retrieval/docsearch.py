"""Full-text match of the project's stored documents, on either backend: FTS5's bm25 on SQLite,
a GIN-indexed tsvector with ts_rank on PostgreSQL (pgschema.py); any word may match, title
weighted above body, best first.

On PostgreSQL the same bound as the knowledge store's search (knowledge/pgranges.py): only the
newest `RANK_WINDOW` matches are ranked, read range by range; one pass over the newest
`SAMPLE_WINDOW` documents says how densely the query matches there and how long its words'
posting lists are. What a look-up reads does not grow with the documents stored or with a
common word's posting list."""

from __future__ import annotations

from evoteam.servers.knowledge.pgranges import Query, newest_matches
from evoteam.servers.knowledge.pgsearch import tsquery
from evoteam.servers.knowledge.rows import _WORD, SAMPLE_WINDOW, fts_query

# The newest 1,000 matching documents are ranked: look-ups are rare (the knowledge store's
# search, run far more often, ranks fewer: pgsearch.WINDOW).
RANK_WINDOW = 1000


async def matching_documents(conn, text: str, project: str, limit: int, window: int = RANK_WINDOW,
                             sample: int = SAMPLE_WINDOW) -> list[str]:
    """Ids of the project's documents that match any word of `text`, best first (on PostgreSQL,
    best of the newest `window` matches, judged on a pass over the newest `sample` documents)."""
    if getattr(conn, "dialect", "sqlite") == "postgres":
        return await _postgres(conn, text, project, limit, window, sample)
    match = fts_query(text, any_word=True)
    if not match:
        return []
    async with conn.execute("SELECT doc_id FROM retrieval_documents_fts WHERE retrieval_documents_fts MATCH ? "
                            "AND project = ? ORDER BY bm25(retrieval_documents_fts, 2.0, 1.0) LIMIT ?",
                            [match, project, limit]) as cur:
        return [r[0] for r in await cur.fetchall()]


async def _postgres(conn, text: str, project: str, limit: int, window: int, sample: int) -> list[str]:
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(text)))[:32]
    if not words:
        return []
    q, q_params = tsquery(words, any_word=True)
    ((pass_,),) = await conn.batch([(
        f"WITH s AS MATERIALIZED (SELECT id, project, tsv FROM retrieval_documents_fts ORDER BY id DESC LIMIT ?) "
        f"SELECT coalesce(max(id), 0) AS newest, count(*) AS entries, "
        f"count(*) FILTER (WHERE project = ? AND tsv @@ {q}) AS found, "
        f"count(*) FILTER (WHERE tsv @@ {q}) AS anywhere FROM s", [sample, project, *q_params, *q_params])])
    newest, entries = int(pass_["newest"]), int(pass_["entries"])
    # What a GIN match would decode, at least: the entries holding any word, over the table.
    postings = int(pass_["anywhere"]) * newest // max(entries, 1)
    matches, _ = await newest_matches(
        conn, Query("retrieval_documents_fts", q, q_params, " AND project = ?", [project], "doc_id"),
        newest, entries, float(pass_["found"]), postings, window, ranked=True)
    # Best first; among equals, the older first (as "ORDER BY ts_rank DESC, id" ranked before).
    best = sorted(matches, key=lambda r: (float(r["rank"]), int(r["id"])))
    return [r["doc_id"] for r in best[:limit]]
