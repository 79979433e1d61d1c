"""Where a recorded evaluation leaves its candidate in the run: a new best, within noise of the
run's best, or worse than it, in one line of `bench.evaluate`'s reply (and of a compare's, for B).

The store decides it (knowledge/standing.py, the rule of `knowledge.trajectory`); the bench only
reads it back. Said in the reply because a model that evaluated a candidate otherwise compared
the bare score with the last best it remembered, the maximum of noisy draws the rankings never
take (model-play mp45, 2026-12-06: "an evaluation does not say new best yes or no"). Worded for
either direction ("worse", never "below": a minimised score above the best is the worse one).
"""

from __future__ import annotations

import asyncio
import logging

from evoteam import stats
from evoteam.passingstyle import passes_over_returns, share_text, style_of, styles_of, within_share
from evoteam.servers.bench.evaluation.leaders import earlier, shown_and_not
from evoteam.servers.bench.evaluation.pairwords import (NO_DIFFERENCE, NO_DIFFERENCE_HEAD, RANKING, apart, by_share,
                                                       compare_two, program_words, remeasure_two,
                                                       twin_aside, verdict_or_compare)
from evoteam.servers.knowledge.comparisons import dev_comparisons, paired_sides
from evoteam.servers.knowledge.measurements import beyond, intervals_apart
from evoteam.servers.knowledge.models import Candidate
from evoteam.servers.knowledge.standing import PAIRS, STYLE, WITH_BASELINE, Paired
from evoteam.servers.knowledge.store import KnowledgeStore
from evoteam.servers.knowledge.trajectory import Trajectory, TrajectoryPoint

log = logging.getLogger(__name__)
X0 = "x0, the run's starting score"


async def run_standing(store: KnowledgeStore, saved: Candidate, kind: str, again: bool | None = None,
                       prior_best: str | None = None, compared_with: str | None = None) -> str | None:
    """One line on the recorded candidate against the run's best dev candidate, or None where it
    does not rank (held-out, failed, flagged, unverified) or the store cannot say. ``again``: it
    was measured before (by default, where its code has more than one measurement);
    ``prior_best``: the run's best before this measurement was recorded, where read (a best that a
    failed or flagged measurement takes out of the ranking is said so); ``compared_with``: the
    other side of the compare that asks (its verdict, not another compare, tells the two apart)."""
    if saved.split != "dev" or not saved.verified:
        return None
    lost = prior_best == saved.id  # it was the run's best: a measurement that unranks it is news
    if (saved.status != "PASSED" or saved.flagged) and not lost:
        return None
    try:
        trajectory = await store.trajectory(saved.run_id)
    except Exception:  # noqa: BLE001 - recorded already: a read that fails (a store gone, a version
        # skew over HTTP) costs this line, never the result (a retry would pool a second measurement)
        log.warning("no standing for %s", saved.id, exc_info=True)
        return None
    unit = "×" if kind == "kernel" else ""
    if saved.status != "PASSED" or saved.flagged:
        why = "was flagged" if saved.status == "PASSED" else saved.status
        best = _run_best(trajectory)
        now = f"the run's best is now {_described(best, unit)}" if best else "the run has no ranked candidate now"
        return f"no longer ranked: a measurement of its code {why}, and the candidate is every measurement of it; {now}"
    again = saved.n_measurements > 1 if again is None else again
    styles = await _styles(store, saved, trajectory, prior_best) if kind == "kernel" else None
    line = standing_line(trajectory, saved.id, unit, again=again, prior_best=prior_best, compared_with=compared_with,
                         styles=styles)
    if line and RANKING in line and "bench.compare" in line:  # it asks for a compare of two: read only then,
        # their kept rounds may answer it. Bootstraps: off the event loop (pairedbest.paired_top's reason).
        try:
            paired = await _kept_pairs(store, saved, kind, trajectory.direction, line, styles or {})
            line = await asyncio.to_thread(standing_line, trajectory, saved.id, unit, again=again,
                                           prior_best=prior_best, compared_with=compared_with, styles=styles,
                                           paired=paired) or line
        except Exception:  # noqa: BLE001 - recorded already: the read costs the clause, never the result
            log.warning("no kept rounds read for %s", saved.id, exc_info=True)
    return program_words(line) if kind == "program" and line else line


async def _kept_pairs(store: KnowledgeStore, saved: Candidate, kind: str, direction: str, line: str,
                      known: dict[str, str | None]) -> Paired:
    """The run's kept paired rounds as the trajectory reads them (comparisons.paired_sides), with the
    styles of the candidates the line names (``known``: those _styles read already)."""
    records = await dev_comparisons(store, saved.run_id, None)  # a run times one kit
    if kind != "kernel":
        return paired_sides(records, direction, None)
    named = [i for r in records for i in (r.a_candidate_id, r.b_candidate_id) if i in line and i not in known]
    return paired_sides(records, direction, {**known, **await styles_of(store, named)})


async def _styles(store: KnowledgeStore, saved: Candidate, trajectory: Trajectory,
                  prior_best: str | None = None) -> dict[str, str | None]:
    """The output styles of ``saved``, of the best it is within noise of or not shown better than, of
    the run's best and of the best before this measurement (read where ``saved`` passes destination style or returns its outputs: a line says
    them where the two differ, and which of the two is ahead by that style's share)."""
    own = style_of(saved.code)
    point = next((p for p in trajectory.points if p.candidate_id == saved.id), None)
    best = _run_best(trajectory)
    named = (point.within_noise_of, point.not_shown_better_than, best and best.candidate_id, prior_best) \
        if point else ()
    others = [o for o in named if o and o != "x0" and o != saved.id]
    if not others or own is None:
        return {}
    return {saved.id: own, **await styles_of(store, others)}


async def best_before(store: KnowledgeStore, run_id: str) -> str | None:
    """The run's best before a record, for its standing: a read that fails costs the line's news,
    never the measurement about to be recorded."""
    try:
        return (await store.get_run(run_id)).best_candidate_id
    except Exception:  # noqa: BLE001 - the record that follows raises what matters
        return None


def _run_best(trajectory: Trajectory) -> TrajectoryPoint | None:
    """The run's best now: the point the trajectory's last best so far names."""
    best_id = trajectory.points[-1].best_so_far_id if trajectory.points else None
    return next((p for p in trajectory.points if p.candidate_id == best_id), None)


def _described(point: TrajectoryPoint, unit: str) -> str:
    """A candidate and its score as listings say them: a zero-width interval from 5+ runs alike is
    not "(no interval)" (mp47)."""
    return f"{point.candidate_id} at {stats.describe_listed(point.score, point.score_interval, point.runs, unit)}"


def standing_line(trajectory: Trajectory, candidate_id: str, unit: str = "", again: bool = False,
                  prior_best: str | None = None, compared_with: str | None = None,
                  styles: dict[str, str | None] | None = None, paired: Paired | None = None) -> str | None:
    """The trajectory's verdict on ``candidate_id`` while the best it was judged against is still the
    run's best; else (measured again after others took the lead) the best, to compare by id.
    ``again``: the candidate was measured before, so a lead of its point (judged in creation
    order) may be over candidates made after it: one that took the lead from ``prior_best`` says
    so rather than repeat a verdict on what came before it. ``styles``: candidates' output styles
    where known (a lead of destination passing style over a returning best needs more than that
    style's share, which a line promising "progress once their paired rounds find it better" left
    out; mp57)."""
    points = {p.candidate_id: p for p in trajectory.points}
    point = points.get(candidate_id)
    if point is None:
        return None
    best = _run_best(trajectory)
    if best is None:
        return None
    best_id, best_text = best.candidate_id, _described(best, unit)
    # A leader by rank whose paired rounds find another better: that other is the one to tell a
    # candidate apart from (two both found slower than it were sent to compare each other; mp73).
    rival = best.worse_than if best.decided_by == PAIRS and best.worse_than not in (None, "x0", candidate_id) \
        else None
    # Busy: a gain of 2.3x read "within noise" by intervals widened 3x each way, unsaid (mp49).
    other = points.get(point.within_noise_of or "")
    # Paired rounds are not widened for load; "its interval" beside a quiet evaluation read as its own (mp64).
    busy = "" if point.decided_by == WITH_BASELINE else _busy(point, own=True) if point.contended else \
        _busy(other, own=False) if other is not None and other.contended else ""
    if prior_best == candidate_id != best_id:  # it led before this measurement (review 2026-12-06)
        head = f"no longer the run's best: {best_text} now leads"
        if point.best_so_far_id == best_id:  # busy too: "within noise" of a busy leader it reads below (rev79)
            behind = _behind(point, best_text, busy, best_id=best_id, best=best, styles=styles,
                             direction=trajectory.direction)
            return f"{head}; {behind.removeprefix('not a new best: ')}"
        return head + apart(compared_with, candidate_id, best_id, paired, styles=styles)
    if point.best_so_far_id != best_id:  # its point was judged against an earlier best
        if best.worse_than == candidate_id:  # the best's own point: worse, side by side
            return (f"ranks behind the run's best {best_text} by its wider interval, though their paired rounds "
                    f"find it better: {remeasure_two(candidate_id, best_id)}")
        if rival:
            return (f"not the run's best: that is {best_text}, which leads the run's ranking"
                    f"{_found_worse(best_id, rival)}"
                    + _toward_rival(point, points.get(rival), rival, compared_with, paired))
        before = trajectory.points[:trajectory.points.index(best)]
        # A leader never announced read as the run's announced best, beside its own "not a new best" (mp63).
        unannounced = ", which leads the run's ranking but is not a new best" if not best.new_best else ""
        return f"not the run's best: that is {best_text}{unannounced}" + (
            _paired_already(best, candidate_id, before, styles or {})
            or apart(compared_with, candidate_id, best_id, paired, styles=styles))
    index = trajectory.points.index(point)
    first = not any(p.new_best for p in trajectory.points[:index])
    prior = points.get(prior_best or "")  # judged in its point only if made before it
    cleared = point.new_best and prior in trajectory.points[:index] and _clears(point, prior, trajectory.direction)
    if again and best_id == candidate_id and prior_best and prior_best != candidate_id and not cleared:
        # Its point is judged against what came before it; the best it passed may be newer (review
        # 2026-12-06). Where its point cleared that very best, the point's verdict is the news: an
        # exact 2.54 over 2.51-2.52 was told to compare the two "to tell them apart" (mp59).
        worse = f"; it is worse than {X0}" if point.worse_than == "x0" else ""
        return (f"now leads the run's ranking, ahead of {prior_best}, the best before this measurement{worse}"
                + apart(compared_with, candidate_id, prior_best, paired, leads=True, styles=styles))
    if best_id == candidate_id:
        last_new = next((p.candidate_id for p in reversed(trajectory.points[:index]) if p.new_best), None)
        line = _lead(point, first, again, earlier(trajectory.points[:index]), busy,
                     apart_as_measured=intervals_apart(point.score_interval, other and other.score_interval),
                     announced=other is not None and other.new_best, styles=styles or {}, last_new=last_new,
                     split=shown_and_not(trajectory.points[:index], point.not_shown_better_than),
                     compared_with=compared_with)
        # A new best made since, which this one leads by the style's share alone: the one to name
        # now ("ahead of c1" read as stale after c3 passed c1; mp60).
        step = next((p.candidate_id for p in reversed(trajectory.points[index + 1:])
                     if p.new_best and p.within_noise_of == candidate_id), None)
        if step and point.decided_by == STYLE:
            return line + f"; the last new best is {step}, made since, which it leads by no more than that share"
        # One made since that the paired rounds find better than this leader: the better of the two (mp65).
        better = next((p.candidate_id for p in reversed(trajectory.points[index + 1:])
                       if p.new_best and p.better_than == candidate_id), None)
        return line + (f"; {better}, made since, is found better than it by their paired rounds and is the last new "
                       "best, though this one ranks above it by its narrower interval" if better else "")
    return _behind(point, best_text, busy, best_id, best, styles, trajectory.direction, rival, compared_with)


def _found_worse(best_id: str, rival: str) -> str:
    # "its paired rounds" after "(this one measured on a busy machine …)" read as this one's (review).
    return f", though {rival} is found better than {best_id} side by side"


def _toward_rival(point: TrajectoryPoint, rival: TrajectoryPoint | None, rival_id: str,
                  compared_with: str | None, paired: Paired | None = None) -> str:
    """What the paired rounds of this one and ``rival`` said, where the point of either was judged
    against the other; else the compare that tells the two apart (a candidate found worse than it was
    sent to compare with it; review of mp73)."""
    own = point.candidate_id
    if point.worse_than == rival_id:  # by paired rounds or by intervals: no compare asked either way (review)
        return f"; it is worse than {rival_id} too{_how(point)}"
    if point.decided_by == PAIRS and point.within_noise_of == rival_id or \
            rival is not None and rival.decided_by == PAIRS and rival.within_noise_of == own:
        return f"; with {rival_id}, {NO_DIFFERENCE}"
    return apart(compared_with, own, rival_id, paired)


def _paired_already(best: TrajectoryPoint, own: str, before: list[TrajectoryPoint],
                    styles: dict[str, str | None]) -> str:
    """What the best's own point says of ``own`` where their paired rounds decided it, else "": a
    measurement of a code compared with the best before was told to compare the two (mp56). Which of
    the two the style's share puts ahead, by their styles (a returning best read "ahead" of the
    passing one its rounds found ahead of it; rev76)."""
    if best.decided_by == STYLE and best.within_noise_of == own:
        if passes_over_returns(styles.get(best.candidate_id), styles.get(own)):
            return ", ahead of it by no more than destination passing style's share (no faster kernel)"
        if passes_over_returns(styles.get(own), styles.get(best.candidate_id)):
            return "; it is ahead of that one side by side by no more than destination passing style's share (no " \
                "faster kernel)"
        return ", apart from it by no more than destination passing style's share (no faster kernel either way)"
    if best.decided_by == PAIRS and best.within_noise_of == own:
        return "; " + NO_DIFFERENCE
    # Only where it cleared ``own`` alone: "c2 or c1" does not say which its paired rounds were with (review).
    if best.decided_by == PAIRS and best.new_best and own == earlier(before):
        return ", found better than it by their paired rounds"
    return ""


def _beyond_share(point: TrajectoryPoint, styles: dict[str, str | None] | None) -> str:
    """Said where ``point`` passes destination style and the best it must beat returns its outputs."""
    other = point.within_noise_of
    if not styles or not passes_over_returns(styles.get(point.candidate_id), styles.get(other or "")):
        return ""
    return (f" by more than destination passing style's share ({point.candidate_id} writes into outputs it is "
            f"given, {other} returns its own: {share_text()})")


def _same_score(point: TrajectoryPoint, best: TrajectoryPoint) -> str | None:
    """"exact": both the same score from 5+ runs alike, which no compare tells apart; "one run": this
    one's single run gave the exact best's score (a stochastic program's may, on a coarse score)."""
    def exact(p: TrajectoryPoint) -> bool:
        return p.runs is None and p.score_interval is not None and p.score_interval[0] == p.score_interval[1]
    if point.score is None or point.score != best.score or not exact(best):
        return None
    return "exact" if exact(point) else "one run" if point.runs == 1 else None


def _clears(point: TrajectoryPoint, other: TrajectoryPoint | None, direction: str) -> bool:
    """Whether ``point``'s quiet interval clears ``other``'s quiet one, by the store's rule
    (stats.clears): a new best may clear the last announced best and still overlap the leader
    before this measurement (review)."""
    if other is None or point.contended or other.contended:
        return False
    new, incumbent = _estimate(point), _estimate(other)
    return new is not None and incumbent is not None and stats.clears(new, incumbent, direction)


def _estimate(point: TrajectoryPoint) -> stats.Estimate | None:
    """A point's score as an estimate: from too few runs (``runs``), one whose spread is unknown."""
    if point.score is None or not point.score_interval:
        return None
    few = point.runs is not None
    return stats.Estimate(point.score, *point.score_interval, point.runs if few else stats.EXACT_MIN_RUNS,
                          0.0 if few else stats.CONFIDENCE)


def _how(point: TrajectoryPoint) -> str:
    if point.decided_by == WITH_BASELINE:
        return f" (by its {WITH_BASELINE})"
    return f" (by their {point.decided_by})" if point.decided_by else ""


def _busy(point: TrajectoryPoint, own: bool) -> str:
    """Why a busy measurement is within noise, with the interval as it counts: "widened 3x each way"
    alone could not be checked (mp73)."""
    est = _estimate(point)  # only a full interval is widened (measurements.widened_for_load; review)
    wide = stats.load_widened(est) if est is not None and point.runs is None and est.lo > 0 else None
    shown = f", {stats.sig3(wide.lo)}–{stats.sig3(wide.hi)}" if wide is not None else ""
    # "this one": placed after the best's score, a bare "its interval" read as the best's (mp73).
    return f" ({'this one' if own else point.candidate_id} measured on a busy machine: its interval counts as " \
        f"{stats.BUSY_COUNTS}{shown})"


def _lead(point: TrajectoryPoint, first: bool, again: bool, earlier: str = "", busy: str = "",
          announced: bool = True, styles: dict[str, str | None] | None = None, last_new: str | None = None,
          split: tuple[str, str] | None = None, compared_with: str | None = None,
          apart_as_measured: bool = False) -> str:
    """A candidate that leads the run's ranking: announced as a new best only where its point is.
    ``earlier``: the ids a new best clears (leaders.earlier); ``busy``: said where a busy measurement's
    widened interval is why it is within noise (``apart_as_measured``: not told apart, then);
    ``announced``: whether the one it is within noise of was announced (before any is, it is the
    leader it passed: "the last new best" named one that never was; mp54); ``split``: the one of
    those a new best is shown better than, and the one it is not (leaders.shown_and_not)."""
    how = _how(point)
    if point.new_best:
        # "the run's best: beyond noise …" read awkwardly (mp50).
        head = "the run's best," if again else "new best of the run:"
        if not first:
            if split:
                return f"{head} beyond noise of {split[0]}{how}, but not shown better than {split[1]}: " \
                    + _not_shown_text(point, compared_with, styles or {})
            named = f" ({earlier})" if earlier else ""
            return f"{head} beyond noise of the run's earlier best{named}{how}"
        if point.decided_by is None:  # nothing to clear: a run with no x0, its first ranked candidate
            return f"{head} the first ranked candidate of a run with no starting score x0"
        if point.decided_by == "paired rounds":
            return f"{head} found better than the run's earlier leader by their paired rounds, and past x0"
        return f"{head} beyond noise of {X0}{how}"
    # A leader worse than x0 (or than the best before it, side by side) is no good news (review 2026-12-06).
    if point.worse_than:
        target = X0 if point.worse_than == "x0" else point.worse_than
        return f"leads the run's ranking but is worse than {target}{how}: not a new best"
    if point.within_noise_of == "x0":
        if point.decided_by == WITH_BASELINE:
            return (f"leads the run's ranking but is not a new best: its {WITH_BASELINE} find no difference from "
                    f"{X0} (bench.compare with repeats above its default, 3, resolves a smaller one)")
        return (f"leads the run's ranking but is not a new best: within noise of {X0}{how}{busy} (bench.compare it "
                "with a_candidate_id \"baseline\" to tell them apart)")
    if point.decided_by == STYLE:
        return ("leads the run's ranking but is not a new best: "
                + by_share(point.candidate_id, point.within_noise_of, styles or {}, compared_with))
    if point.within_noise_of:  # the last new best, which a lead must clear: not the one it passed (mp47)
        share = _beyond_share(point, styles)
        # Within the share, only a kernel of its own style tells its kernel (mp77: the twin it beat unnamed).
        then = (NO_DIFFERENCE.removeprefix(NO_DIFFERENCE_HEAD) if point.decided_by == PAIRS
                else f"it is progress only once their paired rounds find it better{share} "
                f"({compare_two(point.candidate_id, point.within_noise_of)})" + (
                    "; within that share, a compare with a kernel of its own style tells whether its kernel is "
                    "faster" if share else "") + twin_aside(point.candidate_id, point.within_noise_of, styles))
        which = "the last new best" if announced and last_new in (None, point.within_noise_of) else \
            (f"an earlier new best; the last new best is {last_new} ({compare_two(point.candidate_id, last_new)} to "
             "tell them apart)") if announced \
            else "the leader before it (none is announced past x0 yet)" if last_new is None else \
            (f"the leader before it; the last new best is {last_new} ({compare_two(point.candidate_id, last_new)} to "
             "tell them apart)")  # "none is announced" read beside an announced c1 (rev77)
        # Busy, by intervals: "within noise" beside two intervals apart as measured read as a contradiction (mp79);
        # where they meet as measured, it is within noise (rev79).
        near = "not told apart from" if busy and apart_as_measured else "within noise of"
        return (f"leads the run's ranking (by the pessimistic end of its interval over all its runs) but is not a "
                f"new best: {near} {point.within_noise_of}, {which}{how}{busy}; {then}")
    if point.too_few_runs:
        mark = X0 if first else "the last new best"
        return f"leads the run's ranking, but from too few runs to be told apart from {mark}"
    return "leads the run's ranking"


def _not_shown_text(point: TrajectoryPoint, compared_with: str | None, styles: dict[str, str | None]) -> str:
    """What a new best's not_shown_by says of the one it is not shown better than: a tie side by side
    was sent to compare the two again (review of rev75)."""
    other = point.not_shown_better_than or ""
    if point.not_shown_by == PAIRS:
        return NO_DIFFERENCE
    if point.not_shown_by == STYLE:
        return by_share(point.candidate_id, other, styles, compared_with)
    return verdict_or_compare(compared_with, point.candidate_id, other, "before building on either")


def _gap_within_share(point: TrajectoryPoint, best: TrajectoryPoint | None, direction: str) -> bool:
    """Whether the lead of a passing best over a returning kernel behind it could be the style's share
    alone, by their intervals as measured (a busy one's unwidened): a 1.65x behind a 4.31x was told
    "a compare cannot tell kernels apart within the style's share" (mp71). Unknown: it could."""
    own, top = point.score_interval, best.score_interval if best is not None else None
    if not own or not top or min(own[0], top[0]) <= 0:
        return True
    return within_share(top[0] / own[1] if direction == "maximize" else own[0] / top[1])


def _behind(point: TrajectoryPoint, best_text: str, busy: str = "", best_id: str = "",
            best: TrajectoryPoint | None = None, styles: dict[str, str | None] | None = None,
            direction: str = "maximize", rival: str | None = None, compared_with: str | None = None) -> str:
    """A candidate behind the run's best (``best_id``, its point ``best``), which it was judged against;
    ``rival``: one the best's paired rounds find better, to tell this one apart from instead."""
    how, styles = _how(point), styles or {}
    if point.better_than:
        also = f"; {rival} is found better than {best_id} too: {compare_two(point.candidate_id, rival)} to tell those two " \
            "apart" if rival else ""  # c2, which beat both, was not named (review)
        return (f"{'new best of the run: ' if point.new_best else ''}ranks behind the run's best {best_text} by its "
                f"wider interval, though their paired rounds find it better: {remeasure_two(point.candidate_id, best_id)}"
                + also)
    if point.new_best:  # past the last new best, behind a leader ahead by the style's share alone
        return (f"new best of the run: beyond noise of the last new best{how}; the run's best {best_text} ranks "
                "above it by destination passing style's share alone, no faster kernel")
    if point.worse_than:
        target = X0 if point.worse_than == "x0" else f"the run's best {best_text}" if point.worse_than == best_id \
            or not best_id else f"{point.worse_than}, the last new best, which the run's best {best_text} ranks above"
        return f"not a new best: worse than {target}{how}"
    if point.within_noise_of == "x0":
        return f"not a new best: within noise of {X0}{how}{busy}"
    if point.decided_by == STYLE:
        return f"not a new best: {by_share(point.candidate_id, point.within_noise_of, styles, compared_with)}"
    same = _same_score(point, best) if best is not None and point.within_noise_of == best_id else None
    if same:  # a program's exact 2.5 beside the best's exact 2.5 was told to compare the two (mp59)
        return f"not a new best: the same score as the run's best {best_text}" + (
            ": report the two as one result" if same == "exact" else ", from one run (repeats 4 tell whether every run "
            "gives it)")
    # "Within noise" read as "as good as the best" beside a compare that found it slower (mp46).
    if point.within_noise_of:
        if point.decided_by == PAIRS:
            return f"not a new best: within noise of the run's best {best_text}; {NO_DIFFERENCE}"
        other = best_id or point.within_noise_of
        behind = best is not None and None not in (point.score, best.score) and beyond(best.score, point.score,
                                                                                        direction)
        if behind and passes_over_returns(styles.get(other), styles.get(point.candidate_id)) and \
                _gap_within_share(point, best, direction):
            # Sent to compare a returning kernel behind a passing best, whose verdict could only
            # say "no faster kernel shown" (mp62); one that reads ahead may still show a faster one.
            # Apart as measured, busy: "within noise" of a best its own interval did not reach (mp75).
            where = "it reads below" if busy and not point.decided_by else "within noise of"
            # In a compare with a kernel of its own style, that compare is the advice (mp75: asked again).
            then = "the compare above, with a kernel of its own style, is what tells its kernel" \
                if compared_with and styles.get(compared_with) == styles.get(point.candidate_id) \
                else "compare it with a kernel of its own style"
            return (f"not a new best: {where} the run's best {best_text}{how}{busy}, which writes into "
                    f"outputs it is given while {point.candidate_id} returns its own: a compare of the two cannot "
                    f"tell kernels apart within destination passing style's share ({share_text()}); {then}")
        if busy and not point.decided_by and behind:
            # Below the best by its own interval, kept from "worse" by load's widening alone: a 1.5x
            # under a 14.9x best was sent to a compare the model saw no need for (mp70).
            # The action first: "not shown worse ... set it aside" was read twice (mp72).
            # No compare in it: "no compare needed (... bench.compare measures that)" read as a contradiction (mp73).
            return (f"not a new best: it reads below the run's best {best_text}; set it aside, no compare needed "
                    f"(a separate score's interval on a busy machine counts as {stats.BUSY_COUNTS}, so it is not "
                    "called worse)")
        if rival:  # the one the best is found worse than is the one to tell this one apart from (mp73)
            return f"not a new best: within noise of the run's best {best_text}{how}{busy}" \
                f"{_found_worse(best_id, rival)}; {verdict_or_compare(compared_with, point.candidate_id, rival)}"
        if busy and not point.decided_by:  # apart only by load's widening: "within noise" read as a tie (mp66)
            return (f"not a new best: not told apart from the run's best {best_text}{busy}; "
                    f"{compare_two(point.candidate_id, other)} to tell them apart (side by side, load touches both)"
                    + twin_aside(point.candidate_id, other, styles))
        return (f"not a new best: within noise of the run's best {best_text}{how}{busy}; "
                f"{compare_two(point.candidate_id, other)} to tell them apart"
                + twin_aside(point.candidate_id, other, styles))
    if point.too_few_runs:  # which of the two lacks an interval: the best's read "(no interval)" (mp47)
        who = (f"this one is from {point.runs} run{'s' if point.runs != 1 else ''}, too few for a 95% interval"
               if point.runs else "the best is from too few runs for a 95% interval")
        return f"not told apart from the run's best {best_text}: {who}"
    return f"not a new best: the run's best is {best_text}"


def stands_in_run(who: str, compared_with: str, line: str) -> str:
    """"; B in the run: …", where B now stands among the run's candidates, named as no part of this
    pair's verdict where it is about others: after "no significant difference", "B in the run: the
    run's best" read as B winning the pair (mp70). Where the line names A, or is against the
    baseline, it is this pair's verdict (review)."""
    apart = ", from all its measurements, not this pair's verdict" if who == "B" and compared_with not in line else ""
    return f"; {who} in the run{apart}: {line}"
