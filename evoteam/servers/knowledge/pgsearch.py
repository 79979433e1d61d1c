"""Full-text search of the knowledge store on PostgreSQL: the same query language and the same
kind of bounds as the FTS5 search in local.py, with PostgreSQL's own machinery.

- Query language: the words of the text (at most 32), each a plain word, never syntax; all
  words must match, and only when nothing does, any word may.
- Scope: project, run and kinds are plain column conditions beside the GIN match.
- Bounds: one pass over the newest `sample_window` entries says how often each word occurs
  there (a word in more than a third of them is a stopword when the query has others) and how
  densely the query matches in scope; from that, ranges of the newest entries are read, each the
  cheapest of three ways (`_newest_matches`), so that what a search reads does not grow with the
  store or with a common word's posting list. Only the newest `RANK_WINDOW` matches are ranked
  (`ts_rank`, title weighted above body); the count stops at `count_cap` and comes from the same
  rows; only the page's rows get a snippet. A query of nothing but stopwords lists its matches
  newest first.
- `rank` is negated (lower is better), as FTS5's bm25 reports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from evoteam.servers.knowledge.hits import TURN_WINDOW, in_turns
from evoteam.servers.knowledge.hits import owners as owners_of
from evoteam.servers.knowledge.models import SearchHit, SearchKind, SearchPage

if TYPE_CHECKING:
    from evoteam.servers.knowledge.local import LocalKnowledgeStore

CONFIG = "evoteam"  # the text search configuration made by pgschema.py
_HEADLINE = "StartSel=[, StopSel=], MaxWords=16, MinWords=6, MaxFragments=1, FragmentDelimiter=…"
# Ranking a match reads its row (its tsvector) from the table: a few microseconds each, so the
# 5,000 SQLite ranks (rows.RANK_WINDOW) cost tens of milliseconds here on a busy machine. The
# newest 1,000 matches keep a search within its 20 ms at any size (docs/performance.md); a
# store's own smaller window (tests set one) still wins.
RANK_WINDOW = 1000


def tsquery(words: list[str], any_word: bool) -> tuple[str, list[str]]:
    """A tsquery expression matching all (or any) of `words`, each parsed as plain text."""
    joiner = " || " if any_word else " && "
    return "(" + joiner.join(f"plainto_tsquery('{CONFIG}', ?)" for _ in words) + ")", list(words)


@dataclass
class Sample:
    """The newest `entries` of the index, grouped by which query words each holds (a bit per
    word) and whether it is in the search's scope: word frequencies and the query's density."""

    newest: int  # the newest entry's id (0: none)
    entries: int
    groups: list[tuple[int, bool, int]]  # (word bits, in scope, entries)

    def frequency(self, bit: int) -> int:
        return sum(n for mask, _, n in self.groups if mask & bit)

    def found(self, bits: int, any_word: bool) -> int:
        """Entries in scope matching all (or any) of the words in `bits`."""
        return sum(n for mask, scoped, n in self.groups
                   if scoped and ((mask & bits) if any_word else (mask & bits) == bits))


@dataclass
class Scope:
    sql: str  # " AND ..." conditions, or ""
    params: list


async def search(store: LocalKnowledgeStore, query: str, run_id: str | None, kinds: list[SearchKind] | None,
                 limit: int, cursor: str | None) -> SearchPage:
    from evoteam.servers.knowledge.rows import _WORD, decode_cursor, encode_cursor, page_limit

    limit, offset = page_limit(limit), decode_cursor(cursor)
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(query)))[:32]
    if not words:
        return SearchPage(items=[], total=0)
    conditions, params = [], []
    if store.actor.project is not None:
        conditions.append("project = ?")
        params.append(store.actor.project)
    if run_id:
        conditions.append("run_id = ?")
        params.append(run_id)
    if kinds:
        conditions.append("kind IN (" + ", ".join("?" for _ in kinds) + ")")
        params.extend(kinds)
    scope = Scope("".join(f" AND {c}" for c in conditions), params)
    async with store.db.read() as conn:
        if run_id:
            await store.visible_run_row(conn, run_id)
        sample = await _sample(conn, words, conditions, params, store.sample_window)
        newest = sample.newest
        bit = {w: 1 << i for i, w in enumerate(words)}
        # Words in more than a third of the newest entries carry little ranking signal and make
        # every match costlier: like stopwords, they are left out when the query has others.
        informative = words if newest < 1000 else [w for w in words if sample.frequency(bit[w]) <= sample.entries // 3]
        terms = informative or words
        ranked = bool(informative)
        window = min(store.rank_window, RANK_WINDOW)
        # Enough matches for the count (count_cap + 1 says "capped") and for the ranked window,
        # or, unranked, for the page (a cursor past the cap finds nothing, as on SQLite).
        want = max(store.count_cap + 1, window if ranked else min(offset + limit, store.count_cap + limit))
        for any_word in (False, True):
            q, q_params = tsquery(terms, any_word)
            found = sample.found(sum(bit[w] for w in terms), any_word)
            # What a GIN match would decode: each term's posting list, sized from the sample.
            postings = sum(sample.frequency(bit[w]) for w in terms) * newest // max(sample.entries, 1)
            matches = await _newest_matches(conn, q, q_params, scope, newest, sample.entries, found, postings,
                                            want, ranked)
            if matches or any_word:
                break
        capped = len(matches) > store.count_cap
        total = min(len(matches), store.count_cap)
        if ranked:
            best = sorted(matches[:window], key=lambda r: (r[2], -r[0]))[:max(TURN_WINDOW, offset + limit)]
            shown = (in_turns([{"id": i, "kind": k, "rank": r} for i, k, r in best[:TURN_WINDOW]])
                     + [{"id": i, "kind": k, "rank": r} for i, k, r in best[TURN_WINDOW:]])[offset:offset + limit]
        else:
            shown = [{"id": i, "kind": k, "rank": r} for i, k, r in matches[offset:offset + limit]]
        rows = await _page_rows(conn, q, q_params, [h["id"] for h in shown])
        shown = [h for h in shown if h["id"] in rows]  # gone since the window was read: left out
        owners = await owners_of(conn, [(rows[h["id"]]["kind"], rows[h["id"]]["ref_id"]) for h in shown])
        items = [SearchHit(kind=r["kind"], id=r["ref_id"], run_id=r["run_id"], title=r["title"], snippet=r["snip"],
                           rank=h["rank"], owner=owners.get(r["ref_id"]))
                 for h in shown for r in [rows[h["id"]]]]
    more = offset + len(items) < total
    return SearchPage(items=items, total=total, total_capped=capped,
                      next_cursor=encode_cursor(offset + limit) if more else None)


async def _sample(conn, words: list[str], conditions: list[str], params: list, size: int) -> Sample:
    """One pass over the newest `size` entries: how many hold each combination of the query's
    words, in the search's scope or not (a bounded read, whatever the store's size)."""
    bits = " | ".join(f"((tsv @@ plainto_tsquery('{CONFIG}', ?))::int::bigint << {i})" for i in range(len(words)))
    scoped = " AND ".join(conditions) or "TRUE"
    # The newest id in the same statement: one round trip fewer, each costly on a busy server.
    # The LIMIT (a no-op) tells the planner how few rows come: without it, it planned for 333k.
    async with conn.execute(
        f"WITH newest AS (SELECT coalesce(max(id), 0) AS id FROM search_index) "
        f"SELECT (SELECT id FROM newest) AS newest, m, s, count(*) AS n FROM (SELECT {bits} AS m, ({scoped}) AS s "
        f"FROM search_index WHERE id > (SELECT id FROM newest) - ? ORDER BY id DESC LIMIT ?) AS e GROUP BY m, s",
        [*words, *params, size, size]) as cur:
        rows = await cur.fetchall()
    newest = int(rows[0]["newest"]) if rows else 0
    return Sample(newest, min(newest, size), [(int(r["m"]), bool(r["s"]), int(r["n"])) for r in rows])


# What each way of reading costs, per item, relative to one another (EXPLAIN ANALYZE at 100k and
# 1M learnings): testing one entry of a walked range; one entry of a range's id bitmap; one
# decoded GIN posting; one matching row fetched from the table (a page visit of its own).
WALK_ENTRY, RANGE_ENTRY, POSTING, ROW = 1.5, 0.3, 0.5, 8.0


async def _newest_matches(conn, q: str, q_params: list, scope: Scope, newest: int, sampled: int, found: int,
                          postings: int, want: int, ranked: bool) -> list[tuple[int, str, float]]:
    """The newest `want` matches (fewer if the store has fewer) as (id, kind, rank), newest first.

    "ORDER BY id DESC LIMIT want" over the GIN match reads every match before sorting, and a GIN
    match decodes each word's whole posting list (a common word's grows with the store).
    Instead, ranges of the newest entries are read, newest first, each sized to hold about 1.5 ×
    the matches still wanted at the density seen so far (first the sample's: `found` of the
    newest `sampled` entries), each the cheapest of three ways, judged from the sample:
    walking the range's ids and testing each entry (it stops at the last match wanted: right
    for common words); the GIN match intersected with the range's ids; or, when few matches
    are left in all, the GIN match alone, reading every remaining match (right for rare words,
    whose range would be most of the store). `postings`: what the GIN match would decode."""
    rank = f"-ts_rank(tsv, {q})" if ranked else "0.0"
    rank_params = q_params if ranked else []
    out: list[tuple[int, str, float]] = []
    if not found:  # none among the newest: one probe says whether any older entry matches at all
        async with conn.execute(f"SELECT 1 FROM search_index WHERE tsv @@ {q}{scope.sql} LIMIT 1",
                                [*q_params, *scope.params]) as cur:
            if await cur.fetchone() is None:
                return out
    hi, read = newest, 0
    density = found / sampled if found else 0.0
    while hi > 0 and len(out) < want:
        need = want - len(out)
        span = min(hi, int(1.5 * need / density) + 1) if density else hi
        costs = {"walk": WALK_ENTRY * span,
                 "range": RANGE_ENTRY * span + POSTING * postings + ROW * 1.5 * need,
                 "all": POSTING * postings + ROW * density * hi}
        way = min(costs, key=costs.__getitem__) if span < hi else min(("walk", "all"), key=costs.__getitem__)
        lo = 0 if way == "all" else hi - span
        # One round trip for the four statements (a pipeline): each costs a wait on a busy server.
        async with conn.raw.pipeline() as pipeline, conn.raw.transaction():
            # The planner costs a tsvector test as cheap as comparing two numbers, so it walks
            # a range even where the walk tests ten times the entries the GIN match would find
            # (38k entries, 130 ms against 13 ms at 100k learnings), and takes GIN where its
            # posting lists hold 400k entries (300 ms at 1M). The way is chosen above; the
            # others are off for this statement only.
            await conn.execute(f"SET LOCAL {'enable_bitmapscan' if way == 'walk' else 'enable_indexscan'} = off")
            if way == "walk":  # ORDER BY ... LIMIT: the walk stops at the `need`th match
                sql = (f"SELECT id, kind, {rank} AS rank FROM search_index WHERE id > ? AND id <= ? "
                       f"AND tsv @@ {q}{scope.sql} ORDER BY id DESC LIMIT ?")
                params = [*rank_params, lo, hi, *q_params, *scope.params, need]
            else:
                # MATERIALIZED keeps ORDER BY ... LIMIT out of the match's plan (it invites the
                # walk); "id + 0" keeps the whole store's match off the primary key.
                ids = "id > ? AND id <= ?" if way == "range" else "id + 0 <= ?"
                sql = (f"WITH m AS MATERIALIZED (SELECT id, kind, tsv FROM search_index WHERE tsv @@ {q} AND {ids}"
                       f"{scope.sql}) SELECT id, kind, {rank} AS rank FROM m ORDER BY id DESC LIMIT ?")
                params = [*q_params, *([lo, hi] if way == "range" else [hi]), *scope.params, *rank_params, need]
            async with conn.execute(sql, params) as cur:
                await pipeline.sync()  # the results, now
                out += [(int(r["id"]), r["kind"], float(r["rank"])) for r in await cur.fetchall()]
        read += hi - lo
        hi = lo
        density = len(out) / read if out else density / 4
    return out


async def _page_rows(conn, q: str, q_params: list, ids: list[int]) -> dict:
    """The shown hits' rows, with their snippets (ts_headline re-reads a body: only these)."""
    if not ids:
        return {}
    async with conn.execute(
        f"SELECT id, kind, ref_id, run_id, title, ts_headline('{CONFIG}', body, {q}, '{_HEADLINE}') AS snip "
        f"FROM search_index WHERE id IN ({', '.join('?' for _ in ids)})", [*q_params, *ids]) as cur:
        return {int(r["id"]): r for r in await cur.fetchall()}
