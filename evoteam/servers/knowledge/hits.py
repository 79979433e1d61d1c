"""One page of search hits that serves a second engineer.

- Kinds take turns: the best learning, the best candidate note, the best artifact and the best
  history entry come first, then the second best of each, and so on. A run records many more
  candidates (one per evaluation) than learnings, and bm25 alone let a flood of similar
  candidate notes push the one learning that explains them off the first page.
- Every hit names its owner (who wrote it) beside its run, so a reader can tell their own work
  from a colleague's and knows whom to ask.
"""

from __future__ import annotations

import aiosqlite

from evoteam.servers.knowledge.models import SearchHit

TABLES = {"learning": "learnings", "candidate": "candidates", "artifact": "artifacts", "history": "history"}
SNIPPET = "snippet(search_index, 1, '[', ']', '…', 16)"


async def hits_page(conn: aiosqlite.Connection, match: str, newest_first: int, rank: str, ranked: bool,
                    limit: int, offset: int) -> list[SearchHit]:
    """The hits at [offset, offset+limit) of a search: kinds in turn by `rank` when `ranked`,
    else newest first. Snippets are made only for the page."""
    if ranked:
        async with conn.execute(
            f"SELECT rid FROM (SELECT rowid AS rid, kind, {rank} AS rank FROM search_index "
            f"WHERE search_index MATCH ? AND rowid >= ?) "
            f"ORDER BY row_number() OVER (PARTITION BY kind ORDER BY rank, rid DESC), rank, rid DESC "
            f"LIMIT ? OFFSET ?", (match, newest_first, limit, offset)) as cur:
            order = [r[0] for r in await cur.fetchall()]
        if not order:
            return []
        marks = ", ".join("?" for _ in order)
        async with conn.execute(
            f"SELECT rowid AS rid, kind, ref_id, run_id, title, {SNIPPET} AS snip, {rank} AS rank FROM search_index "
            f"WHERE search_index MATCH ? AND rowid IN ({marks})", (match, *order)) as cur:
            rows = {r["rid"]: r for r in await cur.fetchall()}
        picked = [rows[rid] for rid in order if rid in rows]
    else:
        async with conn.execute(
            f"SELECT kind, ref_id, run_id, title, {SNIPPET} AS snip, 0.0 AS rank FROM search_index "
            f"WHERE search_index MATCH ? AND rowid >= ? ORDER BY rowid DESC LIMIT ? OFFSET ?",
            (match, newest_first, limit, offset)) as cur:
            picked = await cur.fetchall()
    owners = await _owners(conn, [(r["kind"], r["ref_id"]) for r in picked])
    return [SearchHit(kind=r["kind"], id=r["ref_id"], run_id=r["run_id"], title=r["title"], snippet=r["snip"],
                      rank=r["rank"], owner=owners.get(r["ref_id"])) for r in picked]


async def _owners(conn: aiosqlite.Connection, refs: list[tuple[str, str]]) -> dict[str, str]:
    found: dict[str, str] = {}
    for kind, table in TABLES.items():
        ids = [ref for k, ref in refs if k == kind]
        if not ids:
            continue
        marks = ", ".join("?" for _ in ids)
        async with conn.execute(f"SELECT id, user FROM {table} WHERE id IN ({marks})", ids) as cur:
            found.update({r["id"]: r["user"] for r in await cur.fetchall()})
    return found
