"""Full-text search of the knowledge store on PostgreSQL: the same query language and the same
kind of bounds as the FTS5 search in local.py, with PostgreSQL's own machinery.

- Query language: the words of the text (at most 32), each a plain word, never syntax; all
  words must match, and only when nothing does, any word may.
- Scope: project, run and kinds are plain column conditions beside the GIN match.
- Bounds: how often each word occurs among the newest `sample_window` entries (a word in more
  than a third of them is a stopword when the query has others) and how densely the query is
  expected to match in scope come from one pass over those entries kept per process
  (pgwords.py); from that, ranges of the newest entries are read, each the cheapest of three
  ways (pgranges.py), so that what a search reads does not grow with the store or with a common
  word's posting list. Only the newest `WINDOW` matches are ranked (`ts_rank`, title
  weighted above body), in the database, which sends back only the page's candidates; the
  count stops at the same window and comes from the same rows; only the page's rows get a
  snippet. A query of nothing but stopwords lists its matches newest first.
- Round trips: the statements travel in pipelines and are prepared once per connection
  (pg.py `batch`): the run's visibility rides with the first range; the page's rows, snippets
  and owners come in one more. With the pass and the words' lexemes kept, a search is two round
  trips (three when its matches are sparse enough to need a second range).
- `rank` is negated (lower is better), as FTS5's bm25 reports it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from evoteam.servers.knowledge import pgwords
from evoteam.servers.knowledge.hits import (CANDIDATES_NOW, TABLES, TURN_WINDOW, in_turns, superseded_column,
                                            titles_now, with_successor)
from evoteam.servers.knowledge.models import SearchHit, SearchKind, SearchPage
from evoteam.servers.knowledge.pgranges import Query, best_matches
from evoteam.servers.knowledge.pgschema import BUCKET_BITS, BUCKETED_TSV
from evoteam.servers.knowledge.scope import missing

if TYPE_CHECKING:
    from evoteam.servers.knowledge.local import LocalKnowledgeStore

CONFIG = pgwords.CONFIG
_HEADLINE = "StartSel=[, StopSel=], MaxWords=16, MinWords=6, MaxFragments=1, FragmentDelimiter=…"
# Ranking a match reads its row (its tsvector) from the table, a page visit of its own where
# matches are sparse: a few microseconds each, and on a busy machine a search's time grows with
# them. So here only the newest WINDOW matches are ranked, and counting stops there too (past
# it, `total_capped` says "at least"): what a search reads is bounded by this window, not by the
# store, a word's posting list, or SQLite's 5,000 ranks and 1,000 counted (rows.RANK_WINDOW,
# rows.COUNT_CAP). A store's own smaller window and cap (tests set them) still win.
WINDOW = 250
# Who wrote each shown hit: one statement over the tables the kinds live in (hits.TABLES), of
# one shape whatever the page holds, so that it is prepared once.
_OWNERS = " UNION ALL ".join(f"SELECT id, user, {superseded_column(table)} AS superseded_by FROM {table} "
                             "WHERE id = ANY(?::text[])" for table in TABLES.values())


def tsquery(words: list[str], any_word: bool) -> tuple[str, list[str]]:
    """A tsquery expression matching all (or any) of `words`, each parsed as plain text."""
    joiner = " || " if any_word else " && "
    return "(" + joiner.join(f"plainto_tsquery('{CONFIG}', ?)" for _ in words) + ")", list(words)


async def search(store: LocalKnowledgeStore, query: str, run_id: str | None, kinds: list[SearchKind] | None,
                 limit: int, cursor: str | None) -> SearchPage:
    from evoteam.servers.knowledge.rows import _WORD, decode_cursor, encode_cursor, page_limit

    limit, offset = page_limit(limit), decode_cursor(cursor)
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(query)))[:32]
    if not words:
        return SearchPage(items=[], total=0)
    conditions, params = [], []
    project = store.actor.project
    if project is not None:
        conditions.append("project = ?")
        params.append(project)
    if run_id:
        conditions.append("run_id = ?")
        params.append(run_id)
    if kinds:
        conditions.append("kind IN (" + ", ".join("?" for _ in kinds) + ")")
        params.extend(kinds)
    scope_sql = "".join(f" AND {c}" for c in conditions)
    # The run's visibility is checked with the first statements that go anyway (its row is
    # read beside them, and a run the caller may not see fails the search as before).
    check = [("SELECT project FROM runs WHERE id = ?", [run_id])] if run_id else []
    async with store.db.read() as conn:
        key = (store.db.url, store.sample_window)
        stats, lexemes, checked = await pgwords.known(conn, store.db, key, words, check)
        if checked is not None:
            _check_run(store, checked, run_id)
            check = []
        frequency = {w: stats.frequency(lexemes[w]) for w in words}
        # Words in more than a third of the newest entries carry little ranking signal and make
        # every match costlier: like stopwords, they are left out when the query has others.
        informative = words if stats.newest < pgwords.SMALL else [
            w for w in words if frequency[w] <= stats.entries // 3]
        terms = informative or words
        ranked = bool(informative)
        window = min(store.rank_window, WINDOW)
        cap = min(store.count_cap, WINDOW)
        # Enough matches for the count (cap + 1 says "capped") and for the ranked window, or,
        # unranked, for the page (a cursor past the cap finds nothing, as on SQLite). Only the
        # page's candidates come back from the database: the best TURN_WINDOW (kinds take turns
        # among them) or the page's end, whichever is further; unranked, the newest up to it.
        want = max(cap + 1, window if ranked else min(offset + limit, cap + limit))
        keep = max(TURN_WINDOW, offset + limit) if ranked else offset + limit
        scoped = stats.in_scope(project, run_id, kinds)
        for any_word in (False, True):
            q, q_params = tsquery(terms, any_word)
            found = stats.expected([lexemes[w] for w in terms], any_word, scoped)
            # What a GIN match would decode: each term's posting list, sized from the pass.
            postings = sum(frequency[w] for w in terms) * stats.newest // max(stats.entries, 1)
            # What the rarest side of a GIN match iterates: the rarest word's posting list (every
            # word's, for any word); a word not seen twice in the pass is taken as seen once.
            share = [max(frequency[w], 1) for w in terms]
            rarest = (sum(share) if any_word else min(share)) * stats.newest // max(stats.entries, 1)
            query_ = Query("search_index", q, q_params, scope_sql, params, "kind, ref_id", BUCKETED_TSV, BUCKET_BITS,
                           len(terms), rarest)
            matches = await best_matches(
                conn, query_, stats.newest, stats.entries, found, postings, want, ranked, keep,
                rank_first=window if ranked else want, also=check)
            if matches.also is not None:
                _check_run(store, matches.also, run_id)
                check = []
            if matches.count or any_word:
                break
        if matches.top is not None:
            pgwords.seen(key, matches.top)
        hits = [{"id": int(r["id"]), "kind": r["kind"], "ref": r["ref_id"], "rank": float(r["rank"])}
                for r in matches.rows]
        capped = matches.count > cap
        total = min(matches.count, cap)
        if ranked:  # best first already (pgranges.best_matches)
            shown = (in_turns(hits[:TURN_WINDOW]) + hits[TURN_WINDOW:])[offset:offset + limit]
        else:
            shown = hits[offset:offset + limit]
        rows, owners, now = await _page(conn, q, q_params, shown)
        shown = [h for h in shown if h["id"] in rows]  # gone since the window was read: left out
        items = [SearchHit(kind=r["kind"], id=r["ref_id"], run_id=r["run_id"], snippet=r["snip"], rank=h["rank"],
                           title=with_successor(now.get(r["ref_id"], r["title"]), who[1]), owner=who[0])
                 for h in shown for r in [rows[h["id"]]] for who in [owners.get(r["ref_id"], (None, None))]]
    more = offset + len(items) < total
    return SearchPage(items=items, total=total, total_capped=capped,
                      next_cursor=encode_cursor(offset + limit) if more else None)


def _check_run(store: LocalKnowledgeStore, rows: list, run_id: str) -> None:
    (found,) = rows
    # A run outside the token's project is reported as missing, as visible_run_row does.
    if not found or not store._sees(found[0]):
        raise missing("runs", run_id)


async def _page(conn, q: str, q_params: list, shown: list[dict]) -> tuple[dict, dict, dict]:
    """The shown hits' rows with their snippets (ts_headline re-reads a body: only these), who
    wrote each (hits.owners' rule) and each candidate's title as it stands now, in one round trip."""
    if not shown:
        return {}, {}, {}
    refs = {kind: [h["ref"] for h in shown if h["kind"] == kind] for kind in TABLES}
    rows, owners, cands = await conn.batch([
        (f"SELECT id, kind, ref_id, run_id, title, ts_headline('{CONFIG}', body, {q}, '{_HEADLINE}') AS snip "
         f"FROM search_index WHERE id = ANY(?::bigint[])", [*q_params, [h["id"] for h in shown]]),
        (_OWNERS, list(refs.values())),
        (CANDIDATES_NOW.format("SELECT unnest(?::text[])"), [refs["candidate"]])])
    return ({int(r["id"]): r for r in rows}, {r["id"]: (r["user"], r["superseded_by"]) for r in owners},
            titles_now(cands))
