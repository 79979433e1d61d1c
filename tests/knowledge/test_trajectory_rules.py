"""How the trajectory says where each candidate stands (standing.trajectory_points), rule by
rule on rows made here: a new best clears the last announced best (or, once there is one, the
best just before it), nothing below the starting score is announced, paired rounds decide against
a lead as well as for it, and a busy machine's interval is never what another clears. Each case
comes from a review of the rule (2026-12-04) that found the trajectory announcing a step that
run_report, the paired rounds or the rule itself said was none."""

from __future__ import annotations

from evoteam.servers.knowledge.measurements import unknown_spread
from evoteam.servers.knowledge.standing import trajectory_points


def _row(i: int, score: float, lo: float, hi: float, *, direction: str = "maximize", busy: int = 0,
         n: int = 3) -> dict:
    """A verified, passing candidate row as the store reads it for the trajectory."""
    return {"id": f"c{i}", "created_at": f"2026-12-04T10:00:{i:02d}", "score": score, "score_lo": lo,
            "score_hi": hi, "rank_score": lo if direction == "maximize" else hi, "n_measurements": n,
            "contended_measurements": busy, "code_hash": f"h{i}", "notes": None, "status": "PASSED",
            "verified": 1, "flagged": 0, "role": None, "team_version": i, "point_samples": None,
            "spread_unknown": unknown_spread(score, lo, hi, None, n)}


def _standings(rows: list[dict], x0: float | None, pairs: dict | None = None, direction: str = "maximize") -> dict:
    paired = (lambda a, b: pairs.get((a, b))) if pairs is not None else None
    points, _ = trajectory_points(rows, direction, x0, paired)
    return {p.candidate_id: (p.new_best, p.within_noise_of, p.worse_than, p.too_few_runs) for p in points}


def test_a_side_by_side_win_below_the_starting_score_is_not_progress():
    rows = [_row(1, 0.80, 0.78, 0.82), _row(2, 0.90, 0.88, 0.92)]
    got = _standings(rows, 1.0, {("c1", "c2"): "better"})
    assert got["c1"] == (False, None, "x0", None) and got["c2"] == (False, None, "x0", None)
    # Past x0, the same win announces it (its own rounds against the baseline clear x0).
    got = _standings([_row(1, 0.95, 0.9, 1.05), _row(2, 1.2, 1.1, 1.3)], 1.0, {("c1", "c2"): "better"})
    assert got["c1"] == (False, "x0", None, None) and got["c2"][0]


def test_paired_rounds_that_find_a_lead_worse_than_the_best_before_it_say_so():
    rows = [_row(1, 1.1, 1.0, 1.2), _row(2, 1.3, 1.15, 1.5), _row(3, 1.27, 1.25, 1.3)]
    assert _standings(rows, 0.9)["c3"][0]  # by intervals it clears c1, the last announced
    got = _standings(rows, 0.9, {("c2", "c3"): "worse"})
    assert got["c3"] == (False, None, "c2", None)
    # Without x0, after a busy first: the first quiet leader, unless the rounds find it worse.
    rows = [_row(1, 1.3, 1.1, 1.5, busy=1), _row(2, 1.25, 1.2, 1.3)]
    assert _standings(rows, None)["c2"][0]
    assert _standings(rows, None, {("c1", "c2"): "worse"})["c2"] == (False, None, "c1", None)


def test_clearing_the_best_before_it_is_a_step_as_run_report_reads_it():
    """c2 leads the announced c1 within its noise; c3 clears c2 (run_report: a significant gain
    over the best before it) though not c1's wide interval: announced, by intervals or pairs."""
    rows = [_row(1, 1.5, 1.1, 2.0), _row(2, 1.25, 1.2, 1.3), _row(3, 1.4, 1.35, 1.45)]
    got = _standings(rows, 1.0)
    assert got["c1"][0] and got["c2"] == (False, "c1", None, None) and got["c3"][0]
    narrow = [_row(1, 1.5, 1.1, 2.0), _row(2, 1.25, 1.2, 1.3), _row(3, 1.3, 1.25, 1.35)]
    assert _standings(narrow, 1.0)["c3"] == (False, "c1", None, None)
    assert _standings(narrow, 1.0, {("c2", "c3"): "better"})["c3"][0]
    # The last announced best's paired rounds decide first: no different from c1, not a step.
    assert _standings(rows, 1.0, {("c1", "c3"): "tied", ("c2", "c3"): "better"})["c3"] == (False, "c1", None, None)


def test_a_busy_best_is_never_cleared_by_an_interval():
    """c2, measured on a busy machine, is announced by its paired rounds; c3 clears c2's interval
    but that interval is not trusted: within noise of c2 until rounds side by side say more."""
    rows = [_row(1, 1.5, 1.4, 1.6), _row(2, 1.8, 1.7, 1.9, busy=1), _row(3, 2.0, 1.95, 2.05)]
    got = _standings(rows, 1.0, {("c1", "c2"): "better"})
    assert got["c2"][0] and got["c3"] == (False, "c2", None, None)
    assert _standings(rows, 1.0, {("c1", "c2"): "better", ("c2", "c3"): "better"})["c3"][0]


def test_a_tie_side_by_side_is_said_before_too_few_runs():
    rows = [_row(1, 10.0, 10.0, 10.0, n=1), _row(2, 12.0, 12.0, 12.0, n=1), _row(3, 12.5, 12.5, 12.5, n=1)]
    assert _standings(rows, None)["c3"] == (False, None, None, True)
    assert _standings(rows, None, {("c2", "c3"): "tied"})["c3"] == (False, "c2", None, None)


def test_a_candidate_behind_the_best_is_within_its_noise_or_worse():
    rows = [_row(1, 2.0, 1.9, 2.1), _row(2, 1.95, 1.85, 2.05), _row(3, 1.5, 1.4, 1.6)]
    got = _standings(rows, 1.0)
    assert got["c2"] == (False, "c1", None, None) and got["c3"] == (False, None, "c1", None)
    got = _standings(rows, 1.0, {("c1", "c2"): "worse", ("c1", "c3"): "tied"})
    assert got["c2"] == (False, None, "c1", None) and got["c3"] == (False, "c1", None, None)


def test_minimising_reads_the_other_way():
    rows = [_row(i, s, lo, hi, direction="minimize") for i, (s, lo, hi) in
            enumerate([(10, 9, 11), (8, 7.5, 8.5), (7.8, 7.6, 8.0), (13, 12.5, 13.5)], start=1)]
    got = _standings(rows, 12.0, direction="minimize")
    assert got["c1"][0] and got["c2"][0] and got["c3"] == (False, "c2", None, None)
    assert got["c4"] == (False, None, "c3", None)
    # Above (worse than) the starting score from the first: told apart from x0, not progress.
    got = _standings([_row(1, 13, 12.5, 13.5, direction="minimize")], 12.0, direction="minimize")
    assert got["c1"] == (False, None, "x0", None)


def test_one_run_is_never_told_apart_as_worse():
    """A program's single runs say nothing of their spread (stats.clears): one run below another
    is not known to be worse (a model could drop a direction for it), nor within noise (a model
    read a 30% gap "within noise"): too_few_runs, below x0 too; one run at x0 is within its noise."""
    rows = [_row(1, 12.0, 12.0, 12.0, n=1), _row(2, 11.9, 11.9, 11.9, n=1)]
    assert _standings(rows, None)["c2"] == (False, None, None, True)
    assert _standings([_row(1, 0.99, 0.99, 0.99, n=1)], 1.0)["c1"] == (False, None, None, True)
    assert _standings([_row(1, 1.0, 1.0, 1.0, n=1)], 1.0)["c1"] == (False, "x0", None, None)


def test_a_lead_found_worse_is_no_step_for_the_next():
    """c2 leads by its interval but its paired rounds put it below c1, the announced best: c3, which
    clears c2 but not c1, is no new best for clearing a candidate already found worse."""
    rows = [_row(1, 1.5, 1.3, 1.7), _row(2, 1.5, 1.35, 1.6), _row(3, 1.68, 1.62, 1.74)]
    assert _standings(rows, 1.0)["c3"][0]  # by intervals alone c3 clears c2, the best before it
    got = _standings(rows, 1.0, {("c1", "c2"): "worse"})
    assert got["c2"] == (False, None, "c1", None) and got["c3"] == (False, "c1", None, None)


def test_each_standing_says_what_decided_it():
    """A model read `worse_than` beside two overlapping intervals as noise (model-play 2026-12-04):
    the point says whether paired rounds or the intervals decided it."""
    rows = [_row(1, 2.0, 1.9, 2.1), _row(2, 1.95, 1.85, 2.05), _row(3, 1.5, 1.4, 1.6)]
    points, _ = trajectory_points(rows, "maximize", 1.0, lambda a, b: "worse" if (a, b) == ("c1", "c2") else None)
    by = {p.candidate_id: (p.worse_than, p.decided_by) for p in points}
    assert by == {"c1": (None, "intervals"), "c2": ("c1", "paired rounds"), "c3": ("c1", "intervals")}


def test_a_candidate_ranked_below_the_best_but_better_side_by_side_says_so():
    """c2 is better than c1 by their paired rounds, yet ranks below it by its wider interval: its
    point names c1 in better_than (it was left blank beside a version gain run_report called
    significant from the same rounds; review 2026-12-04)."""
    rows = [_row(1, 1.50, 1.49, 1.51), _row(2, 1.55, 1.40, 1.70)]
    points, best = trajectory_points(rows, "maximize", 1.0, lambda a, b: "better" if (a, b) == ("c1", "c2") else None)
    second = points[1]
    assert best["id"] == "c1" and second.best_so_far_id == "c1"
    assert second.better_than == "c1" and second.decided_by == "paired rounds"
    assert second.within_noise_of is None and second.worse_than is None
    # ...and it is progress: a new best, which a later lead must clear. A later leader tied with c1 read
    # "within noise of c1, the last new best" after a compare had found c2 better than c1 (mp65).
    assert second.new_best
    from evoteam.servers.bench.evaluation.standing import standing_line
    from evoteam.servers.knowledge.trajectory import Trajectory

    run = Trajectory(run_id="r", direction="maximize", points=points, best_score=1.5, ndg=None)
    assert standing_line(run, "c2", "×").startswith("new best of the run: ranks behind the run's best c1 at "), \
        standing_line(run, "c2", "×")
    leader = standing_line(run, "c1", "×", again=True)
    assert "; c2, made since, is found better than it by their paired rounds and is the last new best" in leader, leader
    third = _row(3, 1.56, 1.50, 1.62)
    pairs = {("c1", "c2"): "better", ("c2", "c3"): "tied"}
    points, best = trajectory_points(rows + [third], "maximize", 1.0, lambda a, b: pairs.get((a, b)))
    assert best["id"] == "c3" and points[2].within_noise_of == "c2" and not points[2].new_best, points[2]
    # Before any best is announced past x0, a lead side by side is not one yet.
    below = trajectory_points([_row(1, 0.9, 0.89, 0.91), _row(2, 0.95, 0.8, 1.1)], "maximize", 1.0,
                              lambda a, b: "better" if (a, b) == ("c1", "c2") else None)[0]
    assert not below[1].new_best and below[1].better_than == "c1", below[1]


def test_a_score_with_a_95_percent_interval_stays_the_best_over_a_better_single_run():
    """A point from too few runs ranks after every score with a 95% interval: a single lucky run
    outranked a candidate whose five runs spanned it, so measuring more lost rank (review
    2026-12-04). The point reads too_few_runs behind the measured best, whose lead it does not take;
    among points alone, the better value leads."""
    rows = [_row(1, 0.42, 0.41, 0.43, direction="minimize", n=5), _row(2, 0.39, 0.39, 0.39, direction="minimize", n=1)]
    points, best = trajectory_points(rows, "minimize", 0.5)
    assert best["id"] == "c1" and points[1].best_so_far_id == "c1" and points[1].too_few_runs and points[1].runs == 1
    assert not points[1].new_best and points[0].new_best
    only_points = [_row(1, 0.42, 0.42, 0.42, direction="minimize", n=1), rows[1]]
    assert trajectory_points(only_points, "minimize", 0.5)[1]["id"] == "c2"


def test_a_kernel_found_slower_than_the_last_new_best_stays_so_when_a_tie_takes_the_lead():
    """c3 was found slower than c1 side by side; then c2, no different from c1 by their paired
    rounds, took the lead by a hair of its interval's pessimistic end, and c3 read "within noise of
    the run's best" (mp58). With no rounds of its own with c2, c3's rounds with c1 still decide."""
    rows = [_row(1, 3.0, 2.9, 3.1), _row(2, 3.05, 2.95, 3.15), _row(3, 2.95, 2.85, 3.05)]
    pairs = {("c1", "c2"): "tied", ("c1", "c3"): "worse"}
    points, best = trajectory_points(rows, "maximize", 1.0, lambda a, b: pairs.get((a, b)))
    by = {p.candidate_id: (p.new_best, p.within_noise_of, p.worse_than, p.decided_by) for p in points}
    assert best["id"] == "c2" and by["c1"][0] and by["c2"] == (False, "c1", None, "paired rounds")
    assert by["c3"] == (False, None, "c1", "paired rounds"), by
    # Its line names the one it is worse than, and the best that ranks above it.
    from evoteam.servers.bench.evaluation.standing import standing_line
    from evoteam.servers.knowledge.trajectory import Trajectory

    run = Trajectory(run_id="r", direction="maximize", points=points, best_score=3.05, ndg=None)
    line = standing_line(run, "c3", "×")
    assert line.startswith("not a new best: worse than c1, the last new best, which the run's best c2 at 3.05× "
                           "(2.95–3.15) ranks above (by their paired rounds)"), line


DPS_CODE = "DESTINATION_PASSING_STYLE = True\n\ndef run(x, out):\n    out[:] = x\n"


def _kernel(i: int, score: float, lo: float, hi: float, dps: bool, busy: int = 0) -> dict:
    """A kernel kit's row (timed rounds) in destination passing style or returning its outputs."""
    return dict(_row(i, score, lo, hi, busy=busy), kernel_rounds=1, style_code=DPS_CODE if dps else "")


def test_a_busy_kernel_far_ahead_is_no_styles_share():
    """A busy destination-passing 5x over a quiet returning 1.5x read as the style's share alone,
    its interval widened for the load (review 2026-12-06): the share is read as measured."""
    rows = [_kernel(1, 1.5, 1.45, 1.55, dps=False), _kernel(2, 5.0, 4.9, 5.1, dps=True, busy=1)]
    points, _ = trajectory_points(rows, "maximize", 1.0)
    assert points[1].new_best and points[1].decided_by == "intervals", points[1]


def test_a_leader_by_the_styles_share_alone_does_not_hide_a_later_step():
    """B (destination passing) leads A (returning) by the style's share alone; C, returning, found
    better than A side by side, ranks below B and read "worse than the run's best B" (review
    2026-12-06). Behind a leader that is no faster kernel, C is the new best; the best stays B's by rank."""
    rows = [_kernel(1, 1.5, 1.45, 1.55, dps=False), _kernel(2, 1.8, 1.75, 1.85, dps=True),
            _kernel(3, 1.70, 1.68, 1.72, dps=False)]
    points, best = trajectory_points(rows, "maximize", 1.0, lambda a, b: "better" if (a, b) == ("c1", "c3") else None)
    by = {p.candidate_id: (p.new_best, p.within_noise_of, p.decided_by) for p in points}
    assert by["c2"] == (False, "c1", "destination passing style's share"), by
    # Beside new_best, the best it trails (a new best that is not best_so_far_id read as a contradiction; mp60).
    assert by["c3"] == (True, "c2", "paired rounds") and best["id"] == "c2", by
    from evoteam.servers.bench.evaluation.standing import standing_line
    from evoteam.servers.knowledge.trajectory import Trajectory

    run = Trajectory(run_id="r", direction="maximize", points=points, best_score=1.8, ndg=None)
    line = standing_line(run, "c3", "×")
    assert line.startswith("new best of the run: beyond noise of the last new best (by their paired rounds); the run's "
                           "best c2 at 1.80× (1.75–1.85) ranks above it by destination passing style's share alone"), line
    # The leader's own line names the new best made since, not only the one it passed ("ahead of c1"; mp60).
    # With the styles run_standing reads (c2's and c1's): which of the two is ahead is said (mp76).
    lead = standing_line(run, "c2", "×", compared_with="c3", styles={"c2": "dps", "c1": "returns"})
    assert lead.startswith("leads the run's ranking but is not a new best: it is ahead of c1 by no more than "
                           "destination passing style's share"), lead
    assert lead.endswith("; the last new best is c3, made since, which it leads by no more than that share"), lead


def test_a_lead_side_by_side_over_the_leader_is_announced_only_as_a_lead_would_be():
    """Review of the rule above: found better than the leader side by side, a candidate is a new best
    only where the lead rule would announce it too: the last announced best's paired rounds, and a
    leader found worse, decide first."""
    def standings(rows, pairs):
        points, _ = trajectory_points(rows, "maximize", 1.0, lambda a, b: pairs.get((a, b)))
        return {p.candidate_id: p for p in points}

    # The leader c2 was found worse than c1, the announced best: beating it side by side is no step.
    got = standings([_row(1, 1.5, 1.3, 1.7), _row(2, 1.5, 1.35, 1.6), _row(3, 1.5, 1.2, 1.8)],
                    {("c1", "c2"): "worse", ("c2", "c3"): "better"})
    assert not got["c3"].new_best and got["c3"].better_than == "c2", got["c3"]
    # Better than the leader, but tied with or worse than the announced best: no new best either.
    for side in ("tied", "worse"):
        got = standings([_row(1, 1.5, 1.4, 1.6), _row(2, 1.55, 1.45, 1.65), _row(3, 1.55, 1.3, 1.8)],
                        {("c2", "c3"): "better", ("c1", "c3"): side})
        assert not got["c3"].new_best, (side, got["c3"])
    # Two found better than the leader, the second worse than the first: only the first is announced.
    got = standings([_row(1, 1.5, 1.49, 1.51), _row(2, 1.65, 1.40, 1.90), _row(3, 1.57, 1.38, 1.76)],
                    {("c1", "c2"): "better", ("c1", "c3"): "better", ("c2", "c3"): "worse"})
    assert got["c2"].new_best and not got["c3"].new_best, (got["c2"], got["c3"])


def test_a_leader_within_noise_of_an_earlier_best_names_the_last_new_best():
    """c3 leads, tied side by side with c1, while c2 (found better than c1) is the last new best: its
    line called c1 "the last new best" (review)."""
    from evoteam.servers.bench.evaluation.standing import standing_line
    from evoteam.servers.knowledge.trajectory import Trajectory

    rows = [_row(1, 1.50, 1.49, 1.51), _row(2, 1.55, 1.40, 1.70), _row(3, 1.52, 1.50, 1.54)]
    pairs = {("c1", "c2"): "better", ("c1", "c3"): "tied"}
    points, best = trajectory_points(rows, "maximize", 1.0, lambda a, b: pairs.get((a, b)))
    assert best["id"] == "c3" and points[1].new_best and points[2].within_noise_of == "c1", points[2]
    run = Trajectory(run_id="r", direction="maximize", points=points, best_score=1.52, ndg=None)
    line = standing_line(run, "c3", "×")
    assert "within noise of c1, an earlier new best; the last new best is c2 (bench.compare c3 and c2 by id" in line, line


def test_a_new_best_says_which_of_the_two_bests_it_is_not_shown_better_than():
    """c2 led c1 within its noise; c6 cleared c1's interval but overlapped c2's almost wholly, and its
    line, "beyond noise of the run's earlier best (c1, the last new best, or c2, the leader before
    it)", read as beating c2, which a compare then found faster (mp73). Still a new best (a chain of
    leads within noise cannot hide a gain over c1), and the one it is not shown better than is named."""
    from evoteam.servers.bench.evaluation.standing import standing_line
    from evoteam.servers.knowledge.trajectory import Trajectory

    rows = [_row(1, 13.8, 12.5, 15.198), _row(2, 16.26, 15.06, 17.83), _row(6, 16.4, 15.207, 17.2)]

    def points_with(pairs):
        points, best = trajectory_points(rows, "maximize", 1.0, lambda a, b: pairs.get((a, b)))
        return {p.candidate_id: p for p in points}, Trajectory(run_id="r", direction="maximize", points=points,
                                                               best_score=best["score"], ndg=None)

    by, run = points_with({})
    assert by["c2"].within_noise_of == "c1" and by["c6"].new_best and by["c6"].not_shown_better_than == "c2", by["c6"]
    line = standing_line(run, "c6", "×")
    assert line == ("new best of the run: beyond noise of c1, the last new best (by their intervals), but not shown "
                    "better than c2, the leader before it: bench.compare c6 and c2 by id before building on either"), line
    # Shown better than both: nothing left open, both named as before.
    by, run = points_with({("c2", "c6"): "better"})
    assert by["c6"].new_best and by["c6"].not_shown_better_than is None, by["c6"]
    # Found better than c1 side by side, and within noise of c2 by intervals: c2 is left open.
    by, run = points_with({("c1", "c6"): "better"})
    assert by["c6"].new_best and by["c6"].not_shown_better_than == "c2", by["c6"]
    assert "beyond noise of c1, the last new best (by their paired rounds), but not shown better than c2" in \
        standing_line(run, "c6", "×")
    # Paired rounds with c2 that find no difference leave it open, however the intervals stand (review).
    clear = [_row(1, 13.8, 12.5, 15.198), _row(2, 16.26, 15.06, 17.0), _row(6, 17.5, 17.1, 17.9)]
    points, _ = trajectory_points(clear, "maximize", 1.0)
    assert points[2].new_best and points[2].not_shown_better_than is None, points[2]
    points, _ = trajectory_points(clear, "maximize", 1.0, lambda a, b: "tied" if (a, b) == ("c2", "c6") else None)
    assert points[2].new_best and points[2].not_shown_better_than == "c2", points[2]
    # In the reply to a compare of the two: no compare of them asked for again.
    by, run = points_with({})
    assert standing_line(run, "c6", "×", compared_with="c2").endswith(
        "but not shown better than c2, the leader before it: the verdict above is what their paired rounds say")
    # Clearing the leader before it but not c1's wide interval: c1 is the one left open.
    wide = [_row(1, 1.5, 1.1, 2.0), _row(2, 1.25, 1.2, 1.3), _row(3, 1.4, 1.35, 1.45)]
    points, _ = trajectory_points(wide, "maximize", 1.0)
    assert points[2].new_best and points[2].not_shown_better_than == "c1", points[2]
    # Where the two are one candidate, nothing is left open.
    points, _ = trajectory_points([_row(1, 1.5, 1.45, 1.55), _row(2, 1.7, 1.65, 1.75)], "maximize", 1.0)
    assert points[1].new_best and points[1].not_shown_better_than is None, points[1]


def test_a_new_best_tied_side_by_side_with_the_other_says_so_rather_than_ask_for_a_compare():
    """A new best whose paired rounds with the leader before it find no difference was told "not shown
    better than c2: bench.compare c6 and c2 by id before building on either", a compare already made
    (rev75 M3). The point says why it is left open (not_shown_by), and the line says what the rounds
    found; an overlap of intervals alone still asks for the compare, and a lead by the style's share
    alone says so."""
    from evoteam.servers.bench.evaluation.standing import program_words, standing_line
    from evoteam.servers.knowledge.trajectory import Trajectory

    rows = [_row(1, 13.8, 12.5, 15.198), _row(2, 16.26, 15.06, 17.0), _row(6, 17.5, 17.1, 17.9)]

    def line_for(pairs, styles=None, compared_with=None):
        points, best = trajectory_points(rows, "maximize", 1.0, lambda a, b: pairs.get((a, b)), styles)
        run = Trajectory(run_id="r", direction="maximize", points=points, best_score=best["score"], ndg=None)
        return points[2], standing_line(run, "c6", "×", compared_with=compared_with, styles=styles)

    point, line = line_for({("c2", "c6"): "tied"})
    assert point.new_best and (point.not_shown_better_than, point.not_shown_by) == ("c2", "paired rounds"), point
    assert line.startswith("new best of the run: beyond noise of c1, the last new best (by their intervals), but not "
                           "shown better than c2, the leader before it: their paired rounds find no difference: "
                           "report the two as one result"), line
    assert "before building on either" not in line and "bench.compare c6 and c2 by id" not in line, line
    # The same in a program's words: its runs are not paired.
    assert "their runs find no significant difference" in program_words(line), program_words(line)
    # Also where the new best was decided by paired rounds with c1.
    point, line = line_for({("c2", "c6"): "tied", ("c1", "c6"): "better"})
    assert point.not_shown_by == "paired rounds" and "(by their paired rounds), but not shown better than c2, the " \
        "leader before it: their paired rounds find no difference" in line, line
    # Found better than c1, and over a returning c2 by destination passing style's share alone: no
    # faster kernel than c2 shown.
    styles = {"c1": "returns", "c2": "returns", "c6": "dps"}
    point, line = line_for({("c2", "c6"): "style", ("c1", "c6"): "better"}, styles)
    assert point.new_best and (point.not_shown_better_than, point.not_shown_by) == \
        ("c2", "destination passing style's share"), point
    assert "but not shown better than c2, the leader before it: it is ahead of c2 by no more than destination " \
        "passing style's share" in line and "bench.compare" not in line, line
    # Intervals that overlap, with no paired rounds: the compare is still what tells them apart.
    overlap = [_row(1, 13.8, 12.5, 15.198), _row(2, 16.26, 15.06, 17.83), _row(6, 16.4, 15.207, 17.2)]
    points, _ = trajectory_points(overlap, "maximize", 1.0)
    assert (points[2].not_shown_better_than, points[2].not_shown_by) == ("c2", "intervals"), points[2]
    # Nothing left open: no reason given either.
    points, _ = trajectory_points(rows, "maximize", 1.0)
    assert points[2].not_shown_better_than is None and points[2].not_shown_by is None, points[2]


def test_a_returning_lead_behind_a_passing_best_by_the_styles_share_is_no_slower_kernel():
    """c2 passes destination style; c3, the same kernel returning its outputs, took the lead by its
    interval, and their paired rounds find c2 ahead by 1.03x: within that style's share. c3 read
    "worse_than c2 (paired rounds)" while remeasure said no faster kernel is shown (rev75 L2, mp76).
    It is no slower kernel than c2: what it clears otherwise is a kernel's, and what it does not, it
    is within noise of. Beyond the share, paired rounds that find it slower still make it worse. A
    returning leader is no leader by the style's share: one ranked below it is not announced for
    trailing it (rev76)."""
    from evoteam.servers.bench.evaluation.standing import standing_line
    from evoteam.servers.knowledge.trajectory import Trajectory

    rows = [_row(1, 3.2, 2.9, 3.67), _row(2, 3.73, 3.41, 4.08), _row(3, 3.76, 3.53, 3.99)]
    styles = {"c1": "returns", "c2": "dps", "c3": "returns"}

    def run_of(pairs, styles_, rows_=rows):
        points, best = trajectory_points(rows_, "maximize", 1.0, lambda a, b: pairs.get((a, b)), styles_)
        return {p.candidate_id: p for p in points}, Trajectory(run_id="r", direction="maximize", points=points,
                                                               best_score=best["score"], ndg=None)

    # The pairs as comparisons.paired_sides reads them: "style" either way round. c3 does not clear c1.
    by, run = run_of({("c2", "c3"): "style", ("c1", "c2"): "style"}, styles)
    assert by["c3"].worse_than is None and not by["c3"].new_best, by["c3"]
    assert (by["c3"].within_noise_of, by["c3"].decided_by) == ("c1", "intervals"), by["c3"]
    # A returning leader: the candidate ranked below it, overlapping it, is no new best for trailing it.
    more = [_row(1, 1.3, 1.25, 1.35), _row(2, 1.5, 1.3, 1.7), _row(3, 1.6, 1.5, 1.7), _row(4, 1.45, 1.4, 1.5)]
    by, run = run_of({("c2", "c3"): "style"}, {**styles, "c4": "returns"}, more)
    # c3 clears c1 by intervals, both returning: a faster kernel than c1, and open with c2 by the style.
    assert by["c3"].new_best and (by["c3"].not_shown_better_than, by["c3"].not_shown_by) == \
        ("c2", "destination passing style's share"), by["c3"]
    assert not by["c4"].new_best and by["c4"].within_noise_of == "c3", by["c4"]
    line = standing_line(run, "c3", "×", styles=styles)
    assert line.startswith("new best of the run: beyond noise of c1, the last new best (by their intervals), but not "
                           "shown better than c2, the leader before it: c2 is ahead of it by no more than destination "
                           "passing style's share (c2 writes into outputs it is given, c3 returns its own"), line
    # Worse by more than the share (paired_sides reads "worse"): worse, as before.
    by, _ = run_of({("c2", "c3"): "worse", ("c1", "c3"): "better"}, styles)
    assert by["c3"].worse_than == "c2" and by["c3"].decided_by == "paired rounds", by["c3"]
    # Found better than c1 side by side (a faster kernel than c1: c2 led it by the style's share alone,
    # mp76's c2r) and behind c2 by the share alone: a new best, open with c2 by the style, said in the
    # direction the styles give.
    by, run = run_of({("c1", "c2"): "style", ("c2", "c3"): "style", ("c1", "c3"): "better"}, styles)
    assert by["c3"].new_best and (by["c3"].not_shown_better_than, by["c3"].not_shown_by) == \
        ("c2", "destination passing style's share"), by["c3"]
    line = standing_line(run, "c3", "×", styles=styles)
    assert "but not shown better than c2, the leader before it: c2 is ahead of it by no more than destination " \
        "passing style's share" in line, line


def test_a_lead_whose_paired_rounds_do_not_find_it_ahead_of_the_leader_before_it_does_not_clear_it():
    """c3 returns its outputs and leads c2, which passes destination style, by a clear interval;
    their paired rounds find c2 ahead by that style's share (or no difference). c3 was announced
    "beyond noise of c2" while c2's line said it was ahead of c3 (rev77): paired rounds decide where
    they exist, so the leader before it is not cleared, and c1's wide interval is not either."""
    rows = [_kernel(1, 1.5, 1.2, 1.8, dps=False), _kernel(2, 1.55, 1.50, 1.60, dps=True),
            _kernel(3, 1.7, 1.62, 1.78, dps=False)]
    for side in ("style", "tied"):
        points, _ = trajectory_points(rows, "maximize", 1.0, lambda a, b: side if {a, b} == {"c2", "c3"} else None)
        c3 = points[2]
        assert not c3.new_best and c3.worse_than is None, (side, c3)
        assert c3.within_noise_of in ("c1", "c2") and c3.best_so_far_id == "c3", (side, c3)
    # With no paired rounds, the same intervals clear c2: a new best, open with c1's wide interval.
    points, _ = trajectory_points(rows, "maximize", 1.0)
    assert points[2].new_best and (points[2].not_shown_better_than, points[2].not_shown_by) == ("c1", "intervals")


def test_a_leader_tied_with_the_leader_before_it_names_the_last_new_best_where_there_is_one():
    """c3 leads c2 by rank and their paired rounds find no difference; c2 was never announced, but c1
    was. c3's line said "the leader before it (none is announced past x0 yet)" (rev77)."""
    from evoteam.servers.bench.evaluation.standing import standing_line
    from evoteam.servers.knowledge.trajectory import Trajectory

    rows = [_row(1, 1.5, 1.2, 1.8), _row(2, 1.55, 1.50, 1.60), _row(3, 1.58, 1.51, 1.65)]
    points, best = trajectory_points(rows, "maximize", 1.0, lambda a, b: "tied" if {a, b} == {"c2", "c3"} else None)
    assert points[0].new_best and not points[1].new_best and points[2].within_noise_of == "c2", points
    line = standing_line(Trajectory(run_id="r", direction="maximize", points=points, best_score=best["score"],
                                    ndg=None), "c3", "×")
    assert "within noise of c2, the leader before it; the last new best is c1 (bench.compare c3 and c1 by id to " \
        "tell them apart)" in line and "none is announced" not in line, line


def test_a_leader_found_worse_side_by_side_sends_others_to_the_one_found_better():
    """c6 leads the ranking by a hair of its interval, but a compare found c2 faster; c2 and c5 were
    compared next, and c5's line said "not the run's best: that is c6 …; bench.compare c5 and c6 by
    id", a compare of two both found slower than c2 (mp73). The lines name c2, and send to it only
    where nothing has told the two apart yet."""
    from evoteam.servers.bench.evaluation.standing import standing_line
    from evoteam.servers.knowledge.trajectory import Trajectory

    rows = [_row(1, 13.8, 12.5, 15.198), _row(2, 16.26, 15.06, 17.83), _row(5, 15.1, 14.0, 16.2),
            _row(6, 16.4, 15.207, 17.2), _row(9, 16.0, 14.9, 17.1)]

    def run_with(pairs, more=()):
        points, best = trajectory_points([*rows, *more], "maximize", 1.0, lambda a, b: pairs.get((a, b)))
        return {p.candidate_id: p for p in points}, Trajectory(run_id="r", direction="maximize", points=points,
                                                               best_score=best["score"], ndg=None)

    # With c6 also found better than c1 side by side, its loss to c2 still decides (review: the
    # announced best's rounds decided first, and c6 stayed "new best").
    for pairs in ({("c2", "c6"): "worse", ("c2", "c5"): "worse"},
                  {("c2", "c6"): "worse", ("c2", "c5"): "worse", ("c1", "c6"): "better"}):
        by, run = run_with(pairs)
        assert not by["c6"].new_best and by["c6"].worse_than == "c2" and by["c6"].decided_by == "paired rounds", \
            (pairs, by["c6"])
        # c5 was itself found worse than c2: no compare asked of it.
        line = standing_line(run, "c5", "×", compared_with="c2")
        assert line == ("not the run's best: that is c6 at 16.4× (15.2–17.2), which leads the run's ranking, though "
                        "c2 is found better than c6 side by side; it is worse than c2 too (by their paired rounds)"), line
        # One made after the leader, within its noise: sent to c2, not to c6; in a compare with c2, not again.
        line = standing_line(run, "c9", "×")
        assert line == ("not a new best: within noise of the run's best c6 at 16.4× (15.2–17.2) (by their intervals), "
                        "though c2 is found better than c6 side by side; bench.compare c9 and c2 by id to tell them "
                        "apart"), line
        assert standing_line(run, "c9", "×", compared_with="c2").endswith(
            "; the verdict above is what their paired rounds say"), standing_line(run, "c9", "×", compared_with="c2")
        # c2's own line: the better of the two side by side, as before.
        assert "though their paired rounds find it better" in standing_line(run, "c2", "×")
    # c1 tied with c2 side by side: no compare of the two asked, their rounds' verdict said.
    by, run = run_with({("c2", "c6"): "worse", ("c1", "c2"): "tied"})
    line = standing_line(run, "c1", "×")
    assert "; with c2, their paired rounds find no difference: report the two as one result" in line and \
        "bench.compare c1 and c2" not in line, line
    # Found worse than c2 by its interval, not side by side: no compare asked of it either (review).
    low = [_row(1, 13.8, 12.5, 15.198), _row(2, 16.26, 15.06, 17.83), _row(5, 13.0, 12.6, 13.4),
           _row(6, 16.4, 15.207, 17.2)]
    points, best = trajectory_points(low, "maximize", 1.0, lambda a, b: {("c2", "c6"): "worse"}.get((a, b)))
    run_low = Trajectory(run_id="r", direction="maximize", points=points, best_score=16.4, ndg=None)
    assert standing_line(run_low, "c5", "×").endswith("; it is worse than c2 too (by their intervals)"), \
        standing_line(run_low, "c5", "×")
    # A later lead that clears c1 but not c2 names c2, the lead it is judged against, not c6, the rank
    # leader found worse (review: "beyond noise of c1 and c6" was said, and 15.3 < 17.2), and says why
    # listings show c6 before it.
    by, run = run_with({("c2", "c6"): "worse"}, [_row(10, 16.5, 15.3, 17.7)])
    assert by["c10"].new_best and by["c10"].not_shown_better_than == "c2", by["c10"]
    line = standing_line(run, "c10", "×")
    assert line.startswith("new best of the run: beyond noise of c1, the last new best (by their intervals), but not "
                           "shown better than c2, the leader before it by paired rounds (c6, which ranked first, was "
                           "found worse than it): bench.compare c10 and c2 by id"), line


def test_one_found_better_than_the_leader_and_worse_than_another_names_that_other():
    """c4, found better than the leader c3 side by side but worse than c2, was told "it is the better
    of the two; remeasure", with no word of c2, which beat both (review of mp73's fixes)."""
    from evoteam.servers.bench.evaluation.standing import standing_line
    from evoteam.servers.knowledge.trajectory import Trajectory

    rows = [_row(1, 1.5, 1.45, 1.55), _row(2, 1.8, 1.7, 1.9), _row(3, 1.85, 1.75, 1.95), _row(4, 1.8, 1.6, 2.0)]
    pairs = {("c2", "c3"): "worse", ("c3", "c4"): "better", ("c2", "c4"): "worse"}
    points, best = trajectory_points(rows, "maximize", 1.0, lambda a, b: pairs.get((a, b)))
    by = {p.candidate_id: p for p in points}
    assert best["id"] == "c3" and by["c3"].worse_than == "c2" and by["c4"].better_than == "c3", by["c4"]
    run = Trajectory(run_id="r", direction="maximize", points=points, best_score=1.85, ndg=None)
    line = standing_line(run, "c4", "×")
    assert line.endswith("; c2 is found better than c3 too: bench.compare c4 and c2 by id to tell those two apart"), line
