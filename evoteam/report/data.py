"""Gather what a report draws from the store, through the same interfaces the tools use, so a
report works on the embedded file and on a shared knowledge server alike."""

from __future__ import annotations

import bisect
import math
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from evoteam import stats

from evoteam.servers.knowledge.measurements import (any_contended, beyond, candidate_estimate, clears_start,
                                                   kind_of, widened_for_load)
from evoteam.servers.knowledge.measurements import rank_key as measurements_rank_key
from evoteam.servers.knowledge.models import Candidate, Run, WorkloadResult
from evoteam.servers.knowledge.store import KnowledgeStore
from evoteam.servers.knowledge.verified import ranks
from evoteam.servers.knowledge.listing import all_candidates
from evoteam.report.remeasure import MeasurementSet, apart_by_pairs, latest_measurement_set
from evoteam.servers.bench.measurement.machine import QUIET_WHEN
from evoteam.servers.knowledge.pairedbest import paired_top
from evoteam.report.styles import better_as_pair, drop_style_leads, over_own_style, within_style_share
from evoteam.servers.knowledge.comparisons import ComparisonRecord, dev_comparisons, paired_verdict
from evoteam.servers.knowledge.standing import BASELINE, x0_is_baseline
from evoteam.servers.retrieval.models import RetrievalSeries

FAILED_SHOWN = 50  # failed candidates whose message the report reads and lists


def _failure_message(candidate) -> str:
    """The bench's message, else the first failing workload's, else the notes."""
    text = str((candidate.metrics or {}).get("message") or "")
    if not text:
        text = next((w.message for w in candidate.workloads if w.status != "PASSED" and w.message), "") or ""
    return (text or candidate.notes or "no message recorded").strip()[:600]


class CandidatePoint(BaseModel):
    """One evaluated candidate, placed on the run's cost axis."""

    id: str
    at: datetime
    score: float | None
    status: str
    split: str
    flagged: bool
    verified: bool = False
    role: str | None
    team_version: int | None
    spent_usd: float = Field(description="the run's cumulative spend when the candidate was recorded")
    best_so_far: float | None = None
    score_interval: list[float] | None = None
    rank_score: float | None = Field(default=None, description="what rankings compare (the store's rank_score)")
    n_measurements: int = 1
    runs: int | None = Field(default=None, description="set where the score is from too few runs for a 95% interval")
    message: str | None = Field(default=None, description="why it failed (failed candidates only)")


class VersionPoint(BaseModel):
    """One team version: when it was designed, what it changed, and what it achieved."""

    version: int
    at: datetime
    roles: list[str]
    diagnosis: str
    spent_usd: float = Field(description="cumulative spend when the version was designed")
    best_before: float | None = Field(description="the running best when the version was designed")
    best_of_version: float | None = Field(description="best dev score of the version's own candidates")
    cost_usd: float = 0.0
    best_candidate_id: str | None = None
    best_interval: list[float] | None = None
    gain: float | None = Field(default=None, description="the version's best over the best before it: a ratio "
                               "(kernel kits) or a difference (program kits)")
    gain_interval: list[float] | None = None
    gain_is_ratio: bool = Field(default=True, description="kernel kits: a ratio of speedups; program kits: a "
                                "difference of objectives")
    significant: bool | None = Field(default=None, description="the gain's whole interval lies on the better "
                                     "side of no change: progress, not noise")
    worse: bool = Field(default=False, description="the gain's whole interval lies on the worse side of no "
                        "change: the version's best is worse than the best before it, beyond noise")
    gain_note: str | None = None  # why there is no gain to show where both bests exist
    best_before_id: str | None = None
    side_by_side: bool = Field(default=False, description="the gain is from a re-measurement's two batch "
                               "intervals of the bests (paired rounds, where kept, decide over them)")
    few_runs: bool = Field(default=False, description="the two bests have too few runs (or rounds) for a 95% "
                           "interval of the gain (a program run once each): a gain that reads better is "
                           "undecided (significant None) until bench.remeasure has run both often enough")
    overlap: bool = Field(default=False, description="the gain's 95% interval excludes no change but the two "
                          "bests' intervals overlap: undecided (significant None) until more rounds narrow them")
    gain_exact: bool = Field(default=False, description="every run of both bests alike: the gain is exact")
    unmeasured_lead: str | None = Field(default=None, description="a candidate of the version, or from before it, "
                                        "from too few runs for a 95% interval whose score reads beyond the "
                                        "version's best and the best before it: undecided until it is measured")
    best_runs: int | None = Field(default=None, description="the runs (or rounds) behind the version's best")
    best_exact: bool = Field(default=False, description="every one of them alike")
    best_few_runs: bool = Field(default=False, description="too few of them for a 95% interval")
    short_of_start: bool = Field(default=False, description="better than the best before it, but the version's "
                                 "best does not clear the run's starting score x0: no gain")
    paired_busy: bool = Field(default=False, description="some of those paired batches ran on a busy machine")
    paired_batches: int = Field(default=0, description="the paired batches of the two bests (bench.compare, "
                                "bench.remeasure) whose pooled rounds decide the gain (0: none decides it)")
    picked_of: int = Field(default=1, description="where paired batches decide: the version's best was the top of "
                           "this many of its candidates, and the gain's interval is read at 1 - 0.05/picked_of")
    better_as_pair: bool = Field(default=False, description="not a significant gain at that level, but at 95%, "
                                 "as one named pair (compare's verdict, the run's paired_best), found better")
    in_progress: bool = Field(default=False, description="the newest version, some of its roles not ended and "
                              "nothing of theirs evaluated yet: no verdict, not a stall")
    style_share: bool = Field(default=False, description="one of the version's best and the best before it writes "
                              "into output slots allocated outside the clock (destination passing), the other returns "
                              "its outputs, and they are apart by no more than that style's share: no faster (or "
                              "slower) kernel either way (significant False, not worse): a stall")
    promoted_over: str | None = Field(default=None, description="the top by intervals before the version, which "
                                      "the best before it beats side by side (paired rounds)")
    own_style: str | None = Field(default=None, description="the version's best returns its outputs and the best "
                                  "before it passes destination style: its gain over the best before it of its own "
                                  "style, by their paired rounds, or the compare that decides it")
    over_before: tuple[bool | None, bool] | None = Field(default=None, description="set where own_style's gain "
                                                         "decided significant and worse: the two as they read over "
                                                         "the best before it, whose gain and interval these are")
    contended: bool = Field(default=False, description="one of the two bests was measured on a contended "
                            "machine: the gain is decided only by rounds that timed both side by side (paired "
                            "batches of bench.compare or bench.remeasure); until then significant is None, and the "
                            "stop rule does not count the version")


class SpendSlice(BaseModel):
    label: str
    usd: float


class RunReport(BaseModel):
    """Everything one run's report shows."""

    run: Run
    candidates: list[CandidatePoint]
    versions: list[VersionPoint]
    best_workloads: list[WorkloadResult] = Field(default_factory=list)
    best_candidate_id: str | None = None
    best_heldout: float | None = None
    best_heldout_id: str | None = None
    best_heldout_interval: list[float] | None = None
    best_heldout_runs: int | None = None
    best_heldout_of: str | None = None  # the dev candidate that held-out record checked (its parent)
    spend_by_role: list[SpendSlice] = Field(default_factory=list)
    spend_by_version: list[SpendSlice] = Field(default_factory=list)
    retrieval: RetrievalSeries = Field(default_factory=RetrievalSeries)
    direction: Literal["maximize", "minimize"] = "maximize"
    paired_best: str | None = Field(default=None, description="the dev top by intervals, or the candidate the kept "
                                    "paired rounds find better than it (knowledge.pairedbest.paired_top)")
    remeasured: MeasurementSet | None = Field(default=None, description="the newest `evoteam bench remeasure` "
                                              "of this run that ranked two finalists or more, else the newest")

    @property
    def interventions(self) -> list[VersionPoint]:
        """Versions after the first: the moments the supervisor restructured the team."""
        return [v for v in self.versions if v.version > 1]

    @property
    def failed(self) -> list[CandidatePoint]:
        """Candidates that did not pass (or never finished), newest first."""
        return [c for c in reversed(self.candidates) if c.status != "PASSED"]


def rank_key(c: CandidatePoint, direction: str) -> tuple[int, float]:
    """What rankings compare, larger is better, as best_candidates and get_run rank
    (measurements.rank_key): a score with a 95% interval first, then the store's rank_score."""
    return measurements_rank_key(c.rank_score, c.score, c.score_interval, direction, c.runs is not None)


def _ranks(c: CandidatePoint) -> bool:
    # Only bench-verified, unflagged results rank (knowledge/verified.py; docs/bench.md).
    return ranks(c.status, c.score, c.verified, c.flagged)


async def _version_gain(store: KnowledgeStore, vp: VersionPoint, before_id: str, own_id: str,
                        direction: str) -> None:
    """The version's best against the best before it, from both candidates' pooled rounds."""
    a, b = await store.get_candidate(before_id), await store.get_candidate(own_id)
    if not a.samples or not b.samples:
        vp.gain_note = "not comparable: no rounds recorded for one of the two bests"
        return
    kind = "program" if set(b.samples) == {"program"} else "kernel"
    if set(a.samples) != set(b.samples):
        vp.gain_note = "not comparable: the two bests were measured on other workloads"
        return
    try:
        # Rounds below the harness's resolution widen the gain as they widen each score.
        est = stats.censored_contrast_estimate(a.samples, b.samples, kind, a.sample_ranges, b.sample_ranges)
    except ValueError as exc:  # rounds recorded by a verifier other than the bench may be unusable
        vp.gain_note = f"not comparable: {exc}"
        return
    # Shown at least as wide as the two bests' intervals combined; read, as before, from the rounds
    # (clearing decides): read from the widened one, a gain the bests' intervals left open counted as
    # a stall, which `overlap` below keeps undecided (review 2026-12-06).
    shown = _as_wide_as_bests(est, a, b) if kind == "kernel" else est
    none = stats.no_effect(kind)
    up = direction == "maximize" or kind == "kernel"  # whether a larger gain is better (a ratio always is)
    better = est.lo > none if up else est.hi < none
    worse = est.hi < none if up else est.lo > none
    # On a busy machine separate evaluations move by more than their intervals (knowledge/measurements.py):
    # undecided until a re-measurement times both side by side (_decide_side_by_side).
    vp.contended = any(any_contended(c.contended_measurements) for c in (a, b))
    vp.gain, vp.gain_interval, vp.gain_exact = est.value, shown.interval, est.coverage == 1.0
    # Undecided only where it reads as a gain: a version that reads worse did not bring one, busy or not.
    reads_better = stats.favours_b(est.value, kind, direction)
    # Decided as the trajectory announces a new best: the version's best must clear the best before
    # it, interval against interval. The contrast alone let noise through: the version's best is the
    # top of many candidates, each evaluation a process with an offset its rounds cannot see (a
    # simulated version as fast as the best before read significant one time in four with eight
    # candidates; clearing, one in twenty-three; review, 2026-12-03).
    own, before = candidate_estimate(b), candidate_estimate(a)
    clear = own is not None and before is not None and stats.clears(own, before, direction)
    behind = own is not None and before is not None and stats.clears(before, own, direction)
    # Too few runs (or rounds) for a 95% interval of the gain: a program's bests run once each say
    # nothing of how much its score moves. Undecided, as on a busy machine, until bench.remeasure
    # runs both again (its runs pool into them).
    vp.few_runs = not stats.confident(est)
    # A gain whose own interval excludes no change while the bests' intervals still overlap is
    # likely but not established: counted as a stall, a run improving in real steps stopped (a true
    # gain of 2.5 sd read so after one re-measurement one time in four; review, 2026-12-03).
    vp.overlap = bool(stats.confident(est) and better and not clear)
    # Reading worse than a best from too few runs is not known to be worse: that best's value is the
    # unknown (a measured v2 read "no gain" against v1's single lucky run and counted as a stall,
    # while it was the run's best and the trajectory's new best; review 2026-12-04).
    unknown_before = before is not None and stats.spread_unknown(before) and not (own and stats.spread_unknown(own))
    undecided = (reads_better or unknown_before) and (vp.contended or vp.few_runs or vp.overlap)
    vp.significant = None if undecided else bool(stats.confident(est) and better and clear)
    vp.worse = bool(not vp.contended and stats.confident(est) and worse and behind)  # busy: intervals do not hold
    vp.gain_is_ratio = kind == "kernel"


def _as_wide_as_bests(est: stats.Estimate, before: Candidate, own: Candidate) -> stats.Estimate:
    """A kernel gain's interval, at least as wide as the two bests' own intervals combined (their
    log half-widths in quadrature): the two were measured in separate evaluations, an unpaired
    contrast, and a best's interval may hold what its rounds, pooled as one sample, do not — the
    drift between its measurements (knowledge/measurements.py), a copies' t interval. Applied
    whatever widened them: on the disagreement mark alone a gain still read narrower than a best's
    interval where the drift was below the mark's 95% but above chance (review 2026-12-06)."""
    halves = []
    for c in (before, own):
        lo, hi = c.score_interval if c.score_interval and len(c.score_interval) == 2 else (None, None)
        if lo is None or hi is None or not 0 < lo <= hi:
            return est
        halves.append((math.log(hi) - math.log(lo)) / 2)
    half = math.hypot(*halves)
    lo, hi = est.value * math.exp(-half), est.value * math.exp(half)
    return stats.Estimate(est.value, min(est.lo, lo), max(est.hi, hi), est.n, est.coverage)


def _short_of_start(vp: VersionPoint, own: Candidate, x0: float, direction: str) -> None:
    """A gain over a best that itself never reached x0 is no gain until the version's best clears
    x0, as the trajectory announces nothing below it (run_report called 0.5 to 0.8 over x0 = 1 a
    significant gain; review 2026-12-04)."""
    est = candidate_estimate(own)
    if est is None or clears_start(est, x0, direction):
        return
    # A point of unknown spread beyond x0 (a program run once) is not known to be short of it.
    if not (stats.spread_unknown(est) and beyond(est.value, x0, direction)):
        vp.significant, vp.short_of_start = False, True
        vp.gain_note = f"short of the starting score x0 = {x0:.7g}"


def _over_start(est: stats.Estimate, x0: float, ratio: bool) -> str:
    """By how much a first best clears x0, as later gains read: a ratio for a kernel kit's speedups,
    a difference for a program's metric (a first gain read with no number; model-play 2026-12-04)."""
    if ratio:
        if x0 <= 0:
            return ""
        return " by " + stats.describe(stats.Estimate(est.value / x0, est.lo / x0, est.hi / x0, est.n, est.coverage),
                                       "×")
    shown = stats.describe(stats.Estimate(est.value - x0, est.lo - x0, est.hi - x0, est.n, est.coverage))
    return " by " + (shown if shown.startswith("-") else "+" + shown)


def _first_gain(vp: VersionPoint, own: Candidate, x0: float, direction: str) -> None:
    """The first ranked version's best against the run's starting score, as the trajectory reads a
    first: a version that never cleared x0 brought no gain (a model read v1's "first ranked result"
    as progress while its best sat at the baseline; model-play 2026-12-04)."""
    est = candidate_estimate(own)
    vp.contended = any_contended(own.contended_measurements)
    # A busy kernel's interval counts widened for the load (as the trajectory's first new best).
    wide = widened_for_load(est, vp.contended, bool(own.samples) and kind_of(own.samples) == "kernel")
    vp.few_runs = est is not None and stats.spread_unknown(est)
    reads_better = est is not None and beyond(est.value, x0, direction)
    if wide is not None and clears_start(wide, x0, direction):
        vp.significant, vp.gain_note = True, (f"first ranked result: clears the starting score x0 = {x0:.7g}"
                                              f"{_over_start(est, x0, kind_of(own.samples) == 'kernel')}")
    elif est is None or (reads_better and (vp.contended or vp.few_runs)):  # busy or unknown, reading better
        # A quiet re-measurement pools with the busy rounds; paired rounds with the baseline decide (x0 = 1).
        kernel = bool(own.samples) and kind_of(own.samples) == "kernel"
        busy = "bench.compare it with a_candidate_id \"baseline\"" if x0_is_baseline(x0) and kernel \
            else f"bench.remeasure it when the machine is quiet {QUIET_WHEN}"
        why = f"measured on a contended machine ({busy})" if vp.contended else "too few runs (bench.remeasure it)"
        vp.gain_note = f"first ranked result: not established against the starting score x0 = {x0:.7g}, {why}"
    else:
        vp.significant = False
        vp.gain_note = f"first ranked result: does not clear the starting score x0 = {x0:.7g}: no gain"


def _first_by_baseline(report: RunReport, records: list[ComparisonRecord], x0: float | None) -> None:
    """A first version's busy kernel best, which its widened interval leaves open against x0, by
    its kept paired rounds with the baseline where they decide (x0 = 1, the baseline's own
    speedup), as the trajectory reads it (knowledge/standing.py): the trajectory announced it
    while run_report sent the model to a quiet re-measurement, which pools with the busy rounds
    (review 2026-12-06)."""
    if not x0_is_baseline(x0):
        return
    for v in report.versions:
        if v.best_before_id or not v.best_candidate_id or not v.contended or v.significant is not None:
            continue
        found = paired_verdict(records, BASELINE, v.best_candidate_id)
        if found is None or not found.decides or found.kind != "kernel":
            continue
        shown = stats.describe(stats.Estimate(*found.estimate, found.runs, found.coverage), "×")
        if found.significant and found.estimate[0] > 1:
            v.significant = True
            v.gain_note = f"first ranked result: clears the starting score x0 = 1 by its paired rounds with the " \
                          f"baseline, {shown}"
        else:
            v.significant = False
            v.gain_note = f"first ranked result: its paired rounds with the baseline find it " \
                          f"{'slower' if found.significant else 'no different'}, {shown}: no gain"


async def gather(store: KnowledgeStore, run_id: str) -> RunReport:
    """Read one run's candidates, costs, team versions and retrieval records."""
    from evoteam.servers.knowledge.connect import component_store

    run = await store.get_run(run_id)
    costs = await store.list_costs(run_id)
    cost_times = [c.provenance.created_at for c in costs]
    cumulative, total = [], 0.0
    for c in costs:
        total += c.usd
        cumulative.append(total)

    def spent_at(at: datetime) -> float:
        i = bisect.bisect_right(cost_times, at)
        return cumulative[i - 1] if i else 0.0

    direction = run.direction
    summaries = sorted(await all_candidates(store, run_id), key=lambda s: (s.provenance.created_at, s.id))
    points: list[CandidatePoint] = []
    best: CandidatePoint | None = None
    for s in summaries:
        p = CandidatePoint(id=s.id, at=s.provenance.created_at, score=s.score, status=s.status, split=s.split,
                           flagged=s.flagged, verified=s.verified, role=s.provenance.role, team_version=s.provenance.team_version,
                           spent_usd=spent_at(s.provenance.created_at), score_interval=s.score_interval,
                           rank_score=s.rank_score, n_measurements=s.n_measurements, runs=s.runs)
        if _ranks(p) and p.split == "dev" and (best is None or rank_key(p, direction) > rank_key(best, direction)):
            best = p
        p.best_so_far = best.score if best is not None else None
        points.append(p)

    team = component_store("team", store)
    versions = []
    by_version: dict[int, float] = {}
    for c in costs:
        if c.provenance.team_version is not None:
            by_version[c.provenance.team_version] = by_version.get(c.provenance.team_version, 0.0) + c.usd
    ranked_dev = [p for p in points if _ranks(p) and p.split == "dev"]
    by_rank = sorted(ranked_dev, key=lambda p: rank_key(p, direction), reverse=True)  # best first, sorted once
    earlier_ids: dict[int, list[str]] = {}  # each version's ranked candidates before it, best first
    picked: dict[int, int] = {}  # each version's ranked candidates: its best is the top of that many
    team_versions = await team.list_versions(run_id)
    # Which candidate is the best before a version: paired rounds decide over intervals (paired_top).
    records: list[ComparisonRecord] = await dev_comparisons(store, run_id, run.kit) if ranked_dev else []
    by_id, codes = {p.id: p for p in ranked_dev}, {}  # codes: read once for every paired_top
    for v in team_versions:
        # The best before a version: of what was measured before it was designed, and of what the
        # earlier versions' roles measured after (an evaluation landing late): a v2 best worse than a
        # late v1 best read as a significant gain over the v1 best at design time (review 2026-12-04).
        earlier_ids[v.version] = [p.id for p in by_rank if p.at <= v.created_at
                                  or (p.team_version is not None and p.team_version < v.version)]
        before = by_id.get(await paired_top(store, earlier_ids[v.version], records, direction, codes) or "")
        mine = [p for p in by_rank if p.team_version == v.version]
        own, picked[v.version] = (mine[0] if mine else None), len(mine)
        vp = VersionPoint(
            version=v.version, at=v.created_at, roles=v.roles, diagnosis=v.diagnosis,
            spent_usd=spent_at(v.created_at), best_before=before.score if before else None,
            best_of_version=own.score if own else None, cost_usd=by_version.get(v.version, 0.0),
            best_candidate_id=own.id if own else None, best_interval=own.score_interval if own else None)
        if own is not None:  # its runs, as the page and run_report say them
            samples = (await store.get_candidate(own.id)).samples
            vp.best_runs, vp.best_few_runs = stats.runs_of(samples), own.runs is not None
            vp.best_exact = bool(samples) and stats.every_run_alike(samples)
        if own is not None and before is not None and before.id != own.id:
            vp.best_before_id = before.id
            vp.promoted_over = earlier_ids[v.version][0] if before.id != earlier_ids[v.version][0] else None
            await _version_gain(store, vp, before.id, own.id, direction)
        elif own is not None and before is None and run.x0 is not None:
            _first_gain(vp, await store.get_candidate(own.id), run.x0, direction)
        versions.append(vp)

    if versions and not any(p.team_version == versions[-1].version for p in points):
        versions[-1].in_progress = bool(await team.roles_not_ended(run_id, versions[-1].version))

    # Why each failed: the message lives with the full candidate; the newest are enough to show.
    for p in [p for p in reversed(points) if p.status != "PASSED"][:FAILED_SHOWN]:
        full = await store.get_candidate(p.id)
        p.message = _failure_message(full)

    report = RunReport(run=run, candidates=points, versions=versions, direction=direction)
    ranked = [p for p in points if _ranks(p) and p.split == "dev"]
    if ranked:
        top = max(ranked, key=lambda p: rank_key(p, direction))
        report.best_candidate_id = top.id
        report.best_workloads = (await store.get_candidate(top.id)).workloads
    held = [p for p in points if _ranks(p) and p.split == "heldout"]
    if held:
        top_held = max(held, key=lambda p: rank_key(p, direction))
        report.best_heldout, report.best_heldout_id = top_held.score, top_held.id
        report.best_heldout_interval, report.best_heldout_runs = top_held.score_interval, top_held.runs
        report.best_heldout_of = (await store.get_candidate(top_held.id)).parent_id

    by_role: dict[str, float] = {}
    for c in costs:
        key = c.provenance.role or ("supervisor" if c.source.startswith("supervisor") else c.source)
        by_role[key] = by_role.get(key, 0.0) + c.usd
    report.spend_by_role = [SpendSlice(label=k, usd=v) for k, v in sorted(by_role.items(), key=lambda kv: -kv[1])]
    report.spend_by_version = [SpendSlice(label=f"v{k}", usd=v) for k, v in sorted(by_version.items())]

    retrieval = component_store("retrieval", store)
    report.retrieval = await retrieval.report_series(run_id)
    report.remeasured = await latest_measurement_set(store, run_id)
    _decide_side_by_side(report)
    first_busy = any(v.contended and v.significant is None and not v.best_before_id for v in versions)
    if any(v.best_before_id for v in versions) or report.remeasured or first_busy:
        _first_by_baseline(report, records, run.x0)
        _decide_by_compare(report, records)
        if report.remeasured:  # compares made after the set count too
            apart_by_pairs(report.remeasured, records)
            await drop_style_leads(store, report.remeasured, records)
    for v in versions if run.x0 is not None else []:
        if v.significant and v.best_before_id and v.best_candidate_id:
            _short_of_start(v, await store.get_candidate(v.best_candidate_id), run.x0, direction)
    for v in versions:
        await within_style_share(store, v)
    for v in versions:
        _unmeasured_lead(v, points, run.x0, direction)
        await over_own_style(store, v, earlier_ids.get(v.version, []), records, picked.get(v.version, 1), run.x0,
                             direction)
        if v.over_before is not None:  # a gain now: an earlier lead from too few runs leaves it open, as any
            _unmeasured_lead(v, points, run.x0, direction)
            v.over_before, v.own_style = (None, None) if v.unmeasured_lead else (v.over_before, v.own_style)
        # Over a best before it that beats the top by intervals side by side, intervals that cannot tell the
        # two apart leave the gain open, not a stall: a compare that found a better kernel made one (review).
        # Nor where its own style's paired rounds decided it (over_before: no gain side by side; rev80).
        if v.promoted_over and v.significant is False and not (v.worse or v.paired_batches or v.style_share
                                                               or v.short_of_start or v.over_before is not None):
            v.significant = None
        v.better_as_pair = await better_as_pair(store, v, records, direction)
    report.paired_best = await paired_top(store, [p.id for p in by_rank], records, direction, codes)
    return report


def _unmeasured_lead(vp: VersionPoint, points: list[CandidatePoint], x0: float | None, direction: str) -> None:
    """A version with a candidate from too few runs, of its own or from before it, that reads beyond
    its best and the best before it (x0 for the first) has no verdict yet: such a candidate ranks
    after the measured ones, so the version read as a stall with a better program of its own
    unmeasured, or as a significant gain below an earlier one's single run that a re-measurement
    then found better (model-plays 2026-12-04)."""
    if vp.best_of_version is None:
        return
    ref = vp.best_before if vp.best_before is not None else x0
    def earlier(p: CandidatePoint) -> bool:  # as the best before is chosen (gather)
        return p.at <= vp.at or (p.team_version is not None and p.team_version < vp.version)

    # Its own only where nothing settled the gain (a significant one stands, whatever it left
    # unmeasured); an earlier one only where the gain is significant: measured, it can only raise the
    # best before, so "no gain" or "worse" stands (review 2026-12-04: it undid settled stalls).
    leads = [p for p in points if _ranks(p) and p.split == "dev" and p.runs is not None
             and ((earlier(p) and vp.significant is True)
                  or (p.team_version == vp.version and vp.significant is not True))
             and beyond(p.score, vp.best_of_version, direction) and (ref is None or beyond(p.score, ref, direction))]
    if leads:
        top = max(leads, key=lambda p: p.score if direction == "maximize" else -p.score)
        vp.unmeasured_lead, vp.significant, vp.few_runs, vp.worse = top.id, None, True, False


def _decide_side_by_side(report: RunReport) -> None:
    """A gain whose bests were measured on a contended machine, by the newest re-measurement's two
    batch intervals where it timed both (side by side a busy machine touches both alike):
    significant where the version's best's clears the other's, worse the other way round, no gain
    where it reads no better, else not established. Paired rounds of the two, where kept, decide
    over this (_decide_by_compare). Only a set the bench wrote counts (a verifier's artifact)."""
    mset = report.remeasured
    batch = {e.candidate_id: e for e in (mset.entries if mset else [])
             if e.status == "PASSED" and e.score is not None and e.score_interval}
    for v in report.versions:
        own, before = batch.get(v.best_candidate_id or ""), batch.get(v.best_before_id or "")
        if v.contended and own is not None and before is not None:
            ratio = v.gain_is_ratio and before.score > 0
            v.gain = own.score / before.score if ratio else own.score - before.score
            v.gain_interval = None
            own_est = stats.Estimate(own.score, *own.score_interval, mset.rounds)
            before_est = stats.Estimate(before.score, *before.score_interval, mset.rounds)
            v.worse = stats.clears(before_est, own_est, report.direction)
            # Two batch intervals that overlap each keep the difference between processes: a gain
            # that reads better is not established by them (a 12-17% gain, significant in two paired
            # compares, read "within noise" after one batch and significant after the next; model-play
            # 2026-12-03): bench.compare of the two decides it, as it decides overlapping bests.
            reads_better = own.score > before.score if report.direction == "maximize" else own.score < before.score
            clear = stats.clears(own_est, before_est, report.direction)
            v.significant = True if clear else None if reads_better and not v.worse else False
            v.side_by_side = True


def _decide_by_compare(report: RunReport, records: list[ComparisonRecord]) -> None:
    """A version's gain is decided by the paired batches of its best and the best before it
    (bench.compare of the two, bench.remeasure's dev batches with both), their rounds pooled
    (comparisons.paired_verdict), wherever they give a full 95% interval: paired, they decide
    over the two bests' own intervals and a re-measurement's two batch intervals alike (a newest
    batch's intervals flipped a verdict back and forth; model-play 2026-12-03)."""
    for v in report.versions:
        if not v.best_before_id or not v.best_candidate_id:
            continue
        # The version's best is the top of its ranked candidates: read at the confidence picking
        # the best of them needs (stats.picked_confidence).
        picked = sum(1 for p in report.candidates if p.team_version == v.version and _ranks(p) and p.split == "dev")
        found = paired_verdict(records, v.best_before_id, v.best_candidate_id, picked_of=picked)
        if found is None or not found.decides:
            continue
        v.picked_of = found.picked_of
        v.gain, lo, hi = found.estimate
        v.gain_interval, v.gain_is_ratio, v.gain_note = [lo, hi], found.kind == "kernel", None
        better = stats.favours_b(v.gain, found.kind, report.direction)
        v.significant = found.significant and better
        v.worse = found.significant and not better
        v.gain_exact, v.paired_batches, v.paired_busy = found.coverage == 1.0 and lo == hi, found.batches, found.contended
        v.overlap = v.few_runs = v.side_by_side = False  # what left it open no longer applies
