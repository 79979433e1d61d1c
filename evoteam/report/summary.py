"""The report's numbers, small enough for a tool reply: what a supervisor reads to see the run
the way its report draws it (per-version bests and costs, spend by role, retrieval quality)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, computed_field

from evoteam import stats
from evoteam.config import Settings
from evoteam.report.data import RunReport, VersionPoint, gather
from evoteam.report.remeasure import MeasurementSet, remeasure_run
from evoteam.passingstyle import share_text
from evoteam.report.styles import DPS_BEFORE
from evoteam.servers.knowledge.readsql import ranked_by
from evoteam.servers.knowledge.store import KnowledgeStore
from evoteam.servers.team.budget import costs_unrecorded, unrecorded_note


class VersionLine(BaseModel):
    version: int
    roles: list[str]
    best_dev_score: float | None = Field(description="its best's score, every measurement of its code pooled: it "
                                         "moves as evaluations and re-measurements add rounds")
    best_interval: list[float] | None = None
    best_runs: int | None = Field(default=None, description="set where the best is from too few runs for a 95% "
                                  "interval: how many")
    best_candidate_id: str | None = None
    gain: str | None = Field(default=None, description="the version's best over the best before it (the first "
                             "version's: against the starting score x0), its "
                             "interval and verdict (significant; within noise; worse; no significant difference; "
                             "no gain; or not established: busy, too few runs, overlapping), or why none")
    significant_gain: bool | None = None
    gap_closed: float | None = Field(default=None, description="the share of what was left between the best "
                                     "before it and the kit's best known that this version closed: a "
                                     "significant gain of a tiny share is a plateau")
    cost_usd: float
    spent_usd_when_designed: float


class RunSummary(BaseModel):
    run_id: str
    direction: str
    best_dev_score: float | None = Field(description="the run's best, every measurement of its code pooled (it moves "
                                         "as rounds are added)")
    best_dev_interval: list[float] | None = None
    best_dev_runs: int | None = Field(default=None, description="set where the best is from too few runs for a "
                                     "95% interval: how many")
    best_candidate_id: str | None
    best_dev_note: str | None = Field(default=None, description="set where the last re-measurement told the best "
                                      "apart from none of some finalists: what its score is then")
    best_heldout_score: float | None
    best_heldout_interval: list[float] | None = None
    best_heldout_runs: int | None = Field(default=None, description="the same for the held-out best")
    best_heldout_candidate_id: str | None = Field(default=None, description="the held-out record that scored it "
                                                  "(bench.evaluate split heldout)")
    best_heldout_of: str | None = Field(default=None, description="the dev candidate that held-out record checked")
    ndg: float | None
    spent_usd: float
    budget_usd: float | None
    candidates: int = Field(description="every recorded candidate, held-out records included")
    heldout_records: int = Field(default=0, description="of those, held-out checks (bench.evaluate split heldout)")
    failed_candidates: int
    flagged_candidates: int
    versions: list[VersionLine]
    versions_without_significant_gain: int = Field(description="team versions in a row, up to the newest, whose "
                                                   "best did not significantly beat the best before it (the "
                                                   "first version's: the starting score x0; the stop "
                                                   "rule counts these; a gain not established, significant_gain "
                                                   "null, is not counted until its gain text's tool settles it)")
    spend_by_role: dict[str, float]
    gate_decisions: dict[str, int]
    repeated_url_rate: float | None
    spearman_predicted_vs_realised: float | None
    costs: str | None = Field(default=None, description="set when nothing records this run's costs: spent_usd "
                                                       "is then not what was spent")
    remeasure_changed: list[str] = Field(default_factory=list,
                                         description="finalists whose place in the order by pessimistic bound the "
                                                     "newest re-measurement moved (`bench.remeasure`'s rule)")
    remeasure_within_noise_of_top: list[str] = Field(default_factory=list,
                                                     description="finalists the newest remeasure (ranking two or "
                                                                 "more) could not tell from its top, still the "
                                                                 "run's best")
    remeasure_better_than_top: list[str] = Field(default_factory=list,
                                                 description="of those, the ones its paired rounds find better "
                                                             "than that top")
    remeasure_missing: list[str] = Field(default_factory=list,
                                         description="version bests the newest re-measurement (of two "
                                                     "finalists or more) did not measure (found after it; every "
                                                     "one while none ran): bench.remeasure before crowning one or "
                                                     "the held-out check")
    roles_not_ended: list[str] = Field(default_factory=list, description="roles of the newest team version whose "
                                       "sessions have not ended (planned or running): its result may still move "
                                       "(without the hooks, team.record_role_result records an end)")
    report_command: str

    @computed_field(description="what orders candidates: why a higher score can rank lower")
    @property
    def ranked_by(self) -> str:
        return ranked_by(self.direction)


def _reads(v: VersionPoint, direction: str | None) -> str:
    """A program's gain is B - A, better below 0 when minimising: which way it reads, where no
    verdict says (a model read an undecided +0.000179 as a gain; model-play 2026-12-04)."""
    if not direction or v.gain_is_ratio or not v.gain or v.significant is True or v.worse:
        return ""
    return " (reads better)" if stats.favours_b(v.gain, "program", direction) else " (reads worse)"


def gain_text(v: VersionPoint, direction: str | None = None) -> str | None:
    """_gain_text, and where the version's best returns its outputs and the best before it passes
    destination style, its gain over the best before it of its own style (report/styles.py)."""
    if not v.own_style:
        return _gain_text(v, direction)
    if v.over_before is None:
        return f"{_gain_text(v, direction)} ({DPS_BEFORE}); {v.own_style}"
    # The deciding verdict first: two verdicts side by side read as either (review).
    said = v.model_copy(update=dict(zip(("significant", "worse"), v.over_before)))
    return f"{v.own_style}; {_gain_text(said, direction)} ({DPS_BEFORE})"


def _gain_text(v: VersionPoint, direction: str | None = None) -> str | None:
    """"1.06× (0.98–1.15) over the best before it: within noise" (or "significant", "worse, beyond
    noise", "no gain", "not established" with what settles it; from paired rounds "significant",
    "worse, significant" or "no significant difference") — or why there is no gain to show."""
    if v.best_of_version is None:
        # Said why the stop rule leaves it out (a count that skipped it unsaid; review 2026-12-06).
        return "no ranked candidate yet: its roles have not ended, so the stop rule does not count it" \
            if v.in_progress else "no ranked candidate"
    if v.unmeasured_lead and v.significant is None:  # before the gain's own text: the lead is what decides
        lead = (f"not established: {v.unmeasured_lead}, from too few runs, reads better than the version's best "
                "and the best before it, and ranks after them until it has run "
                f"{stats.EXACT_MIN_RUNS} times (bench.remeasure with candidate_ids)")
        return lead if v.gain is None or v.best_before is None else \
            f"{stats.sig3(v.gain)}{'×' if v.gain_is_ratio else ''}{_reads(v, direction)} over {_before(v)}; {lead}"
    if v.best_before is None:
        return v.gain_note or "first ranked result"
    if v.gain is None:
        return v.gain_note or ("did not beat the best before it" if v.best_candidate_id else None)
    unit = "×" if v.gain_is_ratio else ""
    if v.gain_interval and v.gain_interval[0] < v.gain_interval[1]:
        shown = stats.describe(stats.Estimate(v.gain, *v.gain_interval, 0), unit)
    elif v.gain_exact:  # to all its digits, as the exact scores it is the difference of
        shown = stats.describe(stats.Estimate(v.gain, v.gain, v.gain, stats.EXACT_MIN_RUNS, 1.0), unit)
    else:  # a point from too few runs for an interval
        shown = stats.sig3(v.gain) + unit
    shown += _reads(v, direction)
    if v.short_of_start:
        return f"{shown} over {_before(v)}, but {v.gain_note}: no gain"
    if v.promoted_over and v.significant is None and not v.paired_batches and not v.contended:
        return (f"{shown} over {_before(v)}: not established: that best beats {v.promoted_over}, the top by "
                f"intervals, side by side, and the intervals cannot tell the version's best from it "
                f"({_compare_call(v)}: its paired verdict decides)")
    if v.style_share:  # either way round: which one passes is read from the gain (styles.within_style_share)
        ahead, behind = ("the version's best", "the best before it") if v.gain > 1 else \
            ("the best before it", "the version's best")
        return (f"{shown} over {_before(v)}: no {'faster' if v.gain > 1 else 'slower'} kernel shown: {ahead} "
                f"writes its outputs into slots allocated outside the clock (destination passing), {behind} "
                f"allocates the ones it returns inside it, which alone was {share_text()} "
                "(docs/bench.md): counted as a stall, as a faster kernel shows as a gain over a best of its "
                "own style")
    # Three verdicts, never two: a version clearly worse than the best before it is not "within
    # noise" (a model reading that would take a regression for a tie).
    verdict = "significant" if v.significant else "worse, beyond noise" if v.worse else "within noise"
    if verdict == "within noise" and v.gain_interval and not (v.gain_interval[0] <= stats.no_effect(
            "kernel" if v.gain_is_ratio else "program") <= v.gain_interval[1]):
        verdict = "within noise (the two bests' intervals overlap)"
    if v.paired_batches:  # paired rounds of the two bests settled it, whatever their own intervals said
        said = "significant" if v.significant else "worse, significant" if v.worse else "no significant difference"
        if v.better_as_pair:  # the crown and compare's verdict read 95%: why this line does not (mp67)
            said += (f" as the best of {v.picked_of}; at 95%, as one named pair (compare's verdict, which the run's "
                     "crown follows), they find it better: not yet a significant gain for the version")
        # A program's runs are not paired, nor timed: "timed side by side (a paired batch)" read as a
        # kernel's words on a program kit (mp59).
        kind = "paired " if v.gain_is_ratio else ""
        batches = f"a {kind}batch" if v.paired_batches == 1 else f"{v.paired_batches} {kind}batches pooled"
        if v.picked_of > 1:  # why a gain read beyond 1 in one batch may still be no significant one
            batches += f"; its best picked from {v.picked_of} candidates, so a {_picked_interval(v.picked_of)} interval"
        busy = ", on a busy machine: more compares of the two narrow it" if v.paired_busy and not (
            v.significant or v.worse) else ""  # a difference found holds; a busy "none" may hide a small one
        side_by_side = "timed side by side" if v.gain_is_ratio else "run side by side"
        return f"{shown} over {_before(v)}, {side_by_side} ({batches}{busy}): {said}"
    if v.few_runs and not v.side_by_side:  # no 95% interval of the gain: nothing is within noise or beyond it
        if v.significant is None:
            return (f"{shown} over {_before(v)}: not established, too few runs for a 95% interval "
                    "(bench.remeasure both: their runs pool; 5 alike a side make a gain exact)")
        return f"{shown} over {_before(v)}: no gain (too few runs for a 95% interval)"
    if v.overlap and v.significant is None and not v.contended:
        # A kernel kit's intervals keep a few percent for the process-to-process difference, so more
        # rounds cannot part two bests less than ~6% apart; one paired batch of the two can decide.
        how = (f"{_compare_call(v)}: its paired verdict decides" if v.gain_is_ratio
               else "bench.remeasure both: more runs narrow them")
        return (f"{shown} over {_before(v)}: not established, the gain's interval excludes no change but "
                f"the two bests' intervals overlap ({how})")
    if v.contended and v.side_by_side:
        if v.significant is None:  # two batch intervals, each keeping the difference between processes
            return (f"{shown} over {_before(v)} side by side (bench.remeasure): not established, the "
                    f"batch's intervals overlap ({_compare_call(v)}: its paired verdict decides)")
        if v.significant is False and not v.worse:
            return f"{shown} over {_before(v)} side by side (bench.remeasure): no gain"
        return f"{shown} over {_before(v)} side by side (bench.remeasure): {verdict}"
    if v.contended and v.significant is None:
        return (f"{shown} over {_before(v)}: not established, measured on a contended machine "
                "(bench.remeasure both side by side)")
    if v.contended:  # reads worse, or no better, on a busy machine: no gain, and no more than that known
        # Counted as a stall, as any version that reads no better; paired rounds may still turn it
        # (a model read it as settled before any existed; model-play 2026-12-04).
        # "to settle it" read as unsettled beside significant_gain: false and the stall counted (mp43).
        return (f"{shown} over {_before(v)}: no gain, counted as a stall (measured on a contended machine; "
                "paired rounds of bench.remeasure both side by side can still turn it)")
    return f"{shown} over {_before(v)}: {verdict}"


def _before(v: VersionPoint) -> str:
    """Which best the gain is over, by id: "the best before it" read as the previous version's
    own best where it was an earlier one's (model-play 2026-12-04)."""
    return f"the best before it ({v.best_before_id})" if v.best_before_id else "the best before it"


def _compare_call(v: VersionPoint) -> str:
    """The compare that settles the gain, with the two ids: "the two bests" read as the version's
    and the previous version's, where the best before it was another's (model-play 2026-12-03)."""
    return f"bench.compare a_candidate_id={v.best_before_id} b_candidate_id={v.best_candidate_id}"


def version_line(v: VersionPoint, direction: str, best_known: float | None = None) -> VersionLine:
    # Where the gain is over a best of the version's own style, the gap from the best before it is no measure.
    gain, closed = gain_text(v, direction), None if v.over_before else gap_closed(v, best_known)
    if gain and closed is not None and v.significant:
        # An exact evaluator calls every difference significant: a model kept a run going on gains of
        # 0.04% of the gap, the stop rule never firing (model-play 2026-12-04). Said, for it to weigh.
        gain += f" (it closed {closed:.2%} of the gap to the best known {best_known:.7g})"
    return VersionLine(version=v.version, roles=v.roles, best_dev_score=v.best_of_version,
                       best_interval=v.best_interval, best_runs=v.best_runs if v.best_few_runs else None,
                       best_candidate_id=v.best_candidate_id, gain=gain,
                       significant_gain=v.significant, gap_closed=closed,
                       cost_usd=v.cost_usd, spent_usd_when_designed=v.spent_usd)


def gap_closed(v: VersionPoint, best_known: float | None) -> float | None:
    """(version's best − best before) / (best known − best before): the share of the way there."""
    if best_known is None or v.best_before is None or v.best_of_version is None or best_known == v.best_before:
        return None
    return (v.best_of_version - v.best_before) / (best_known - v.best_before)


def stalled_versions(report: RunReport) -> int:
    """Versions in a row, newest backwards, without a significant gain (the first version counts as a
    gain when its best clears the starting score x0, or, in a run without one, when it produced any
    ranked result)."""
    n = 0
    for v in reversed(report.versions):
        if v.in_progress:
            continue  # designed, its roles not ended, nothing evaluated yet: no verdict (counted one at design; mp54)
        if (v.contended or v.few_runs or v.overlap or v.promoted_over) and v.significant is None:
            continue  # busy, too few runs or overlapping bests, and not settled: no verdict either way
        if v.gain is None and v.gain_note and v.best_before is not None and v.best_of_version is not None:
            continue  # two bests the report cannot compare (gain_note says why): no verdict either (review 2026-12-04)
        # A first version gains by clearing x0 where the run has one, else by any ranked result.
        gained = v.significant is True or (v.best_before is None and v.best_of_version is not None
                                           and v.significant is None)
        if gained:
            break
        n += 1
    return n


def summarise(report: RunReport, max_versions: int = 30) -> RunSummary:
    run = report.run
    decisions: dict[str, int] = {}
    for g in report.retrieval.gates:
        decisions[g.decision] = decisions.get(g.decision, 0) + 1
    return RunSummary(
        run_id=run.id, direction=run.direction, best_dev_score=run.best_score, best_dev_interval=run.best_interval,
        best_candidate_id=report.best_candidate_id,
        best_heldout_score=report.best_heldout, best_heldout_interval=report.best_heldout_interval,
        best_heldout_runs=report.best_heldout_runs,
        best_dev_runs=run.best_runs if run.best_runs is not None and run.best_runs < stats.EXACT_MIN_RUNS
        and not run.best_exact else None,
        best_heldout_candidate_id=report.best_heldout_id, best_heldout_of=report.best_heldout_of, ndg=run.ndg,
        spent_usd=run.spent_usd, budget_usd=run.budget_usd, candidates=len(report.candidates),
        heldout_records=sum(1 for c in report.candidates if c.split == "heldout"),
        failed_candidates=sum(1 for c in report.candidates if c.status != "PASSED"),
        flagged_candidates=sum(1 for c in report.candidates if c.flagged),
        versions=[version_line(v, report.direction, report.run.best_known) for v in report.versions[-max_versions:]],
        versions_without_significant_gain=stalled_versions(report),
        spend_by_role={s.label: round(s.usd, 4) for s in report.spend_by_role},
        gate_decisions=decisions, repeated_url_rate=report.retrieval.repeated_url_rate,
        spearman_predicted_vs_realised=report.retrieval.spearman,
        remeasure_changed=list(report.remeasured.changed) if report.remeasured else [],
        remeasure_within_noise_of_top=_within_noise_of_top(report),
        best_dev_note=_tied_best(report), remeasure_missing=_not_remeasured(report),
        remeasure_better_than_top=[c for c in (report.remeasured.better_than_top if report.remeasured else [])
                                   if c in _within_noise_of_top(report)],
        costs=unrecorded_note() if costs_unrecorded(len(report.spend_by_role), bool(report.candidates or report.versions))
        else None,
        report_command=f"evoteam report {run.id} -o report-{run.id}.html")


def _within_noise_of_top(report: RunReport) -> list[str]:
    """The newest re-measurement's finalists within noise of its top, while that top is still the
    run's best (after, the list spoke of another top: a model read it as a tie with the new one)."""
    mset = report.remeasured
    if mset is None or mset.order_after[:1] != [report.best_candidate_id]:
        return []
    return list(mset.within_noise_of_top)


def _not_remeasured(report: RunReport) -> list[str]:
    """Version bests the newest dev re-measurement did not measure: its lists speak of the bests
    it saw, and a model could not tell whether they covered the newest ones (mp39)."""
    mset = report.remeasured
    measured = {e.candidate_id for e in mset.entries} if mset is not None and "dev" in mset.splits else set()
    bests = [v.best_candidate_id for v in report.versions if v.best_candidate_id]
    return [c for c in dict.fromkeys(bests) if c not in measured]


def _tied_best(report: RunReport) -> str | None:
    """A best the last re-measurement could not tell apart from others is the top of equals, and
    the top of several equal draws reads high: its headline score was reported as the run's result
    while a finalist with the same operations read 8% lower (mp39)."""
    tied = _within_noise_of_top(report)
    better = [c for c in (report.remeasured.better_than_top if report.remeasured else []) if c in tied]
    if report.paired_best and report.paired_best != report.best_candidate_id:  # by a compare alone too (review)
        better = [report.paired_best]
    if better:  # "report them as one result" beside a finalist found faster side by side (mp64)
        return (f"ranks first by intervals, but the paired rounds find {better[0]} better than it "
                f"(bench.compare, bench.remeasure): crown {better[0]}, with that paired verdict; its wider interval "
                "ranks it below (bench.remeasure of the two on a quiet machine lets the ranking follow)")
    if not tied:
        return None
    # "the top of equals reads high" was cryptic (mp66).
    return (f"not told apart from {len(tied)} other finalist(s) (remeasure_within_noise_of_top): the highest "
            "of scores equal within noise is high by luck, so report them as one result; a held-out score is the "
            "best's independent measure")


async def summarise_run(store: KnowledgeStore, run_id: str) -> RunSummary:
    return summarise(await gather(store, run_id))


async def remeasure_with_gains(settings: Settings, store: KnowledgeStore, run_id: str,
                               **options: Any) -> MeasurementSet:
    """bench.remeasure: the finalists measured again (remeasure_run), then the version gains its
    pooled rounds decide, as run_report says them (a model needed a second call for the verdict
    the re-measurement was for; mp40, 2026-12-05)."""
    mset = await remeasure_run(settings, store, run_id, **options)
    if not (mset.pooled and "dev" in mset.splits):
        return mset
    if not mset._kept:  # run_report would read the gains without this call's rounds
        return mset.add_note("no version_gains: the run did not keep this call's rounds, which they would read")
    try:
        report = await gather(store, run_id)
    except Exception as exc:  # the batch is measured and stored: its reply is not lost for a read after it
        return mset.add_note(f"no version_gains: reading the run again failed ({type(exc).__name__}: {exc}); "
                             "team.run_report gives them")
    measured = {e.candidate_id for e in mset.entries}
    for v in report.versions:
        gain = version_line(v, report.direction, report.run.best_known).gain
        if gain and measured & {v.best_candidate_id, v.best_before_id}:
            mset.version_gains.append(f"v{v.version}: {gain}")
    return mset



def _picked_interval(picked_of: int) -> str:
    """"97.5%": the interval a verdict on the best of ``picked_of`` is read at."""
    return f"{100 * stats.picked_confidence(picked_of):.4g}%"
