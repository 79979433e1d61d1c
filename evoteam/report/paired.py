"""Which of a run's candidates is the best by kept paired rounds, where they decide over intervals.

The ranking reads each candidate's interval (its pessimistic end); paired rounds of two, from
compares and re-measurements, say which of them is faster side by side. On a busy machine, or
after two quiet measurements that disagree, a faster kernel can keep a wider interval and rank
below: `run_report` takes the best before each team version by the paired rounds (data.py), and
says where they find a candidate better than the run's interval top (summary.py)."""

from __future__ import annotations

from evoteam import stats
from evoteam.passingstyle import within_share
from evoteam.report.styles import dps_over_returning
from evoteam.servers.knowledge.comparisons import paired_verdict
from evoteam.servers.knowledge.store import KnowledgeStore


async def paired_top(store: KnowledgeStore, ranked: list[str], records: list, direction: str) -> str | None:
    """The first of ``ranked`` (best first by intervals), or the one the kept paired rounds find
    better than it, followed as far as they go: v3's gain was read over the best before it by
    intervals, which a v2 kernel had beaten side by side, significantly (mp64; on a busy machine a
    wider interval keeps a faster kernel below). A lead of destination passing style's share alone
    over one returning its outputs is no better kernel."""
    # Only a candidate in a kept pair can beat another: a run of many thousands has few pairs.
    involved = {i for r in records for i in (r.a_candidate_id, r.b_candidate_id)}
    if not ranked or ranked[0] not in involved:
        return ranked[0] if ranked else None
    ranked = [ranked[0]] + [c for c in ranked[1:] if c in involved]

    async def beats(winner: str, loser: str) -> bool:
        found = paired_verdict(records, loser, winner)
        if found is None or not found.decides or not found.significant \
                or not stats.favours_b(found.estimate[0], found.kind, direction):
            return False
        return not (found.kind == "kernel" and within_share(found.estimate[1])
                    and await dps_over_returning(store, winner, loser))

    top, seen, moved = ranked[0], [ranked[0]], True
    while moved:
        moved = False
        for c in ranked:
            if c in seen or not await beats(c, top):
                continue
            # Verdicts in a circle (B > A, C > B, A > C) name no best: the top by intervals stays (review).
            for s in seen:
                if s != top and await beats(s, c):
                    return ranked[0]
            top, moved = c, True
            seen.append(c)
            break
    return top
