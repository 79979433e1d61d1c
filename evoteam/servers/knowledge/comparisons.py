"""Paired rounds of two of a run's candidates, kept in the run: what decides a version's gain.

Two bests whose own intervals overlap cannot be told apart by those intervals (a kernel's keep a
few percent for the difference between processes), but a paired batch of the two can: every round
times both on the same inputs. ``bench.compare`` of two recorded candidates keeps its rounds, and
``bench.remeasure`` keeps the paired rounds of every two finalists of its dev batch. The report's
version gain (report/data.py) pools every such batch of the version's best and the best before it,
so what they measured is what ``run_report``, ``reflect`` and the stop rule read.

Pooled, not the newest: a model that compares (or re-measures) again until one batch reads
significant, or reads "not established", would otherwise get its way one time in a few (a true A/A
pair is significant one time in twenty per look, and a newest re-measurement re-decided every
version at once; review 2026-12-03). Pooled, each batch narrows one interval while they agree;
batches further apart than their own intervals allow widen it (copystats.between_measurements).
A busy machine's batches pool like the others: load widens a paired interval, it does not make a
difference appear (A/A compares with two busy loops running: 0 of 20 significant, docs/bench.md).

Like a measurement set, only the bench (a verifier) stores them.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import threading
from datetime import datetime
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ValidationError, model_validator

from evoteam import copystats, stats
from evoteam.passingstyle import passes_over_returns, within_share
from evoteam.servers.knowledge.errors import Forbidden, TooLarge
from evoteam.servers.knowledge.listing import all_artifacts
from evoteam.servers.knowledge.standing import Paired, Side, row_style, trajectory_points
from evoteam.servers.knowledge.models import ArtifactCreate
from evoteam.servers.knowledge.trajectory import TrajectoryPoint
from evoteam.servers.knowledge.store import KnowledgeStore
from evoteam.servers.knowledge.readsql import COMPARE_PREFIX
from evoteam.servers.knowledge.verified import COMPARISON

PREFIX = COMPARE_PREFIX


class ComparisonRecord(BaseModel):
    """One paired batch of two candidates: its sides' ids, its verdict and the rounds behind it."""

    a_candidate_id: str
    b_candidate_id: str
    kit: str
    split: str
    kind: Literal["kernel", "program"]
    # What was measured, beyond the kit's name: its content (workloads, evaluator, reference) and,
    # for a kernel, the bench's timing method; batches of another pool into another contrast.
    kit_hash: str | None = None
    timing_method: int | None = None
    b_over_a: float  # kernel: B's speedup over A (a ratio); program: B's score minus A's
    interval: list[float]
    significant: bool
    contended: bool
    measured_at: datetime
    # Kernel: per workload, each round's A-time over B-time, and the smallest and largest ratio
    # each round allows (unresolved times). Program: {"a": A's scores, "b": B's scores}.
    samples: dict[str, list[float]]
    ranges: dict[str, tuple[list[float], list[float]]] | None = None
    # Kernel, a compare's copies (each side in several processes): the variance of the contrast's
    # log that its processes' spread gives (copystats.py) and its degrees of freedom (None: a
    # record of twins, kept before they were counted: 2); None for one process a side.
    spread: float | None = None
    spread_df: float | None = None
    # A program's, kept since 2026-12-06: each side's scores are every run of its code (the runs its
    # candidate pooled before included), so the newest such record holds every earlier one's. A
    # batch's runs alone made a compare "B is better, significant" from five lucky runs of a program
    # whose pooled interval held the other's score (mp61): runs of a program are not paired.
    cumulative: bool = False

    @model_validator(mode="after")
    def _usable(self) -> ComparisonRecord:
        # Checked here so a record the report cannot pool is skipped like one of another format,
        # never a crash of run_report (a verifier token or a trusted import could store one).
        if len(self.interval) != 2 or not all(math.isfinite(x) for x in [self.b_over_a, *self.interval]):
            raise ValueError("a contrast is a number with an interval of two ends")
        if self.kind == "program" and (set(self.samples) != {"a", "b"} or not all(self.samples.values())):
            raise ValueError("a program's record holds both sides' scores")
        stray = set(self.ranges or {}) - set(self.samples)
        if self.spread is not None and not (math.isfinite(self.spread) and self.spread >= 0):
            raise ValueError("a spread is a variance: a finite number, not below 0")
        if self.spread_df is not None and (self.spread is None or not 1 <= self.spread_df <= copystats.MAX_DF):
            raise ValueError(f"a spread's degrees of freedom come with a spread, between 1 and {copystats.MAX_DF:g}")
        if self.kind == "kernel" and (min(self.b_over_a, *self.interval) <= 0 or stray):
            raise ValueError("a kernel's contrast is a positive ratio, its ranges of its own workloads")
        values = [x for xs in self.samples.values() for x in xs]
        if not values or not all(math.isfinite(x) for x in values):
            raise ValueError("no rounds, or a round that is not a number")
        if self.kind == "kernel":
            for w, ratios in self.samples.items():
                lows, highs = (self.ranges or {}).get(w, (ratios, ratios))
                if not ratios or len(lows) != len(ratios) or len(highs) != len(ratios) or \
                        not all(x > 0 and math.isfinite(x) for x in [*ratios, *lows, *highs]):
                    raise ValueError(f"workload {w}: ratios must be positive, with a range for each round")
        return self

    def turned(self, own_id: str) -> ComparisonRecord:
        """The same batch with ``own_id`` as its B side (the gain reads as own over the other)."""
        if own_id == self.b_candidate_id:
            return self
        lo, hi = self.interval
        if self.kind == "program":
            return self.model_copy(update=dict(
                a_candidate_id=self.b_candidate_id, b_candidate_id=self.a_candidate_id, b_over_a=-self.b_over_a,
                interval=[-hi, -lo], samples={"a": self.samples["b"], "b": self.samples["a"]}))
        return self.model_copy(update=dict(
            a_candidate_id=self.b_candidate_id, b_candidate_id=self.a_candidate_id, b_over_a=1 / self.b_over_a,
            interval=[1 / hi, 1 / lo], samples={w: [1 / r for r in rs] for w, rs in self.samples.items()},
            ranges={w: ([1 / h for h in highs], [1 / lo_ for lo_ in lows])
                    for w, (lows, highs) in (self.ranges or {}).items()} or None))


class ComparisonSet(BaseModel):
    """What one artifact of kind ``comparison`` holds: a compare's one record, or a re-measurement
    batch's record for every two of its finalists."""

    records: list[ComparisonRecord]


def record_of(a_id: str, b_id: str, *, kit: str, split: str, kind: str, samples: dict, ranges: dict | None,
              contended: bool, measured_at: datetime, kit_hash: str | None = None,
              timing_method: int | None = None, spread: tuple[float, float] | None = None,
              cumulative: bool = False) -> ComparisonRecord:
    """A record from one batch's paired rounds of A and B, its verdict computed as compare does
    (with ``spread``, its copies' variance and degrees of freedom: the interval it showed). Kept
    whole (the bootstrap is seeded from the values: ratios cut to 7 digits moved a compare's kept
    interval off the one it showed; model-play 2026-12-03), a workload's ranges only where some
    round's time was unresolved (its ranges differ): a re-measurement keeps every two finalists'."""
    ranges = {w: (list(lows), list(highs)) for w, (lows, highs) in (ranges or {}).items()
              if list(lows) != list(highs)} or None
    est = _estimate(kind, samples, ranges, parts=None if spread is None else [spread], measured=spread is not None)
    variance, df = spread if spread is not None else (None, None)
    return ComparisonRecord(a_candidate_id=a_id, b_candidate_id=b_id, kit=kit, split=split, kind=kind,
                            kit_hash=kit_hash, timing_method=timing_method, b_over_a=est.value, interval=[est.lo, est.hi],
                            significant=stats.significant(est, kind), contended=contended, measured_at=measured_at,
                            samples=samples, ranges=ranges, spread=variance, spread_df=df, cumulative=cumulative)


def _estimate(kind: str, samples: dict, ranges: dict | None, confidence: float = stats.CONFIDENCE,
              parts: list[tuple[float, float]] | None = None, measured: bool = False) -> stats.Estimate:
    """``measured``: every batch measured its own process spread (copies with their degrees of
    freedom): the rounds' interval is not widened for it as well (copies.py)."""
    if kind == "program":
        return stats.contrast_estimate({"program": samples["a"]}, {"program": samples["b"]}, "program", confidence)
    est = stats.censored_score_estimate(samples, ranges, "kernel", confidence)
    if measured:
        est = copystats.unwidened(est)
    return copystats.joined(est, parts, confidence) if parts else est  # the copies' process variances


class PairedVerdict(BaseModel):
    """Every paired batch of two candidates pooled, read as B (``own``) over or minus A."""

    kind: Literal["kernel", "program"]
    estimate: list[float]  # value, lo, hi
    coverage: float
    runs: int = 1  # the fewest rounds (a program: runs a side) behind it, as stats.Estimate.n
    significant: bool
    batches: int
    contended: bool
    left_out: int = 0  # batches on other workloads than the newest (a kit that changed)
    picked_of: int = 1  # B was the best of this many: the interval is read at stats.picked_confidence

    @property
    def decides(self) -> bool:
        """A full 95% interval (fewer rounds give less: they decide nothing)."""
        return self.coverage >= stats.CONFIDENCE - 1e-9


def _pooled(records: list[ComparisonRecord], confidence: float = stats.CONFIDENCE) -> stats.Estimate:
    if records[0].kind == "program":
        # The newest record of every run (ComparisonRecord.cumulative) and batches' runs kept since.
        newest = max((i for i, r in enumerate(records) if r.cumulative), default=0)
        whole = records[newest:]
        return _estimate("program", {side: [x for r in whole for x in r.samples[side]] for side in ("a", "b")},
                         None, confidence)
    samples: dict[str, list[float]] = {}
    ranges: dict[str, tuple[list[float], list[float]]] = {}
    for r in records:
        for w, ratios in r.samples.items():
            samples.setdefault(w, []).extend(ratios)
            lows, highs = (r.ranges or {}).get(w, (ratios, ratios))
            ranges.setdefault(w, ([], []))[0].extend(lows)
            ranges[w][1].extend(highs)
    # Each batch of copies brings its processes' variance, weighted by its share of the pooled rounds
    # (squared); a batch of one process a side brings its rounds only, as it did before copies.
    parts = [((sum(len(r.samples[w]) / len(samples[w]) for w in r.samples) / len(r.samples)) ** 2 * r.spread,
              r.spread_df or copystats.TWINS_DF) for r in records if r.spread is not None]
    # Widened as before for a batch of one process a side, or twins kept before copies (their
    # compare showed the widened interval).
    est = _estimate("kernel", samples, ranges, confidence, parts,
                    measured=all(r.spread is not None and r.spread_df is not None for r in records))
    # And for batches that disagree by more than their own intervals allow, as a candidate's
    # separate measurements (knowledge/measurements.py, drift_widened); a batch of copies showed a
    # t interval, so its ends stretch to ``confidence`` by t's quantiles.
    return copystats.between_measurements(
        est, [(r.b_over_a, *r.interval, (r.spread_df or copystats.TWINS_DF) if r.spread is not None else None)
              for r in records], confidence)


def paired_verdict(records: list[ComparisonRecord], before_id: str, own_id: str,
                   picked_of: int = 1) -> PairedVerdict | None:
    """The paired batches of these two (in either order), pooled; None when there is none. Only
    those of the newest batch's kit (name, content, timing method) and workloads pool: a kit that
    changed measures another contrast (``left_out`` counts the others). ``picked_of``: ``own`` is
    the best of that many candidates, and the interval is read at stats.picked_confidence of it
    (a 97.5% one for the best of two), so that picking the luckiest does not make a tie read as a
    gain."""
    mine = [r for r in records if {r.a_candidate_id, r.b_candidate_id} == {before_id, own_id}]
    if not mine:
        return None
    # A kept batch never changes, and its bootstrap is seeded by its data (stats): the same batches
    # give the same verdict, which get_run, the briefs and the report read again and again. Keyed by
    # every batch's whole content, in the order they pool (the trajectory reads it in a thread).
    digests = [hashlib.sha256(r.model_dump_json().encode()).hexdigest() for r in mine]
    order = sorted(range(len(mine)), key=lambda i: (mine[i].measured_at, digests[i]))
    key = (before_id, own_id, picked_of, tuple(digests[i] for i in order))
    with _VERDICTS_LOCK:
        cached = _VERDICTS.get(key)
    if cached is not None:
        return cached.model_copy(deep=True)  # a caller may change what it is handed
    pair = [mine[i].turned(own_id) for i in order]
    newest = pair[-1]

    def what(r: ComparisonRecord) -> tuple:
        return r.kit, r.kit_hash, r.timing_method, r.kind, set(r.samples)

    same = [r for r in pair if what(r) == what(newest)]
    est = _pooled(same, stats.picked_confidence(picked_of))
    found = PairedVerdict(kind=newest.kind, estimate=[est.value, est.lo, est.hi], coverage=est.coverage, runs=est.n,
                          significant=stats.significant(est, newest.kind), batches=len(same),
                          contended=any(r.contended for r in same), left_out=len(pair) - len(same),
                          picked_of=max(1, picked_of))
    with _VERDICTS_LOCK:
        while len(_VERDICTS) >= _KEEP_VERDICTS:
            _VERDICTS.pop(next(iter(_VERDICTS)))
        _VERDICTS[key] = found
    return found.model_copy(deep=True)


_VERDICTS: dict[tuple, PairedVerdict] = {}  # paired_verdict's, newest last
_VERDICTS_LOCK = threading.Lock()
_KEEP_VERDICTS = 4096


def _name(tag: str, split: str, at: datetime) -> str:
    return f"{PREFIX}{split}-{tag}-{at:%Y%m%dT%H%M%S%f}.json"


async def keep_comparisons(store: KnowledgeStore, run_id: str, records: list[ComparisonRecord], tag: str) -> str | None:
    """Store ``records`` (one split) in ``run_id`` as the bench; None when stored, else why not (a
    shared server's token that is not a verifier's)."""
    if not records:
        return None
    bench = store.with_actor(store.actor.model_copy(update={"verifier": True}))
    try:
        await bench.put_artifact(ArtifactCreate(run_id=run_id, kind=COMPARISON,
                                                name=_name(tag, records[0].split, records[0].measured_at),
                                                text=ComparisonSet(records=records).model_dump_json()))
    except Forbidden as exc:
        return str(exc)
    except TooLarge as exc:  # over the store's artifact limit: in halves, so one size loses no other pair
        if len(records) == 1:
            return str(exc)
        half = len(records) // 2
        why = [await keep_comparisons(store, run_id, part, f"{tag}{i}") for i, part in
               enumerate((records[:half], records[half:]))]
        return next((w for w in why if w), None)
    return None


async def keep_comparison(store: KnowledgeStore, run_id: str, record: ComparisonRecord) -> str | None:
    """One compare's record (keep_comparisons)."""
    return await keep_comparisons(store, run_id, [record], f"{record.a_candidate_id}-{record.b_candidate_id}")


async def dev_comparisons(store: KnowledgeStore, run_id: str, kit: str | None) -> list[ComparisonRecord]:
    """The run's stored paired batches on the dev split (of the run's kit, where it names one)."""
    found = []
    for info in await all_artifacts(store, run_id, COMPARISON):
        if not info.name.startswith(f"{PREFIX}dev-"):
            continue
        try:
            kept = ComparisonSet.model_validate_json((await store.get_artifact(info.id)).text or "{}")
        except ValidationError:
            continue  # stored by another version of this module, or unusable: it decides nothing
        found += [r for r in kept.records if r.split == "dev" and (kit is None or r.kit == kit)]
    return found


def paired_sides(records: list[ComparisonRecord], direction: str,
                 styles: Mapping[str, str | None] | None = None) -> Paired:
    """How the trajectory reads two candidates' paired rounds (standing.trajectory_points):
    B better, worse or tied with A where their pooled batches decide (a full 95% interval), else
    None. Separate evaluations keep a difference between processes their intervals do not, so two
    close bests, and any measured on a busy machine, were never announced while run_report called
    the same gain significant from these rounds (two model-plays read "the best never moved";
    2026-12-03). Each pair is read once (a bootstrap each). ``styles``: each candidate's output style
    (standing.row_style), where known: a kernel passing destination style found better than one
    returning its outputs by no more than that style's share reads "style" (no faster kernel; mp56),
    whichever of the two is B."""
    seen: dict[tuple[str, str], Side | None] = {}
    by_pair: dict[frozenset[str], list[ComparisonRecord]] = {}
    for r in records:  # each lookup reads its own pair's, not every record of the run
        by_pair.setdefault(frozenset((r.a_candidate_id, r.b_candidate_id)), []).append(r)

    def side(a_id: str, b_id: str) -> Side | None:
        if (a_id, b_id) not in seen:
            verdict = paired_verdict(by_pair.get(frozenset((a_id, b_id)), []), a_id, b_id)
            if verdict is None or not verdict.decides:
                seen[a_id, b_id] = None
            elif not verdict.significant:
                seen[a_id, b_id] = "tied"
            else:
                better = stats.favours_b(verdict.estimate[0], verdict.kind, direction)
                seen[a_id, b_id] = "better" if better else "worse"
                # Either way round: a returning kernel behind a passing one by the share alone read
                # "worse_than" it by paired rounds beside remeasure's "no faster kernel" (mp61).
                ahead, behind, lead = (b_id, a_id, verdict.estimate[1]) if better else \
                    (a_id, b_id, 1 / verdict.estimate[2] if verdict.estimate[2] > 0 else float("inf"))
                if verdict.kind == "kernel" and styles and \
                        passes_over_returns(styles.get(ahead), styles.get(behind)) and within_share(lead):
                    seen[a_id, b_id] = "style"
        return seen[a_id, b_id]

    return side


async def trajectory_with_pairs(store: KnowledgeStore, run_id: str, kit: str | None, rows: list, direction: str,
                                x0: float | None) -> tuple[list[TrajectoryPoint], Any]:
    """standing.trajectory_points of a run's candidate rows, reading the run's kept paired
    rounds on the dev split where there are some: off the event loop then, each pair's verdict
    being a bootstrap (0.4-3.3 s for a run of many compares; review 2026-12-04)."""
    records = await dev_comparisons(store, run_id, kit) if rows else []  # one may be paired with the baseline
    styles = {r["id"]: row_style(r) for r in rows}
    if not records:
        return trajectory_points(rows, direction, x0, styles=styles)
    return await asyncio.to_thread(trajectory_points, rows, direction, x0, paired_sides(records, direction, styles),
                                   styles)
