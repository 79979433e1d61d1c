"""Which of a run's candidates the kept paired rounds find best, where they decide over intervals.

Every ranking reads each candidate's interval (its pessimistic end); paired rounds of two, from
compares and re-measurements, say which of them is faster side by side. On a busy machine, or
after two quiet measurements that disagree, a faster kernel can keep a wider interval and rank
below. `run_report` takes the best before each team version by the paired rounds and says where
they find a candidate better than the run's top by intervals; ``get_run`` (the tool), the role
briefs and the hooks' summary say it too, as ``Run.paired_best``: a brief said "Best so far: A"
to a team whose compare had found B faster than A, significantly, and the roles aimed at A."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from evoteam import stats
from evoteam.passingstyle import dps_over_returning, within_share
from evoteam.servers.knowledge.comparisons import dev_comparisons, paired_verdict
from evoteam.servers.knowledge.errors import NotFound, StoreError
from evoteam.servers.knowledge.measurements import rank_key
from evoteam.servers.knowledge.models import Run
from evoteam.servers.knowledge.standing import BASELINE
from evoteam.servers.knowledge.store import KnowledgeStore
from evoteam.servers.knowledge.verified import ranks

log = logging.getLogger(__name__)


def _top(ranked: list[str], records: list, direction: str, codes: Mapping[str, str | None]) -> str | None:
    """paired_top's walk, with each candidate's code at hand (``codes``; one absent passes no style)."""

    def beats(winner: str, loser: str) -> bool:
        found = paired_verdict(records, loser, winner)
        if found is None or not found.decides or not found.significant \
                or not stats.favours_b(found.estimate[0], found.kind, direction):
            return False
        return not (found.kind == "kernel" and within_share(found.estimate[1])
                    and dps_over_returning(codes.get(winner), codes.get(loser)))

    top, seen, moved = ranked[0], [ranked[0]], True
    while moved:
        moved = False
        for c in ranked:
            if c in seen or not beats(c, top):
                continue
            # Verdicts in a circle (B > A, C > B, A > C) name no best: the top by intervals stays (review).
            if any(s != top and beats(s, c) for s in seen):
                return ranked[0]
            top, moved = c, True
            seen.append(c)
            break
    return top


async def paired_top(store: KnowledgeStore | None, ranked: list[str], records: list, direction: str,
                     codes: dict[str, str | None] | None = None) -> str | None:
    """The first of ``ranked`` (best first by intervals), or the one the kept paired rounds find
    better than it, followed as far as they go: v3's gain was read over the best before it by
    intervals, which a v2 kernel had beaten side by side, significantly (mp64; on a busy machine a
    wider interval keeps a faster kernel below). A lead of destination passing style's share alone
    over one returning its outputs is no better kernel. Each verdict is read at 95%, as compare's
    (a comparison named beforehand) and the trajectory's are. ``codes``: the candidates' code where
    the caller has read it (the others are read from ``store`` and added to it). The verdicts are
    bootstraps: they run off the event loop (a re-measurement of many finalists made the next read
    hold it ~1-3 s)."""
    # Only a candidate in a kept pair can beat another: a run of many thousands has few pairs.
    involved = {i for r in records for i in (r.a_candidate_id, r.b_candidate_id)}
    if not ranked or ranked[0] not in involved:
        return ranked[0] if ranked else None
    ranked = [ranked[0]] + [c for c in ranked[1:] if c in involved]
    codes = {} if codes is None else codes  # the caller's, filled in: read once across calls
    for cid in ranked:
        if cid not in codes and store is not None:
            codes[cid] = (await store.get_candidate(cid)).code
    return await asyncio.to_thread(_top, ranked, records, direction, codes)


async def with_paired_best(store: KnowledgeStore, run: Run) -> Run:
    """``run`` with ``paired_best`` set where the run's kept paired rounds on the dev split find a
    candidate better than its best by intervals (paired_top), else with ``best_within_noise_of`` where
    that best is within noise of the last new best (_with_tie). Its best stays the top by intervals,
    as every listing ranks; a read that fails leaves the run as it was (what it shows is news, never
    a condition of the reply)."""
    if not run.best_candidate_id:
        return run
    paired = await _with_paired(store, run)
    # The tie only where no paired best is said instead (a trajectory read less; review rev80).
    return paired if paired.paired_best else await _with_tie(store, run)


async def _with_paired(store: KnowledgeStore, run: Run) -> Run:
    """with_paired_best's paired half."""
    try:
        records = await dev_comparisons(store, run.id, run.kit)
        involved = {i for r in records for i in (r.a_candidate_id, r.b_candidate_id)}
        if run.best_candidate_id not in involved:
            return run
        keyed, codes = [], {}
        for cid in involved - {BASELINE}:
            try:
                c = await store.get_candidate(cid)
            except NotFound:  # one gone, or of another project: it ranks nowhere
                continue
            codes[cid] = c.code
            key = rank_key(c.rank_score, c.score, c.score_interval, run.direction, c.runs is not None) \
                if ranks(c.status, c.score, c.verified, c.flagged) and c.split == "dev" else None
            if key is not None and cid != run.best_candidate_id:
                # As the store ranks (readsql.rank_order): ties go to the earlier, as in run_report.
                keyed.append(((-key[0], -key[1], c.provenance.created_at, cid), cid))
        ranked = [run.best_candidate_id] + [cid for _, cid in sorted(keyed)]
        top = await paired_top(store, ranked, records, run.direction, codes)
    except StoreError:  # see the docstring
        log.warning("the paired rounds of run %s were not read", run.id, exc_info=True)
        return run
    return run.model_copy(update={"paired_best": top}) if top and top != run.best_candidate_id else run


async def _with_tie(store: KnowledgeStore, run: Run) -> Run:
    """``run`` with ``best_within_noise_of`` set where its best leads the ranking without being a new
    best: get_run named a 3.50 best, ranked first by its interval's low end, beside a 3.62 one it was
    within noise of, and a version's "best" read as a gain (mp82). The trajectory's words, read once."""
    try:
        points = (await store.trajectory(run.id)).points
    except StoreError:  # see with_paired_best
        log.warning("the trajectory of run %s was not read", run.id, exc_info=True)
        return run
    point = next((p for p in points if p.candidate_id == run.best_candidate_id), None)
    tied = point.within_noise_of if point is not None and not point.new_best else None
    # Only the last one announced: a leader before it, never a new best (a run with none past x0),
    # said as "the last new best" read as progress (review rev80).
    last_new = next((p.candidate_id for p in reversed(points) if p.new_best), None)
    if not tied or tied != last_new or tied == run.best_candidate_id:
        return run
    return run.model_copy(update={"best_within_noise_of": tied})


def describe_best(run: Run) -> str:
    """The run's best as a summary says it: its score with the interval, the candidate, leads from
    too few runs and the paired best (``run`` from with_paired_best). The headless supervisor's wake
    said "Best score: 4.35123" with no interval, no candidate and no compare's verdict."""
    return (f"{stats.describe_score(run.best_score, run.best_interval, runs=run.best_runs, exact=run.best_exact)} "
            f"(candidate {run.best_candidate_id or 'none'}){stats.describe_leads(run.leads_from_too_few_runs)}"
            f"{paired_best_clause(run)}")


def paired_best_clause(run: Run) -> str:
    """Said after the run's best (candidate and score) where the run's compares find another better,
    or where it is within noise of the last new best (one result with it)."""
    if not run.paired_best:
        return tie_clause(run.best_within_noise_of)
    return (f"; the run's compares (bench.compare, bench.remeasure) find {run.paired_best} better than it: "
            f"{run.paired_best} is the one to beat and to crown, though it ranks below by intervals")


def tie_clause(tied: str | None) -> str:
    """Run.best_within_noise_of, said after the run's best."""
    # No compare advised: their paired rounds may have found no difference already, or the two be
    # apart by output style alone or twins, where a compare tells nothing (review rev80).
    return f"; not told apart from {tied}, the last new best: the two are one result" if tied else ""
