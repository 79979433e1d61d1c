"""Where a recorded evaluation leaves its candidate in the run: a new best, within noise of the
run's best, or below it, in one line of `bench.evaluate`'s reply.

The store decides it (knowledge/standing.py, the rule of `knowledge.trajectory`); the bench only
reads it back. Said in the reply because a model that evaluated a candidate otherwise compared
the bare score with the last best it remembered, the maximum of noisy draws the rankings never
take (model-play mp45, 2026-12-06: "an evaluation does not say new best yes or no").
"""

from __future__ import annotations

from evoteam import stats
from evoteam.servers.knowledge.errors import StoreError
from evoteam.servers.knowledge.models import Candidate, Trajectory, TrajectoryPoint
from evoteam.servers.knowledge.store import KnowledgeStore


async def run_standing(store: KnowledgeStore, saved: Candidate, kind: str) -> str | None:
    """One line on the recorded candidate against the run's best dev candidate, or None where it
    does not rank (held-out, failed, flagged, unverified) or the store cannot say."""
    if saved.split != "dev" or saved.status != "PASSED" or saved.flagged or not saved.verified:
        return None
    try:
        trajectory = await store.trajectory(saved.run_id)
    except StoreError:  # recorded already: a store that cannot say (gone, busy) costs the line, not the result
        return None
    return standing_line(trajectory, saved.id, "×" if kind == "kernel" else "", again=saved.n_measurements > 1)


def standing_line(trajectory: Trajectory, candidate_id: str, unit: str = "", again: bool = False) -> str | None:
    """The trajectory's verdict on ``candidate_id`` while the best it was judged against is still the
    run's best; else (measured again after others took the lead) the best, to compare by id.
    ``again``: the candidate was measured before (its lead is not news)."""
    points = {p.candidate_id: p for p in trajectory.points}
    point = points.get(candidate_id)
    if point is None or not trajectory.points:
        return None
    best_id = trajectory.points[-1].best_so_far_id
    if best_id is None:
        return None
    best = points.get(best_id)
    best_text = f"{best_id} at {stats.describe_score(best.score, best.score_interval, unit)}" if best else best_id
    if point.best_so_far_id != best_id:  # its point was judged against an earlier best
        return (f"not the run's best: that is {best_text}; bench.compare the two by id to tell them apart "
                "(the trajectory ranks by each interval's pessimistic end)")
    first = not any(p.new_best for p in trajectory.points[:trajectory.points.index(point)])
    return _verdict(point, best_id == candidate_id, best_text, first, again)


def _verdict(point: TrajectoryPoint, leads: bool, best_text: str, first: bool, again: bool) -> str:
    how = f" (by their {point.decided_by})" if point.decided_by else ""
    if leads:
        if point.new_best:
            cleared = "x0, the run's starting score" if first else "the run's earlier best"
            head = "still the run's best" if again else "new best of the run"
            return f"{head}: beyond noise of {cleared}{how}"
        if point.within_noise_of == "x0":
            return (f"leads the run's ranking but is not a new best: within noise of x0, the run's starting score"
                    f"{how} (bench.compare it with a_candidate_id \"baseline\" to tell them apart)")
        if point.within_noise_of:
            return (f"leads the run's ranking but is not a new best: within noise of {point.within_noise_of}{how}; "
                    "it is progress only once their paired rounds find it better (bench.compare the two by id)")
        if point.too_few_runs:
            return "leads the run's ranking, but from too few runs to be told apart from the last new best"
        return "leads the run's ranking"
    if point.better_than:
        return (f"ranks below the run's best {best_text} by its wider interval, though their paired rounds "
                "find it better: bench.remeasure the two")
    for said, what in ((point.worse_than, "below"), (point.within_noise_of, "within noise of")):
        if said:
            target = "x0, the run's starting score" if said == "x0" else f"the run's best {best_text}"
            return f"not a new best: {what} {target}{how}"
    if point.too_few_runs:
        return f"not told apart from the run's best {best_text}: too few runs"
    return f"not a new best: the run's best is {best_text}"
