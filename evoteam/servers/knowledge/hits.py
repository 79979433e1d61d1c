"""One page of search hits that serves a second engineer.

- Kinds take turns: among the best 50 matches, the best learning, the best candidate note, the
  best artifact and the best history entry come first, then the second best of each, and so
  on (then the rest by rank). A run records many more
  candidates (one per evaluation) than learnings, and bm25 alone let a flood of similar
  candidate notes push the one learning that explains them off the first page.
- Every hit names its owner (who wrote it) beside its run, so a reader can tell their own work
  from a colleague's and knows whom to ask.
"""

from __future__ import annotations

import aiosqlite

from evoteam.stats import describe_listed


def candidate_title(status: str, score: float | None, lo: float | None, hi: float | None,
                    flagged: bool = False, spread_unknown: bool | None = None) -> str:
    """A candidate's title in search hits: "candidate PASSED score 15.1 (13–17.2)", rounded as
    people read scores (it was the raw float, without its interval)."""
    shown = describe_listed(score, [lo, hi] if lo is not None and hi is not None else None, None,
                            spread_unknown=spread_unknown)
    return f"candidate {status}{' (flagged: does not rank)' if flagged else ''} score {shown}"


# A candidate's title as it stands now: the index keeps the title it was first recorded with, and
# measurements pooled into it since (a failed one, more rounds, a flag) change its status and score.
CANDIDATES_NOW = ("SELECT id, status, score, score_lo, score_hi, flagged, spread_unknown FROM candidates "
                  "WHERE id IN ({})")


def titles_now(rows) -> dict[str, str]:
    """Each candidate row's current title (CANDIDATES_NOW's rows)."""
    return {r["id"]: candidate_title(r["status"], r["score"], r["score_lo"], r["score_hi"], bool(r["flagged"]),
                                     bool(r["spread_unknown"])) for r in rows}


def learning_title(kind: str, tags: list[str], text: str) -> str:
    """A learning's title in search hits: its kind and tags, or the start of its text where it has
    no tags ("technique: " alone said nothing)."""
    rest = " ".join(tags) or " ".join(text.split())[:80]
    return f"{kind}: {rest}" if rest else kind

from evoteam.servers.knowledge.models import SearchHit

TABLES = {"learning": "learnings", "candidate": "candidates", "artifact": "artifacts", "history": "history"}
# The best this many matches of a ranked search are shown with kinds in turn.
TURN_WINDOW = 50
SNIPPET = "snippet(search_index, 1, '[', ']', '…', 16)"


async def hits_page(conn: aiosqlite.Connection, match: str, newest_first: int, rank: str, ranked: bool,
                    limit: int, offset: int) -> list[SearchHit]:
    """The hits at [offset, offset+limit) of a search: ranked with kinds in turn when `ranked`,
    else newest first."""
    select = f"SELECT kind, ref_id, run_id, title, {SNIPPET} AS snip, {rank} AS rank FROM search_index "
    if ranked:
        # The best TURN_WINDOW matches by rank, kinds in turn; after them, the rest by rank. One
        # ranked query, as before: the window is fixed, so pages never overlap or skip.
        async with conn.execute(select + "WHERE search_index MATCH ? AND rowid >= ? ORDER BY rank LIMIT ?",
                                (match, newest_first, max(TURN_WINDOW, offset + limit))) as cur:
            rows = await cur.fetchall()
        picked = (in_turns(rows[:TURN_WINDOW]) + list(rows[TURN_WINDOW:]))[offset:offset + limit]
    else:
        async with conn.execute(select + "WHERE search_index MATCH ? AND rowid >= ? ORDER BY rowid DESC "
                                "LIMIT ? OFFSET ?", (match, newest_first, limit, offset)) as cur:
            picked = await cur.fetchall()
    owners_by_id = await owners(conn, [(r["kind"], r["ref_id"]) for r in picked])
    now: dict[str, str] = {}
    if cands := [r["ref_id"] for r in picked if r["kind"] == "candidate"]:
        async with conn.execute(CANDIDATES_NOW.format(", ".join("?" for _ in cands)), cands) as cur:
            now = titles_now(await cur.fetchall())
    return [SearchHit(kind=r["kind"], id=r["ref_id"], run_id=r["run_id"], snippet=r["snip"], rank=r["rank"],
                      title=with_successor(now.get(r["ref_id"], r["title"]), successor), owner=user)
            for r in picked for user, successor in [owners_by_id.get(r["ref_id"], (None, None))]]


def in_turns(rows: list) -> list:
    """Rows (best first) reordered so kinds take turns: each kind's best, then each kind's
    second, ...; within a turn, the better rank first."""
    columns: dict[str, list] = {}
    for row in rows:
        columns.setdefault(row["kind"], []).append(row)
    depth = max((len(c) for c in columns.values()), default=0)
    return [row for i in range(depth) for row in sorted((c[i] for c in columns.values() if i < len(c)),
                                                         key=lambda r: r["rank"])]


def superseded_column(table: str) -> str:
    """What the owners query reads of a hit besides its writer: a learning's successor, if any."""
    return "superseded_by" if table == "learnings" else "CAST(NULL AS TEXT)"


def with_successor(title: str, superseded_by: str | None) -> str:
    """A hit's title, saying where a learning was superseded: a retracted dead end came back as the
    top hit of a search with nothing to say so (model-play 2026-12-04)."""
    return f"{title} (superseded by {superseded_by})" if superseded_by else title


async def owners(conn: aiosqlite.Connection, refs: list[tuple[str, str]]) -> dict[str, tuple[str, str | None]]:
    """Who wrote each hit, and a learning's successor: one query over the tables the page's kinds live in."""
    parts, params = [], []
    for kind, table in TABLES.items():
        ids = [ref for k, ref in refs if k == kind]
        if ids:
            parts.append(f"SELECT id, user, {superseded_column(table)} AS superseded_by FROM {table} "
                         f"WHERE id IN ({', '.join('?' for _ in ids)})")
            params += ids
    if not parts:
        return {}
    async with conn.execute(" UNION ALL ".join(parts), params) as cur:
        return {r["id"]: (r["user"], r["superseded_by"]) for r in await cur.fetchall()}
