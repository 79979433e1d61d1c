"""Search on the SQLite store: FTS5 with bm25, bounded so that its cost stays flat as the store
grows (stopwords judged on a sample, counting capped, only the newest matches ranked). The
PostgreSQL store has its own (pgsearch.py) with the same query language and bounds."""

from __future__ import annotations

from typing import TYPE_CHECKING

import aiosqlite

from evoteam.servers.knowledge.hits import hits_page
from evoteam.servers.knowledge.models import SearchKind, SearchPage
from evoteam.servers.knowledge.rows import _WORD, decode_cursor, encode_cursor, filter_token, fts_query, page_limit

if TYPE_CHECKING:
    from evoteam.servers.knowledge.local import LocalKnowledgeStore


async def search(store: LocalKnowledgeStore, query: str, run_id: str | None = None, kinds: list[SearchKind] | None = None,
                 limit: int = 10, cursor: str | None = None) -> SearchPage:
    limit, offset = page_limit(limit), decode_cursor(cursor)
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(query)))[:32]
    if not words:
        return SearchPage(items=[], total=0)
    filters = []
    if store.actor.project is not None:
        filters.append(filter_token("p", store.actor.project))
    if run_id:
        filters.append(filter_token("r", run_id))
    if kinds:
        filters.append("(" + " OR ".join(filter_token("k", k) for k in kinds) + ")")
    scope = " AND filters : (" + " AND ".join(filters) + ")" if filters else ""
    async with store.db.read() as conn:
        if run_id:
            await store.visible_run_row(conn, run_id)
        # Words found in more than a third of the entries carry little ranking signal (their
        # bm25 weight is near or at 0) and make every match costlier to rank: like stopwords,
        # they are left out when the query has other words; a query of nothing else lists
        # its matches newest first.
        informative = await informative_words(store, conn, words)
        terms = informative or words
        for any_word in (False, True):
            match = fts_query(" ".join(terms), any_word=any_word) + scope
            # Counting costs time in proportion to the matches: it stops at COUNT_CAP.
            async with conn.execute("SELECT count(*) FROM (SELECT 1 FROM search_index WHERE search_index "
                                    "MATCH ? LIMIT ?)", (match, store.count_cap + 1)) as cur:
                (total,) = await cur.fetchone()
            # All words must match first; only when nothing does, any word may.
            if total or any_word:
                break
        capped = total > store.count_cap
        total = min(total, store.count_cap)
        # Ranking costs time in proportion to the matches; beyond RANK_WINDOW matches only
        # the newest RANK_WINDOW are ranked (a rowid bound FTS5 applies while scanning).
        newest_first = 0
        if informative and (capped or total > store.rank_window):
            async with conn.execute(
                "SELECT rowid FROM search_index WHERE search_index MATCH ? ORDER BY rowid DESC "
                "LIMIT 1 OFFSET ?", (match, store.rank_window - 1)) as cur:
                newest_first = ((await cur.fetchone()) or (0,))[0]
        # bm25 reads every matching entry's statistics once per query: only ranking pays for it.
        rank = "bm25(search_index, 2.0, 1.0, 0.0)" if informative else "0.0"
        # Kinds take turns, and each hit names its owner (hits.py); newest first without a signal.
        items = await hits_page(conn, match, newest_first, rank, bool(informative), limit, offset)
    more = offset + len(items) < total
    return SearchPage(items=items, total=total, total_capped=capped,
                      next_cursor=encode_cursor(offset + limit) if more else None)

async def informative_words(store: LocalKnowledgeStore, conn: aiosqlite.Connection, words: list[str]) -> list[str]:
    """The query's words that are not stopwords. A word's frequency is judged on a sample —
    the newest SAMPLE_WINDOW entries of the index — so the cost does not grow with the store."""
    async with conn.execute("SELECT coalesce(max(rowid), 0) FROM search_index_docsize") as cur:
        (indexed,) = await cur.fetchone()
    if indexed < 1000:  # small stores: every word counts
        return words
    window = min(indexed, store.sample_window)
    keep = []
    for word in words:
        async with conn.execute("SELECT count(*) FROM search_index WHERE search_index MATCH ? AND rowid > ?",
                                (fts_query(word), indexed - window)) as cur:
            (frequency,) = await cur.fetchone()
        if frequency <= window // 3:
            keep.append(word)
    return keep
