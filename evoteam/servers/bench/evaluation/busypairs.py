"""A busy kernel evaluation's paired rounds with the baseline, kept in its run.

On a busy machine a kernel's score counts against x0 widened 3x each way (separate evaluations
move by more than their intervals), and its paired rounds with the baseline decide where that
leaves it open (knowledge/standing.py). An evaluation's rounds are such rounds: each times the
candidate and the baseline on the same inputs. Kept as a compare of the two would be, they place
it; the texts once sent a model to bench.compare it with the baseline for rounds of the same kind,
which it read as a contradiction and paid 14-23 s for (mp56, mp57).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from evoteam.servers.bench.evaluation.binding import timing_method
from evoteam.servers.bench.formats.kit import Kit
from evoteam.servers.bench.models import BASELINE_ID, Evaluation
from evoteam.servers.knowledge.comparisons import keep_comparison, paired_verdict, record_of
from evoteam.servers.knowledge.standing import x0_is_baseline
from evoteam.servers.knowledge.store import KnowledgeStore

log = logging.getLogger(__name__)


async def keep_busy_pairs(store: KnowledgeStore, kit: Kit, run_id: str, candidate_id: str,
                          result: Evaluation) -> bool:
    """A busy kernel evaluation's paired rounds with the baseline, kept in its run as a compare of
    the two would be: its score counts against x0 widened for the load, and the texts sent a model
    to compare it with the baseline for the same kind of rounds it had just been given ("beyond
    noise in these paired rounds", then "bench.compare it with the baseline"; mp56). Where x0 is
    the baseline's own speedup (knowledge/standing.py reads them there only), from one process a
    side (copies' intervals hold their processes' spread, which the rounds alone do not). True where
    kept with a full 95% interval, so that they decide."""
    if kit.manifest.kind != "kernel" or not result.samples or result.metrics.get("processes_per_side", 1) != 1:
        return False
    try:
        if not x0_is_baseline((await store.get_run(run_id)).x0):
            return False
        ranges = {k: r for k, r in result.sample_ranges.items() if k in result.samples} or None
        record = record_of(BASELINE_ID, candidate_id, kit=kit.name, split="dev", kind="kernel", samples=result.samples,
                           ranges=ranges, contended=True, measured_at=datetime.now(UTC), kit_hash=kit.content_hash,
                           timing_method=timing_method(result))
        if refused := await keep_comparison(store, run_id, record):
            log.warning("busy rounds of %s not kept: %s", candidate_id, refused)
            return False
        found = paired_verdict([record], BASELINE_ID, candidate_id)
        return found is not None and found.decides
    except Exception:  # noqa: BLE001 - recorded already: a keep that fails costs this placing, never the result
        log.warning("busy rounds of %s not kept", candidate_id, exc_info=True)
        return False
