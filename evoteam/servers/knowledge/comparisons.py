"""``bench.compare`` of two of a run's candidates, kept in the run as an artifact with its rounds.

Two bests whose own intervals overlap cannot be told apart by those intervals (a kernel's keep a
few percent for the difference between processes), but a paired batch of the two can: every round
times both on the same inputs. The report's version gain (report/data.py) takes the verdict of
every compare of the two bests, their rounds pooled, so what ``compare`` decided is what
``run_report``, ``reflect`` and the stop rule read. Pooled, not the newest: a model that compares
again until one batch reads significant would otherwise get its way one time in a few (a true
A/A pair is significant one time in twenty per look); pooled, each compare narrows one interval.
Like a measurement set, only the bench (a verifier) stores one.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ValidationError

from evoteam import stats
from evoteam.servers.knowledge.errors import Forbidden
from evoteam.servers.knowledge.listing import all_artifacts
from evoteam.servers.knowledge.models import ArtifactCreate
from evoteam.servers.knowledge.store import KnowledgeStore
from evoteam.servers.knowledge.verified import COMPARISON

PREFIX = "compare-"


class ComparisonRecord(BaseModel):
    """What one compare measured: its sides' ids, its verdict and the rounds behind it."""

    a_candidate_id: str
    b_candidate_id: str
    kit: str
    split: str
    kind: Literal["kernel", "program"]
    direction: Literal["maximize", "minimize"] = "maximize"
    b_over_a: float  # kernel: B's speedup over A (a ratio); program: B's score minus A's
    interval: list[float]
    significant: bool
    contended: bool
    measured_at: datetime
    # Kernel: per workload, each round's A-time over B-time, and the smallest and largest ratio
    # each round allows (unresolved times). Program: {"a": A's scores, "b": B's scores}.
    samples: dict[str, list[float]]
    ranges: dict[str, tuple[list[float], list[float]]] | None = None

    def turned(self, own_id: str) -> ComparisonRecord:
        """The same compare with ``own_id`` as its B side (the gain reads as own over the other)."""
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


class PairedVerdict(BaseModel):
    """Every compare of two candidates pooled, read as B (``own``) over or minus A."""

    estimate: list[float]  # value, lo, hi
    coverage: float
    significant: bool
    compares: int
    contended: bool

    @property
    def decides(self) -> bool:
        """A full 95% interval; on a busy machine only a difference (load widens a paired interval,
        it does not make a difference appear: A/A compares with two busy loops were significant 0
        times in 20, docs/bench.md; but a wider interval can hide one)."""
        return self.coverage >= stats.CONFIDENCE - 1e-9 and (self.significant or not self.contended)


def _pooled(records: list[ComparisonRecord]) -> stats.Estimate:
    kind = records[0].kind
    if kind == "program":
        a = [x for r in records for x in r.samples["a"]]
        b = [x for r in records for x in r.samples["b"]]
        return stats.contrast_estimate({"program": a}, {"program": b}, "program")
    samples: dict[str, list[float]] = {}
    ranges: dict[str, tuple[list[float], list[float]]] = {}
    for r in records:
        for w, ratios in r.samples.items():
            samples.setdefault(w, []).extend(ratios)
            lows, highs = (r.ranges or {}).get(w, (ratios, ratios))
            ranges.setdefault(w, ([], []))[0].extend(lows)
            ranges[w][1].extend(highs)
    return stats.censored_score_estimate(samples, ranges, "kernel")


def paired_verdict(records: list[ComparisonRecord], before_id: str, own_id: str) -> PairedVerdict | None:
    """The compares of these two (in either order) pooled: the quiet ones decide either way; all
    of them, busy ones too, decide a difference. None when there is none."""
    pair = [r.turned(own_id) for r in records if {r.a_candidate_id, r.b_candidate_id} == {before_id, own_id}]
    if not pair or len({(r.kind, frozenset(r.samples)) for r in pair}) != 1:
        return None  # none, or measured on other workloads (a kit changed): not one contrast
    kind = pair[0].kind

    def verdict(group: list[ComparisonRecord]) -> PairedVerdict:
        est = _pooled(group)
        return PairedVerdict(estimate=[est.value, est.lo, est.hi], coverage=est.coverage,
                             significant=stats.significant(est, kind), compares=len(group),
                             contended=any(r.contended for r in group))

    every = verdict(pair)
    quiet = [r for r in pair if not r.contended]
    if every.decides or not quiet or len(quiet) == len(pair):
        return every
    calm = verdict(quiet)
    return calm if calm.decides else every


def _name(record: ComparisonRecord) -> str:
    return (f"{PREFIX}{record.split}-{record.a_candidate_id}-{record.b_candidate_id}-"
            f"{record.measured_at:%Y%m%dT%H%M%S%f}.json")


async def keep_comparison(store: KnowledgeStore, run_id: str, record: ComparisonRecord) -> str | None:
    """Store ``record`` in ``run_id`` as the bench; None when stored, else why not (a shared
    server's token that is not a verifier's)."""
    bench = store.with_actor(store.actor.model_copy(update={"verifier": True}))
    try:
        await bench.put_artifact(ArtifactCreate(run_id=run_id, kind=COMPARISON, name=_name(record),
                                                text=record.model_dump_json()))
    except Forbidden as exc:
        return str(exc)
    return None


async def dev_comparisons(store: KnowledgeStore, run_id: str, kit: str | None) -> list[ComparisonRecord]:
    """The run's stored compares on the dev split of the run's kit."""
    found = []
    for info in await all_artifacts(store, run_id, COMPARISON):
        if not info.name.startswith(f"{PREFIX}dev-"):
            continue
        try:
            record = ComparisonRecord.model_validate_json((await store.get_artifact(info.id)).text or "{}")
        except ValidationError:
            continue  # stored by another version of this module: compare again to get one the report reads
        if record.split == "dev" and (kit is None or record.kit == kit):
            found.append(record)
    return found
