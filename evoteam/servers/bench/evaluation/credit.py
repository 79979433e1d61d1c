"""Outcome credit for the retrieved documents a candidate was built from (`documents_used`): each
gets the candidate's realised score and whether it beat its parent beyond noise, so the retrieval
gate's look-ups rank documents by what actually helped."""

from __future__ import annotations

from evoteam import stats
from evoteam.servers.knowledge.measurements import candidate_estimate
from evoteam.servers.knowledge.store import KnowledgeStore


async def credit_documents_used(store: KnowledgeStore, run_id: str, candidate_id: str, documents: list[str],
                            score: float, parent_id: str | None, method: int | None, split: str = "dev",
                            interval: list[float] | None = None, runs: int = 1, contended: bool = False) -> None:
    """Outcome credit: the retrieved documents this candidate was built from get its realised
    score (and whether it beat its parent beyond noise), so later look-ups rank by what actually
    helped (by the two scores alone, a copy of its parent was credited as an improvement about half
    the time, and the gate then looked those documents up as ones that had helped; review 2026-12-04)."""
    from evoteam.servers.retrieval.core import credit_documents

    parent = await store.get_candidate(parent_id) if parent_id else None
    # A parent's self-reported score is a claim: only a measured one is a baseline for credit;
    # and only one timed the same way (a parent from a run of an earlier timing method is not).
    # Nor one measured on other workloads (a held-out check names the dev candidate it checks).
    comparable = parent is not None and parent.split == split and \
        (method is None or (parent.metrics.get("timing_method") or 1) == method)
    parent_score = parent.score if comparable and parent.verified and not parent.flagged else None
    improved = None  # left to the two scores where either is a point of unknown spread
    if parent_score is not None and interval and parent.score_interval:
        own = stats.Estimate(score, interval[0], interval[1], runs)
        before = candidate_estimate(parent)  # its runs, and what an interval of a program's few covers
        busy = contended or bool(parent.contended_measurements)  # intervals a busy machine moves: not a gain
        if busy or not (stats.spread_unknown(own) or before is None or stats.spread_unknown(before)):
            improved = not busy and stats.clears(own, before, (await store.get_run(run_id)).direction)
    await credit_documents(store, run_id, documents, score, parent_score, candidate_id=candidate_id,
                           improved=improved)
