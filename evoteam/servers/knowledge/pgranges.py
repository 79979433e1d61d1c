"""The newest matches of a full-text query on PostgreSQL, read range by range so that what is read
does not grow with the table or with a common word's posting list (pgsearch.py, and the
retrieval server's documents in retrieval/docsearch.py).

"ORDER BY id DESC LIMIT n" over a GIN match reads every match before sorting, and a GIN match
decodes each word's whole posting list (a common word's grows with the store). Instead, ranges of
the newest entries are read, newest first, each sized to hold about 1.5 x the matches still
wanted at the density expected (first the caller's estimate, then what the ranges read so far
found), each the cheapest of three ways: walking the range's ids and testing each entry (it stops
at the last match wanted: right for common words); the GIN match intersected with the range's
ids; or, when few matches are left in all, the GIN match alone, reading every remaining match
(right for rare words, whose range would be most of the table). Where the table's GIN index
also holds a bucket lexeme per 2**k ids (the knowledge store's search_index, pgschema.py
`BUCKETED_TSV`), a fourth way replaces the second: the GIN match of the words AND one of the
range's buckets, the range widened to whole buckets, which decodes the buckets' entries and
skips the rest of each word's posting list (the second way decodes every posting list whole).

Each range is one round trip: BEGIN, the `SET LOCAL`s that keep the planner to the way chosen,
the (prepared) statement and COMMIT, pipelined (pg.py `batch`). The statement ranks the matches
it keeps and sends back only the best the caller asks for (`best_matches`), with their count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# What each way of reading costs, per item, relative to one another (EXPLAIN ANALYZE of each way
# on the same queries at 1M learnings, under load: about 0.38 us per walked entry, 0.1 us per id
# of a primary-key range bitmap, 0.04 us per decoded GIN posting, 3.6 us per matching row
# fetched, a page visit of its own; benchmarks/results/2026-12-02-bench_pg_search_pg25e.txt):
# testing one entry of a walked range; one id of a range's bitmap read from the primary key;
# one decoded GIN posting; one matching row fetched from the table.
WALK_ENTRY, RANGE_ENTRY, POSTING, ROW = 1.5, 0.4, 0.17, 14.0
# The bucket way: GIN iterates the rarest side of the match (the buckets' entries, or the rarest
# word's whole posting list where it holds fewer) and moves every other key's list up to each of
# its items: about 0.07 us per item and key moved (EXPLAIN ANALYZE at 1M learnings: a word of
# 21k postings against 4, 8, 16 buckets took 4.5, 9.7, 24.7 ms).
ADVANCE = 0.3
MAX_BUCKETS = 8  # in one range read the bucket way (131k ids)
# A row fetched by the GIN match alone, which reads matches across the whole table: most lie in
# pages no recent search read, outside PostgreSQL's buffers (22-36 us each where the newest
# ranges' rows took 3.6 us, the same probe at 1M); priced between, as some are cached.
OLD_ROW = 50.0

# The planner costs a tsvector test as cheap as comparing two numbers, so it walks a range even
# where the walk tests ten times the entries the GIN match would find (38k entries, 130 ms
# against 13 ms at 100k learnings), and takes GIN where its posting lists hold 400k entries
# (300 ms at 1M). The way is chosen here; the others are off for that statement only. Custom
# plans always: a generic plan of a prepared statement knows neither the range's size nor the
# words' frequencies.
# JIT off: a GIN match over a million rows is costed past jit_above_cost (100k), and compiling
# it added 8 ms (EXPLAIN ANALYZE of the GIN match alone for two common words at 1M: cost 118k).
_SETTINGS = {"walk": ("enable_bitmapscan = off", "plan_cache_mode = force_custom_plan", "jit = off"),
             "range": ("enable_indexscan = off", "plan_cache_mode = force_custom_plan", "jit = off"),
             "bucket": ("enable_seqscan = off", "plan_cache_mode = force_custom_plan", "jit = off"),
             "all": ("enable_indexscan = off", "plan_cache_mode = force_custom_plan", "jit = off")}


@dataclass
class Query:
    """What to match in `table`: the tsquery expression and its parameters, the scope's
    conditions (" AND ...") and theirs, and the columns each match returns beside id and rank;
    `indexed`: the expression the table's GIN index is built on, and `bucket_bits`: the k of its
    bucket lexemes (0: none; the index is on `tsv`); `terms`: the query's words, and `rarest`:
    the postings of its rarest word in the table (of all its words, for any word), which price
    the bucket way."""

    table: str
    q: str
    q_params: list
    scope_sql: str
    scope_params: list
    columns: str
    indexed: str = "tsv"
    bucket_bits: int = 0
    terms: int = 1
    rarest: int = 0


def _statement(query: Query, way: str, lo: int, hi: int | None, need: int, ranked: bool, rank_first: int,
               keep: int) -> tuple[str, list]:
    """The range's newest `need` matches, of which the newest `rank_first` are ranked; only the
    best `keep` of those come back (unranked: the newest `keep`), each row carrying how many
    matches the range kept (`n`) and the newest of them (`top`). Ranking and choosing happen in
    the database, so the client decodes a page's worth of rows, not every match kept."""
    rank = f"-ts_rank(tsv, {query.q})" if ranked else "0.0"
    rank_params = query.q_params if ranked else []
    t, cols, scope = query.table, query.columns, query.scope_sql
    if way == "walk":  # ORDER BY ... LIMIT: the walk stops at the `need`th match
        prefix, prefix_params = "", []
        ids = "id > ?" + (" AND id <= ?" if hi is not None else "")
        inner = f"SELECT id, {cols}, tsv FROM {t} WHERE {ids} AND tsv @@ {query.q}{scope} ORDER BY id DESC LIMIT ?"
        inner_params = [lo, *([hi] if hi is not None else []), *query.q_params, *query.scope_params, need]
    else:
        # MATERIALIZED keeps ORDER BY ... LIMIT out of the match's plan (it invites the walk);
        # "id + 0" keeps the match off the primary key (bucket: the ids are only a recheck).
        match, match_params = f"{query.indexed} @@ {query.q}", list(query.q_params)
        if way == "range":
            ids = "id > ?" + (" AND id <= ?" if hi is not None else "")
            id_params = [lo, *([hi] if hi is not None else [])]
        elif way == "bucket":
            # Any bucket from lo + 1's to hi's, or, in the first range, to the newest id's now (so
            # nothing written since the pass is missed), as a tsquery made in the database.
            bits, top = query.bucket_bits, "?::bigint" if hi is not None else f"(SELECT max(id) FROM {t})"
            # A query of no lexemes (only stopwords) AND a bucket is the bucket alone, which would
            # match every entry of it: such a query matches nothing (numnode 0), as `tsv @@` says.
            match = (f"{query.indexed} @@ ({query.q} && (SELECT string_agg('''bucket ' || b || '''', ' | ')"
                     f"::tsquery FROM generate_series((?::bigint + 1) >> {bits}, {top} >> {bits}) AS b))"
                     f" AND numnode({query.q}) > 0")
            match_params += [lo, *([hi] if hi is not None else []), *query.q_params]
            ids = "id + 0 > ?" + (" AND id + 0 <= ?" if hi is not None else "")
            id_params = [lo, *([hi] if hi is not None else [])]
        else:
            ids, id_params = ("id + 0 <= ?", [hi]) if hi is not None else ("TRUE", [])
        prefix = f"WITH m AS MATERIALIZED (SELECT id, {cols}, tsv FROM {t} WHERE {match} AND {ids}{scope}) "
        prefix_params = [*match_params, *id_params, *query.scope_params]
        inner, inner_params = "SELECT * FROM m ORDER BY id DESC LIMIT ?", [need]
    sql = (f"{prefix}SELECT id, {cols}, rank, n, top FROM (SELECT id, {cols}, "
           f"CASE WHEN pos <= ? THEN {rank} END AS rank, count(*) OVER () AS n, max(id) OVER () AS top "
           f"FROM (SELECT s.*, row_number() OVER (ORDER BY id DESC) AS pos FROM ({inner}) AS s) AS p) AS r "
           f"ORDER BY rank NULLS LAST, id DESC LIMIT ?")
    return sql, [*prefix_params, rank_first, *rank_params, *inner_params, keep]


@dataclass
class Matches:
    """What `best_matches` found: how many matches it read (at most the `want` asked for), the
    rows it keeps, the newest match's id (None without matches), and the rows of the statements
    sent with the first range (None if there were none)."""

    count: int
    rows: list
    top: int | None
    also: list | None


async def best_matches(conn, query: Query, newest: int, sampled: int, found: float, postings: int, want: int,
                       ranked: bool, keep: int, rank_first: int | None = None, also: list | None = None) -> Matches:
    """Read the newest `want` matches (fewer if there are fewer), rank the newest `rank_first` of
    them (default: all), and keep the best `keep` (lower rank first, then the newer), or,
    unranked, the newest `keep`, as rows of id, the query's columns and rank.

    `newest`: the newest id known (entries newer still are read too: the first range has no
    upper bound); `found` of the newest `sampled` entries are expected to match, in scope;
    `postings`: what the GIN match would decode in all; `also`: statements sent with the first
    range, whose rows come back in `also`."""
    rank_first = want if rank_first is None else rank_first
    rows: list = []
    also = list(also or [])
    also_rows = None
    count, top = 0, None
    hi: int | None = None  # the first range reaches past `newest`: nothing written since is missed
    read = 0
    density = found / sampled if found and sampled else 0.0
    # The GIN match alone reads every match there is: priced at a high estimate of the density
    # (three standard deviations of a count over), since a density judged from a handful of
    # entries in the pass is often a few times off (7 in 3,000 for a word in 5,569 of 1M).
    high = (found + 3 * math.sqrt(found) + 3) / sampled if sampled else 1.0
    while count < want:
        upper = newest if hi is None else hi
        if hi is not None and hi <= 0:
            break
        need = want - count
        span = min(upper, int(1.5 * need / density) + 1) if density else upper
        costs = {"walk": WALK_ENTRY * span,
                 "range": RANGE_ENTRY * span + POSTING * postings + ROW * 1.5 * need,
                 "all": POSTING * postings + OLD_ROW * high * upper}
        lo = max(upper - span, 0)
        if query.bucket_bits:
            # Whole buckets, down to the one holding lo + 1, at most MAX_BUCKETS of them (the
            # rest, if still needed, in the next range, sized from what this one found). GIN
            # iterates the buckets' entries, moving each word's list up to them, or, where the
            # rarest word holds fewer, its whole posting list, moving each bucket's: a cost that
            # grows with the buckets in one match, which the cap bounds (a density judged from
            # the pass was 2-4x low: 31 buckets took 80 ms where 8 found the 251 in 10 ms). Every
            # match in the buckets is fetched, those of the top bucket above `hi` too (a recheck
            # drops them). Priced for the whole span, at this range's cost per entry.
            bits = query.bucket_bits
            buckets_up_to = upper >> bits
            low = max((lo + 1) >> bits, buckets_up_to + 1 - MAX_BUCKETS)
            lo_bucket = (low << bits) - 1
            covered = (buckets_up_to + 1 - low) << bits
            moved = covered * query.terms if covered <= query.rarest else query.rarest * (buckets_up_to + 1 - low)
            one = POSTING * min(covered, query.rarest) + ADVANCE * moved + ROW * density * covered
            costs["bucket"] = one * max(1.0, span / covered)
        way = min(costs, key=costs.__getitem__) if span < upper else min(("walk", "all"), key=costs.__getitem__)
        lo = 0 if way == "all" else lo_bucket if way == "bucket" else lo
        statement = _statement(query, way, lo, hi, need, ranked, max(rank_first - count, 0), keep)
        results = await conn.batch([*also, statement], _SETTINGS[way])
        if also:
            also_rows, also = results[:-1], []
        got = results[-1]
        if got:
            count += int(got[0]["n"])
            top = int(got[0]["top"]) if top is None else top  # ranges go newest first
        rows += [r for r in got if r["rank"] is not None]  # beyond the ranked window: counted only
        read += upper - lo
        hi = lo
        density = count / read if count and read else density / 4
        high = (count + 3 * math.sqrt(count) + 3) / read if read else high
    if ranked:
        rows = sorted(rows, key=lambda r: (float(r["rank"]), -int(r["id"])))
    return Matches(count, rows[:keep], top, also_rows)


async def newest_matches(conn, query: Query, newest: int, sampled: int, found: float, postings: int, want: int,
                         ranked: bool, also: list | None = None) -> tuple[list, list | None]:
    """The newest `want` matches (fewer if there are fewer), all of them ranked (lower is
    better; 0.0 unranked), best first; and the rows of the statements in `also`, sent with the
    first range (None if there were none). See `best_matches`."""
    found_ = await best_matches(conn, query, newest, sampled, found, postings, want, ranked, keep=want, also=also)
    return found_.rows, found_.also
