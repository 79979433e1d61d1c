"""Full-text search of the knowledge store on PostgreSQL: the same query language and the same
bounds as the FTS5 search in local.py, with PostgreSQL's own machinery.

- Query language: the words of the text (at most 32), each a plain word, never syntax; all
  words must match, and only when nothing does, any word may.
- Scope: project, run and kinds are plain column conditions beside the GIN match.
- Bounds: counting stops at `count_cap`; only the newest `rank_window` matches are ranked
  (`ts_rank`, title weighted above body), found without reading older ones, and only the page's
  rows get a snippet, so the cost of a query does not grow with the store. Words found in more than a third of the newest
  `sample_window` entries carry no ranking signal and are left out when the query has others;
  a query of nothing else lists its matches newest first.
- `rank` is negated (lower is better), as FTS5's bm25 reports it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from evoteam.servers.knowledge.hits import TURN_WINDOW, in_turns
from evoteam.servers.knowledge.hits import owners as owners_of
from evoteam.servers.knowledge.models import SearchHit, SearchKind, SearchPage

if TYPE_CHECKING:
    from evoteam.servers.knowledge.local import LocalKnowledgeStore

CONFIG = "evoteam"  # the text search configuration made by pgschema.py
_HEADLINE = "StartSel=[, StopSel=], MaxWords=16, MinWords=6, MaxFragments=1, FragmentDelimiter=…"


def tsquery(words: list[str], any_word: bool) -> tuple[str, list[str]]:
    """A tsquery expression matching all (or any) of `words`, each parsed as plain text."""
    joiner = " || " if any_word else " && "
    return "(" + joiner.join(f"plainto_tsquery('{CONFIG}', ?)" for _ in words) + ")", list(words)


async def search(store: LocalKnowledgeStore, query: str, run_id: str | None, kinds: list[SearchKind] | None,
                 limit: int, cursor: str | None) -> SearchPage:
    from evoteam.servers.knowledge.local import _WORD, _limit, decode_cursor, encode_cursor

    limit, offset = _limit(limit), decode_cursor(cursor)
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(query)))[:32]
    if not words:
        return SearchPage(items=[], total=0)
    scope, scope_params = [], []
    if store.actor.project is not None:
        scope.append("project = ?")
        scope_params.append(store.actor.project)
    if run_id:
        scope.append("run_id = ?")
        scope_params.append(run_id)
    if kinds:
        scope.append("kind IN (" + ", ".join("?" for _ in kinds) + ")")
        scope_params.extend(kinds)
    where_scope = "".join(f" AND {c}" for c in scope)
    async with store.db.read() as conn:
        if run_id:
            await store.visible_run_row(conn, run_id)
        async with conn.execute("SELECT coalesce(max(id), 0) FROM search_index") as cur:
            (newest,) = await cur.fetchone()
        informative = await _informative_words(store, conn, words, newest)
        terms = informative or words
        for any_word in (False, True):
            q, q_params = tsquery(terms, any_word)
            async with conn.execute(
                f"SELECT count(*) FROM (SELECT 1 FROM search_index WHERE tsv @@ {q}{where_scope} LIMIT ?) AS m",
                [*q_params, *scope_params, store.count_cap + 1]) as cur:
                (total,) = await cur.fetchone()
            if total or any_word:
                break
        capped = total > store.count_cap
        total = min(total, store.count_cap)
        # Beyond count_cap matches, only the newest entries that hold about rank_window of them
        # are read (_newest_matches), so ranking never reads a common word's every match.
        since = await _newest_matches(store, conn, q, q_params, where_scope, scope_params, newest) \
            if informative and capped else 0
        bound, bound_params = (" AND id > ?", [since]) if since else ("", [])
        # The newest rank_window matches (an index-ordered scan), ranked; then the page; then
        # snippets for the page's rows only.
        rank = f"-ts_rank(tsv, {q})" if informative else "0.0"
        rank_params = q_params if informative else []
        order = "rank, id DESC" if informative else "id DESC"
        # Ranked, the best TURN_WINDOW matches are shown with kinds in turn (hits.py), as on SQLite.
        fetch, skip = (max(TURN_WINDOW, offset + limit), 0) if informative else (limit, offset)
        async with conn.execute(
            f"SELECT kind, ref_id, run_id, title, ts_headline('{CONFIG}', body, {q}, '{_HEADLINE}') AS snip, rank "
            f"FROM (SELECT id, kind, ref_id, run_id, title, body, {rank} AS rank FROM ("
            f"SELECT * FROM search_index WHERE tsv @@ {q}{bound}{where_scope} ORDER BY id DESC LIMIT ?) AS w "
            f"ORDER BY {order} LIMIT ? OFFSET ?) AS page ORDER BY {order}",
            [*q_params, *rank_params, *q_params, *bound_params, *scope_params, store.rank_window, fetch, skip],
        ) as cur:
            rows = await cur.fetchall()
        if informative:
            rows = (in_turns(rows[:TURN_WINDOW]) + list(rows[TURN_WINDOW:]))[offset:offset + limit]
        owners = await owners_of(conn, [(r["kind"], r["ref_id"]) for r in rows])
        items = [SearchHit(kind=r["kind"], id=r["ref_id"], run_id=r["run_id"], title=r["title"],
                           snippet=r["snip"], rank=r["rank"], owner=owners.get(r["ref_id"])) for r in rows]
    more = offset + len(items) < total
    return SearchPage(items=items, total=total, total_capped=capped,
                      next_cursor=encode_cursor(offset + limit) if more else None)


async def _newest_matches(store: LocalKnowledgeStore, conn, q: str, q_params: list, where_scope: str,
                          scope_params: list, newest: int) -> int:
    """The id after which about the newest `rank_window` matches lie (0: the whole index).

    "ORDER BY id DESC LIMIT rank_window" over a GIN match reads every match before it sorts
    them: at 100k learnings a word in 13% of the entries cost over 80 ms, and its matches grow
    with the store. Instead, the query's density among the newest `sample_window` entries (a
    bounded count) says how many of the newest entries hold about rank_window matches, and only
    those are read; a query with no match among the newest entries reads them all."""
    window = min(newest, store.sample_window)
    async with conn.execute(
        f"SELECT count(*) FROM search_index WHERE tsv @@ {q} AND id > ?{where_scope}",
        [*q_params, newest - window, *scope_params]) as cur:
        (found,) = await cur.fetchone()
    if not found:
        return 0
    # Half again as many entries as the density asks for: a window a little short of matches
    # ranks a few fewer, never older ones.
    return max(0, newest - (store.rank_window * window * 3) // (2 * found))


async def _informative_words(store: LocalKnowledgeStore, conn, words: list[str], indexed: int) -> list[str]:
    """The query's words that are not stopwords, judged on the newest `sample_window` entries
    (`indexed`: the newest entry's id)."""
    if indexed < 1000:  # small stores: every word counts
        return words
    window = min(indexed, store.sample_window)
    keep = []
    for word in words:
        async with conn.execute(
            f"SELECT count(*) FROM search_index WHERE id > ? AND tsv @@ plainto_tsquery('{CONFIG}', ?)",
            (indexed - window, word)) as cur:
            (frequency,) = await cur.fetchone()
        if frequency <= window // 3:
            keep.append(word)
    return keep
