"""Where each candidate of a run stands, in creation order (the trajectory): the best so far by
every ranking's rule (measurements.rank_key), whether a lead is a new best beyond noise, and
what a candidate behind the best is known to be. Paired rounds of two candidates decide where
they exist (knowledge/comparisons.py gives them); intervals otherwise."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Literal, NamedTuple

from evoteam import stats
from evoteam.passingstyle import STYLE_NAME, passes_over_returns, style_of, within_share
from evoteam.servers.knowledge.measurements import (beyond, clears_start, estimate_of,
                                                   contended_row, first_line, interval_of, kernel_row, overlaps,
                                                   row_rank_key, runs_if_unknown, widened_for_load)
from evoteam.servers.knowledge.trajectory import TrajectoryPoint
from evoteam.servers.knowledge.verified import ranks

# How the paired rounds of two candidates read (B over A): None where they do not decide; "style":
# better, by no more than destination passing style's share, B passing it and A returning its
# outputs (evoteam/passingstyle.py): no faster kernel.
Side = Literal["better", "worse", "tied", "style"]
Paired = Callable[[str, str], "Side | None"]
START = "x0"  # what within_noise_of / worse_than name for the run's starting score
PAIRS, INTERVALS = "paired rounds", "intervals"  # what decided a point's standing
WITH_BASELINE = "paired rounds with the baseline"  # what decided a kernel's standing against x0, where they do
STYLE = STYLE_NAME  # what decided that a lead found by paired rounds is no faster kernel
BASELINE = "baseline"  # a kept compare's side that is the kit's baseline (bench.models.BASELINE_ID)


class Standing(NamedTuple):
    """How a ranked candidate stands against the bests before it (TrajectoryPoint's fields)."""

    new_best: bool = False
    within_noise_of: str | None = None
    worse_than: str | None = None
    too_few_runs: bool = False
    decided_by: Literal["paired rounds", "paired rounds with the baseline", "intervals",
                        "destination passing style's share"] | None = None
    better_than: str | None = None
    open_with: str | None = None  # a new best's: TrajectoryPoint.not_shown_better_than
    open_by: str | None = None  # what leaves it open: TrajectoryPoint.not_shown_by


def row_style(row: sqlite3.Row) -> str | None:
    """"dps" or "returns" for a trajectory row's Python file (readsql.STYLE_CODE), else None."""
    code = row["style_code"] if "style_code" in row.keys() else None
    if code is None:
        return None
    return "returns" if code == "" else style_of(code)


def _side(paired: Paired | None, ref: sqlite3.Row | None, row: sqlite3.Row) -> Side | None:
    if paired is None or ref is None or ref["id"] == row["id"]:
        return None
    return paired(ref["id"], row["id"])


def _by_pair(side: Side | None, ref_id: str) -> Standing | None:
    """What decided paired rounds with ``ref_id`` say, None where they decide nothing."""
    if side is None:
        return None
    if side == "style":
        return Standing(within_noise_of=ref_id, decided_by=STYLE)
    return Standing(new_best=side == "better", within_noise_of=ref_id if side == "tied" else None,
                    worse_than=ref_id if side == "worse" else None, decided_by=PAIRS)


def _against_start(own: stats.Estimate, x0: float, direction: str) -> Standing:
    """Short of the starting score: within its noise, or wholly on the wrong side of it (never
    from a point whose spread is unknown: one run of a program tells nothing apart, and is not
    known to be worse: too_few_runs where it is not x0 itself)."""
    below = own.hi < x0 if direction == "maximize" else own.lo > x0
    if below and stats.spread_unknown(own):
        return Standing(too_few_runs=True)
    return Standing(worse_than=START, decided_by=INTERVALS) if below else \
        Standing(within_noise_of=START, decided_by=INTERVALS)


def x0_is_baseline(x0: float | None) -> bool:
    """Whether a kernel run's starting score is the baseline's own speedup, 1: only there do paired
    rounds with the baseline place a candidate against x0 (the trajectory, run_report, compare)."""
    return x0 is not None and abs(x0 - 1.0) <= 1e-12


def _against_baseline(paired: Paired | None, row: sqlite3.Row, x0: float | None) -> Standing | None:
    """Where paired rounds with the kit's baseline (a compare of the two, kept in the run) place a
    busy kernel against x0, where x0 is the baseline's own speedup, 1: a busy score's interval
    counts widened 3x each way against x0, so a 2x kernel timed on a busy machine stayed "within
    noise of x0" whatever the model did, while the texts sent it to compare with the baseline
    (mp53). Read only where the widened interval leaves it open (its callers)."""
    if paired is None or not x0_is_baseline(x0) or not kernel_row(row):
        return None
    side = paired(BASELINE, row["id"])
    if side is None:
        return None
    return Standing(new_best=side == "better", within_noise_of=START if side == "tied" else None,
                    worse_than=START if side == "worse" else None, decided_by=WITH_BASELINE)


def comparable(row: sqlite3.Row) -> stats.Estimate | None:
    """A row's estimate as it counts against another evaluation or x0 (measurements.widened_for_load)."""
    return widened_for_load(estimate_of(row), contended_row(row), kernel_row(row))


def _clears(row: sqlite3.Row, ref: sqlite3.Row | None, direction: str) -> bool:
    """Its interval clears the other's, each as comparable() gives it (a busy one's widened: a
    quiet 10x after a busy 1.5x was not announced; review 2026-12-04)."""
    if ref is None:
        return False
    own, other = comparable(row), comparable(ref)
    return own is not None and other is not None and stats.clears(own, other, direction)


def _interval_verdict(own: stats.Estimate | None, ref: stats.Estimate | None) -> str | None:
    """decided_by beside a within_noise_of read from two intervals: by them where they overlap;
    none where they are apart but a busy machine keeps them from being told apart."""
    return INTERVALS if overlaps(own, ref) else None


def _style_only(row: sqlite3.Row, ref: sqlite3.Row, styles: dict[str, str | None]) -> bool:
    """Whether ``row`` passes destination style, ``ref`` returns its outputs, and the lead their
    intervals allow at worst is no more than that style's share (report/data.py reads a version
    gain so: the trajectory announced by intervals what run_report called a stall; review 2026-12-06)."""
    if not passes_over_returns(styles.get(row["id"]), styles.get(ref["id"])) or not kernel_row(row):
        return False
    # As measured, not widened for load: a busy 5x over a quiet 1.5x read as the style's share (review).
    own, other = estimate_of(row), estimate_of(ref)
    return own is not None and other is not None and other.hi > 0 and within_share(own.lo / other.hi)


def _lead(row: sqlite3.Row, announced: sqlite3.Row | None, incumbent: sqlite3.Row | None, x0: float | None,
          direction: str, paired: Paired | None, styles: dict[str, str | None] | None = None) -> Standing:
    """How a candidate that took the lead stands.

    A new best clears the last one announced, or, once one has been, the best just before it
    (which leads that one): by their paired rounds where those decide, else interval against
    interval, a busy machine's widened (comparable); with nothing announced yet, it clears the
    run's starting score x0. So a chain of leads each within noise of the one before cannot hide a
    gain over the last announced best, and nothing below x0 is announced for beating another below
    it (review 2026-12-04). Paired rounds with the last announced best decide first: a step over
    the best before it that they find no different from the announced one is no new best here,
    though run_report's version gain, which asks about the version's best against the best before
    it, may call it significant. A lead that the best before it finds better side by side is worse
    than that one, whatever the announced best's rounds say (c6, found better than c1 and worse than
    c2, stayed "new best" and others were sent to compare with it; review of mp73)."""
    def side_of(ref: sqlite3.Row | None) -> Side | None:
        # The style's share read either way round (comparisons.paired_sides): a returning lead behind a
        # passing best by that share alone is no slower kernel, as behind the best (_behind); read
        # "worse" here, it made a returning twin worse_than the kernel it is (rev75 L2, mp76).
        return _side(paired, ref, row)

    before = incumbent if incumbent is not None and incumbent is not announced else None
    side = side_of(before)
    # Ahead of a returning leader by the style's share alone: no faster kernel. A returning row behind
    # a passing leader by it is no slower one, and what it clears otherwise is a kernel's (rev76).
    style_lead = side == "style" and (styles or {}).get(row["id"]) == "dps"
    if side == "worse":
        return Standing(worse_than=before["id"], decided_by=PAIRS)
    if announced is not None and (decided := _by_pair(side_of(announced), announced["id"])):
        return decided._replace(**_left_open(row, [before], direction, side_of)) if decided.new_best else decided
    busy, own = contended_row(row), estimate_of(row)
    if announced is None:
        # Beyond a best side by side counts only past x0 (its own paired rounds against the baseline).
        if side == "better" and (x0 is None or clears_start(own, x0, direction)):
            return Standing(new_best=True, decided_by=PAIRS)
        wide = comparable(row)  # a busy one's widened: `contended` says why it may not be announced
        if wide is None or (busy and x0 is None):
            return Standing(within_noise_of=before["id"] if before is not None else None)
        if x0 is None or clears_start(wide, x0, direction):  # the first quiet leader, or past x0
            return Standing(new_best=True, decided_by=None if x0 is None else INTERVALS)
        # Only what load left open: a quiet interval is honest, and an unclear busy compare must not
        # take back a best it clears (review 2026-12-06).
        if busy and (start := _against_baseline(paired, row, x0)) is not None:
            return start
        if stats.spread_unknown(own) and beyond(own.value, x0, direction):
            return Standing(too_few_runs=True)
        if style_lead:  # short of x0, and ahead of the leader by the style's share alone
            return Standing(within_noise_of=before["id"], decided_by=STYLE)
        if before is not None and (side == "tied" or contended_row(before) or overlaps(own, estimate_of(before))):
            return Standing(within_noise_of=before["id"],
                            decided_by=PAIRS if side == "tied" else _interval_verdict(own, estimate_of(before)))
        return _against_start(wide, x0, direction)
    if style_lead:  # no faster kernel, however the intervals stand (mp56)
        return Standing(within_noise_of=before["id"], decided_by=STYLE)
    if side == "better":
        return Standing(new_best=True, decided_by=PAIRS, **_left_open(row, [announced], direction, side_of))
    # Paired rounds decide where they exist: a ref they find tied with it, or ahead by the style's
    # share, is not cleared however the intervals stand (rev77).
    cleared = [r for r in (announced, before) if r is not None and side_of(r) is None and _clears(row, r, direction)]
    if cleared:
        style = [r for r in cleared if _style_only(row, r, styles or {})]
        if len(style) == len(cleared):
            return Standing(within_noise_of=style[0]["id"], decided_by=STYLE)
        return Standing(new_best=True, decided_by=INTERVALS, **_left_open(row, [announced, before], direction, side_of))
    if side == "tied":
        return Standing(within_noise_of=before["id"], decided_by=PAIRS)
    # A program's point from too few runs is not noise, just not known: said as such (a model read
    # "within noise" of a deterministic gain as no progress; 2026-12-03).
    ref = estimate_of(announced)
    unknown = stats.spread_unknown(own) or stats.spread_unknown(ref)
    if not busy and unknown and beyond(own.value, ref.value, direction):
        return Standing(too_few_runs=True)
    return Standing(within_noise_of=announced["id"], decided_by=_interval_verdict(own, ref))


def _left_open(row: sqlite3.Row, refs: list[sqlite3.Row | None], direction: str,
               side_of: Callable[[sqlite3.Row | None], Side | None]) -> dict[str, str | None]:
    """Of the two bests a new best may clear (the last announced, the leader just before it), the
    one it is not shown better than (open_with), by their paired rounds or its interval: "beyond
    noise of c1 or c3" read as beating the leader c3, which a compare then found faster (mp73).
    Paired rounds that decide it otherwise than "better" leave it open however the intervals stand
    (review), and open_by says which did: a tie side by side was sent to compare the two again
    (review of rev75)."""
    for r in refs:
        if r is None:
            continue
        side = side_of(r)
        if side is None and not _clears(row, r, direction):
            return {"open_with": r["id"], "open_by": INTERVALS}
        if side not in (None, "better"):
            return {"open_with": r["id"], "open_by": STYLE if side == "style" else PAIRS}
    return {}


def _behind(row: sqlite3.Row, best: sqlite3.Row, paired: Paired | None, x0: float | None,
            direction: str, announced: sqlite3.Row | None = None) -> Standing:
    """How a candidate behind the best stands: within its noise, or told apart and worse. Where it
    has no paired rounds with the best but some with the last announced best, which find it worse,
    it is worse than that one: a kernel found slower side by side read "within noise" of a best
    that took the lead later, within noise (mp58)."""
    side = _side(paired, best, row)
    if side is None and announced is not None and _side(paired, announced, row) == "worse":
        return Standing(worse_than=announced["id"], decided_by=PAIRS)
    if side == "style":
        return Standing(within_noise_of=best["id"], decided_by=STYLE)
    if side is not None:
        # Ranked below by its wider interval, yet found better side by side: said, not left blank
        # beside a version gain run_report calls significant from the same rounds (review 2026-12-04).
        return Standing(within_noise_of=best["id"] if side == "tied" else None,
                        worse_than=best["id"] if side == "worse" else None,
                        better_than=best["id"] if side == "better" else None, decided_by=PAIRS)
    own, top = estimate_of(row), estimate_of(best)
    if overlaps(own, top):
        return Standing(within_noise_of=best["id"], decided_by=INTERVALS)
    # Apart, but one is a point from too few runs: not known to be worse, nor within noise (a
    # program at 0.5 behind a best at 0.386 read "within noise of" it; 2026-12-04).
    if stats.spread_unknown(own) or stats.spread_unknown(top):
        return Standing(too_few_runs=True)
    if contended_row(row) or contended_row(best):
        # Apart, but separate evaluations on a busy machine move by more than their intervals:
        # worse only where they are apart even widened for load (comparable); else, where it does
        # not clear x0 so widened, what it is against x0; else not told apart from the best (no
        # decided_by). A copy of the baseline at 1.07x read "within noise" of a best at 3.6-4.6x
        # (model-play 2026-12-04).
        mine, theirs = comparable(row), comparable(best)
        if mine is not None and theirs is not None and not overlaps(mine, theirs):
            return Standing(worse_than=best["id"], decided_by=INTERVALS)
        if mine is not None and x0 is not None and not clears_start(mine, x0, direction):
            start = _against_baseline(paired, row, x0)  # what load left open, side by side with the baseline
            if start is None:
                return _against_start(mine, x0, direction)
            if not start.new_best:  # past x0 so: behind the best all the same, not told apart from it
                return start
        return Standing(within_noise_of=best["id"])
    return Standing(worse_than=best["id"], decided_by=INTERVALS)


def trajectory_points(rows: list[sqlite3.Row], direction: str, x0: float | None = None,
                      paired: Paired | None = None,
                      styles: dict[str, str | None] | None = None) -> tuple[list[TrajectoryPoint], sqlite3.Row | None]:
    """The trajectory of candidate rows in creation order, and the best row: the best so far by
    `rank_score`; ``new_best`` only where the new best clears the last announced best (_lead);
    ``within_noise_of`` names the best a ranked candidate cannot be told apart from. ``paired``
    reads two candidates' kept paired rounds (knowledge/comparisons.py), where there are some."""
    best = announced = stepping = None
    style_leader = False  # the best leads by destination passing style's share alone: no faster kernel
    points = []
    styles = styles if styles is not None else {r["id"]: row_style(r) for r in rows}
    for r in rows:
        standing = Standing()
        if ranks(r["status"], r["score"], bool(r["verified"]), bool(r["flagged"])):
            if best is None or row_rank_key(r, direction) > row_rank_key(best, direction):
                standing = _lead(r, announced, stepping, x0, direction, paired, styles)
                # A passing leader only: a returning one behind a passing best by the share is an
                # ordinary leader (it leads nothing by the style; rev76).
                best, style_leader = r, standing.decided_by == STYLE and styles.get(r["id"]) == "dps"
                announced = r if standing.new_best else announced
                # A lead found worse than a best is no step for the next to clear (review 2026-12-04).
                stepping = stepping if standing.worse_than else r
            else:
                # Behind a leader that is no faster kernel, a step past the last announced best is one
                # (a returning kernel found better than it side by side read "worse than the run's best"; review).
                step = _lead(r, announced, announced, x0, direction, paired, styles) \
                    if style_leader and announced is not None else None
                if step is not None and step.new_best:
                    # Said beside new_best: a new best that is not best_so_far_id read as a contradiction (mp60).
                    standing, announced = step._replace(within_noise_of=best["id"]), r
                else:
                    standing = _behind(r, best, paired, x0, direction, announced)
                    # ...where the lead rule would announce it too: the last announced best's paired
                    # rounds, and a lead found worse, decide first (review).
                    if standing.better_than and announced is not None and \
                            _lead(r, announced, stepping, x0, direction, paired, styles).new_best:
                        # Found better than the leader side by side: progress, which the next must clear,
                        # though its wider interval ranks it below (later leads read "within noise of" a
                        # leader a compare had beaten; mp65).
                        standing, announced = standing._replace(new_best=True), r
        points.append(TrajectoryPoint(
            candidate_id=r["id"], at=r["created_at"], score=r["score"], score_interval=interval_of(r),
            best_so_far=best["score"] if best is not None else None,
            best_so_far_id=best["id"] if best is not None else None, new_best=standing.new_best,
            within_noise_of=standing.within_noise_of, worse_than=standing.worse_than,
            better_than=standing.better_than, decided_by=standing.decided_by,
            not_shown_better_than=standing.open_with if standing.new_best else None,
            not_shown_by=standing.open_by if standing.new_best else None,
            too_few_runs=True if standing.too_few_runs else None,
            status=r["status"], verified=bool(r["verified"]), n_measurements=r["n_measurements"] or 1,
            runs=runs_if_unknown(r),
            contended=True if r["verified"] and contended_row(r) else None,
            code_hash=r["code_hash"], note=first_line(r["notes"]), role=r["role"], team_version=r["team_version"]))
    return points, best
