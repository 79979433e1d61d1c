"""Verified versus self-reported scores.

Only the bench measures a candidate; any other writer (an agent's `record_candidate`, a script
on the store endpoint, an imported export) only *claims* a score. A candidate row says which
(`verified`), and every ranking — a run's best, `best_candidates`, the trajectory's best so far,
and everything built on them (hooks, supervisor, reports) — counts only verified, unflagged,
passing candidates. Self-reported candidates stay visible (list, get, search) but never rank.

Who may write `verified=True`: an actor with the `verifier` capability. The in-process bench has
it; over HTTP it comes only from a token made with `evoteam token add --verifier`.
"""

from __future__ import annotations

from evoteam.servers.knowledge.migrations import register_migrations
from evoteam.servers.knowledge.errors import Forbidden
# The SQL condition of a candidate that may rank, kept with the other read SQL (readsql.py).
from evoteam.servers.knowledge.readsql import COMPARISON, RANKED  # noqa: F401 - re-exported

register_migrations("knowledge.verified", [
    """
    ALTER TABLE candidates ADD COLUMN verified INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE tokens ADD COLUMN verifier INTEGER NOT NULL DEFAULT 0;
    CREATE INDEX candidates_ranked ON candidates(run_id, verified, flagged, status, score);
    """,
    # Who cleared a flagged result after looking at it (`evoteam kb review`), and when.
    """
    ALTER TABLE candidates ADD COLUMN reviewed_by TEXT;
    ALTER TABLE candidates ADD COLUMN reviewed_at TEXT;
    """,
    # Rankings order by spread_unknown first (readsql.rank_order): the index that gave the order of
    # rank_score alone made every best a sort of the whole run (about 100x slower at 40k candidates,
    # both backends; review 2026-12-04). One index per direction (maximising orders rank_score
    # descending after spread_unknown ascending, which no scan of the other index gives), holding
    # every equality of readsql.RANKED (here: this component's columns; knowledge.measurements, whose
    # columns it also holds, migrates first): without them SQLite, which keeps no statistics here, read a
    # run's best through candidates_ranked and sorted the run (37 ms at 40k; 0.01 ms with them).
    """
    DROP INDEX candidates_rank;
    CREATE INDEX candidates_rank_min ON candidates(run_id, status, verified, flagged, spread_unknown, rank_score);
    CREATE INDEX candidates_rank_max ON candidates(run_id, status, verified, flagged, spread_unknown, rank_score DESC);
    """,
])


def check_may_verify(verified: bool, actor_is_verifier: bool) -> None:
    """Refuse a verified score from anyone but the bench (or a verifier token)."""
    if verified and not actor_is_verifier:
        raise Forbidden("only the bench records verified scores: evaluate the candidate with bench.evaluate, "
                        "or record it without verified (it is then listed but never ranked)")


# The artifact kind of a re-measurement's set (report/remeasure.py): a team version's gain on a busy
# machine is decided by it (report/data.py), so like a verified score only the bench writes one.
MEASUREMENT_SET = "measurement_set"
# Paired rounds of two of a run's candidates, from bench.compare or a re-measurement's batch
# (knowledge/comparisons.py): pooled, they decide a version's gain, so they too are the bench's.
_BENCH_KINDS = {MEASUREMENT_SET: "bench.remeasure", COMPARISON: "bench.compare"}


def imported_kind(kind: str, trusted: bool) -> str:
    """An imported artifact's kind: a bench kind from a bundle the importer does not vouch for is
    kept as a claim (``claimed_<kind>``), which nothing reads as the bench's, like its scores."""
    return kind if trusted or kind not in _BENCH_KINDS else f"claimed_{kind}"


def check_may_store(kind: str, actor_is_verifier: bool) -> None:
    """Refuse a measurement set or a comparison from anyone but the bench (or a verifier token)."""
    if kind in _BENCH_KINDS and not actor_is_verifier:
        raise Forbidden(f"only the bench stores artifacts of kind {kind!r}: run {_BENCH_KINDS[kind]}, or "
                        "store it under another kind")


def ranks(status: str, score: float | None, verified: bool, flagged: bool) -> bool:
    """The Python twin of RANKED, for views that walk rows themselves (trajectory)."""
    return status == "PASSED" and score is not None and verified and not flagged



async def accept_flagged(db, candidate_id: str, reviewer: str) -> None:
    """A person looked at a flagged result and vouches for it: it may rank from now on.
    Local only (the CLI on the store's host), never a tool or a store-endpoint method."""
    from datetime import UTC, datetime

    from evoteam.servers.knowledge.errors import Invalid, NotFound

    async with db.write() as conn:
        async with conn.execute("SELECT flagged, verified FROM candidates WHERE id = ?", (candidate_id,)) as cur:
            row = await cur.fetchone()
        if row is None:
            raise NotFound(f"no candidate {candidate_id!r}: `evoteam kb review RUN_ID` lists the flagged ones")
        if not row["flagged"]:
            raise Invalid(f"{candidate_id} is not flagged; nothing to review")
        if not row["verified"]:
            raise Invalid(f"{candidate_id} was not measured by the bench; a review cannot make a claim verified")
        await conn.execute("UPDATE candidates SET flagged = 0, reviewed_by = ?, reviewed_at = ? WHERE id = ?",
                           (reviewer, datetime.now(UTC).isoformat(), candidate_id))
