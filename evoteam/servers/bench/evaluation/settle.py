"""When a program's runs are enough: a deterministic evaluator gives one number, and once a
code's runs are 5+ alike another run only costs time. Used by ``compare`` and by re-measurement
(report/batchruns.py, report/remeasure.py), so both stop at the same point."""

from __future__ import annotations

from evoteam import stats
from evoteam.servers.bench.models import BASELINE_ID
from evoteam.servers.knowledge.store import KnowledgeStore


def settled(earlier: list[float], now: list) -> bool:
    """Whether a program's runs (``now``, evaluations), with those its code made before
    (``earlier``, scores), are enough and every one alike (stats.every_run_alike, as the store
    calls a score exact): more give the same number again."""
    return all(e.status == "PASSED" and e.score is not None for e in now) and \
        every_alike(earlier, [e.score for e in now])


def every_alike(earlier: list[float], scores: list[float]) -> bool:
    """Whether passing runs' scores, with the earlier ones, are enough and every one alike."""
    return stats.every_run_alike({"program": list(earlier) + list(scores)})


async def earlier_runs(store: KnowledgeStore | None, candidate_id: str | None, kit) -> list[float]:
    """A recorded program candidate's dev runs, pooled by the store: only the bench's own
    measurements (verified, not flagged) of this kit as it is now (its content hash), of a
    candidate that passes. None for the kit's baseline, an unrecorded code, a held-out record, a
    candidate of another kit or of the kit's older content, one that failed a run (its passing
    runs alike would hide the failure), or one whose runs anyone could have written: a client
    may record a candidate with samples of its choosing, and five made-up runs alike would have
    made its code "settled" without running it once."""
    if store is None or not candidate_id or candidate_id == BASELINE_ID:
        return []
    c = await store.get_candidate(candidate_id)
    metrics = c.metrics or {}
    if not c.verified or c.flagged or c.status != "PASSED" or c.split != "dev" \
            or metrics.get("kit") != kit.name or metrics.get("kit_hash") not in (None, kit.content_hash):
        return []
    return list((c.samples or {}).get("program") or [])
