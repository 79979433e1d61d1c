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
(right for rare words, whose range would be most of the table).

Each range is one round trip: BEGIN, the `SET LOCAL`s that keep the planner to the way chosen,
the (prepared) statement and COMMIT, pipelined (pg.py `batch`).
"""

from __future__ import annotations

from dataclasses import dataclass

# What each way of reading costs, per item, relative to one another (EXPLAIN ANALYZE at 100k and
# 1M learnings): testing one entry of a walked range; one entry of a range's id bitmap; one
# decoded GIN posting; one matching row fetched from the table (a page visit of its own).
WALK_ENTRY, RANGE_ENTRY, POSTING, ROW = 1.5, 0.3, 0.5, 8.0

# The planner costs a tsvector test as cheap as comparing two numbers, so it walks a range even
# where the walk tests ten times the entries the GIN match would find (38k entries, 130 ms
# against 13 ms at 100k learnings), and takes GIN where its posting lists hold 400k entries
# (300 ms at 1M). The way is chosen here; the others are off for that statement only. Custom
# plans always: a generic plan of a prepared statement knows neither the range's size nor the
# words' frequencies.
_SETTINGS = {"walk": ("enable_bitmapscan = off", "plan_cache_mode = force_custom_plan"),
             "range": ("enable_indexscan = off", "plan_cache_mode = force_custom_plan"),
             "all": ("enable_indexscan = off", "plan_cache_mode = force_custom_plan")}


@dataclass
class Query:
    """What to match in `table`: the tsquery expression and its parameters, the scope's
    conditions (" AND ...") and theirs, and the columns each match returns beside id and rank."""

    table: str
    q: str
    q_params: list
    scope_sql: str
    scope_params: list
    columns: str


def _statement(query: Query, way: str, lo: int, hi: int | None, need: int, ranked: bool) -> tuple[str, list]:
    rank = f"-ts_rank(tsv, {query.q})" if ranked else "0.0"
    rank_params = query.q_params if ranked else []
    t, cols, scope = query.table, query.columns, query.scope_sql
    if way == "walk":  # ORDER BY ... LIMIT: the walk stops at the `need`th match
        ids = "id > ?" + (" AND id <= ?" if hi is not None else "")
        sql = (f"SELECT id, {cols}, {rank} AS rank FROM {t} WHERE {ids} AND tsv @@ {query.q}{scope} "
               f"ORDER BY id DESC LIMIT ?")
        return sql, [*rank_params, lo, *([hi] if hi is not None else []), *query.q_params, *query.scope_params, need]
    # MATERIALIZED keeps ORDER BY ... LIMIT out of the match's plan (it invites the walk);
    # "id + 0" keeps the whole table's match off the primary key. Only the newest `need` of the
    # matches read are ranked (the GIN match alone may read several times as many).
    if way == "range":
        ids, id_params = "id > ?" + (" AND id <= ?" if hi is not None else ""), [lo, *([hi] if hi is not None else [])]
    else:
        ids, id_params = ("id + 0 <= ?", [hi]) if hi is not None else ("TRUE", [])
    sql = (f"WITH m AS MATERIALIZED (SELECT id, {cols}, tsv FROM {t} WHERE tsv @@ {query.q} AND {ids}{scope}) "
           f"SELECT id, {cols}, {rank} AS rank FROM (SELECT * FROM m ORDER BY id DESC LIMIT ?) AS newest "
           f"ORDER BY id DESC")
    return sql, [*query.q_params, *id_params, *query.scope_params, *rank_params, need]


async def newest_matches(conn, query: Query, newest: int, sampled: int, found: float, postings: int, want: int,
                         ranked: bool, also: list | None = None) -> tuple[list, list | None]:
    """The newest `want` matches (fewer if there are fewer), newest first, as rows of id, the
    query's columns and rank (lower is better; 0.0 unranked); and the rows of the statements in
    `also`, sent with the first range (None if there were none).

    `newest`: the newest id known (entries newer still are read too: the first range has no
    upper bound); `found` of the newest `sampled` entries are expected to match, in scope;
    `postings`: what the GIN match would decode in all."""
    out: list = []
    also = list(also or [])
    also_rows = None
    hi: int | None = None  # the first range reaches past `newest`: nothing written since is missed
    read = 0
    density = found / sampled if found and sampled else 0.0
    while len(out) < want:
        upper = newest if hi is None else hi
        if hi is not None and hi <= 0:
            break
        need = want - len(out)
        span = min(upper, int(1.5 * need / density) + 1) if density else upper
        costs = {"walk": WALK_ENTRY * span,
                 "range": RANGE_ENTRY * span + POSTING * postings + ROW * 1.5 * need,
                 "all": POSTING * postings + ROW * density * upper}
        way = min(costs, key=costs.__getitem__) if span < upper else min(("walk", "all"), key=costs.__getitem__)
        lo = 0 if way == "all" else max(upper - span, 0)
        results = await conn.batch([*also, _statement(query, way, lo, hi, need, ranked)], _SETTINGS[way])
        if also:
            also_rows, also = results[:-1], []
        out += results[-1]
        read += upper - lo
        hi = lo
        density = len(out) / read if out and read else density / 4
    return out, also_rows
