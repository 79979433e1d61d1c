"""A ``bench.compare`` of two of a run's candidates, kept in the run as an artifact.

Two bests whose own intervals overlap cannot be told apart by those intervals (a kernel's keep a
few percent for the difference between processes), but one paired batch of the two can: every
round times both on the same inputs. The report's version gain (report/data.py) takes the newest
such verdict on the two bests, so what ``compare`` decided is what ``run_report``, ``reflect`` and
the stop rule read. Like a measurement set, only the bench (a verifier) stores one.
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
    """What one compare found, with the ids of its two sides."""

    a_candidate_id: str
    b_candidate_id: str
    kit: str
    split: str
    kind: Literal["kernel", "program"]
    direction: Literal["maximize", "minimize"] = "maximize"
    b_over_a: float  # kernel: B's speedup over A (a ratio); program: B's score minus A's
    interval: list[float]
    coverage: float  # the interval's nominal coverage: under 95% it decides nothing
    significant: bool
    contended: bool
    rounds: int | None = None
    measured_at: datetime

    @property
    def decides(self) -> bool:
        """Whether it can settle a gain: a full 95% interval, and on a busy machine only a
        difference. Load widens a paired interval; it does not make a difference appear (A/A
        compares with two busy loops running: 0 of 20 significant, docs/bench.md), but a wider
        interval can hide one."""
        return self.coverage >= stats.CONFIDENCE - 1e-9 and (self.significant or not self.contended)

    def gain_of(self, own_id: str) -> tuple[float, list[float]]:
        """The contrast turned to read as ``own_id``'s side over (or minus) the other."""
        lo, hi = self.interval
        if own_id == self.b_candidate_id:
            return self.b_over_a, [lo, hi]
        if self.kind == "kernel":
            return 1 / self.b_over_a, [1 / hi, 1 / lo]
        return -self.b_over_a, [-hi, -lo]


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


async def deciding_comparisons(store: KnowledgeStore, run_id: str, kit: str | None) -> list[ComparisonRecord]:
    """The run's stored dev comparisons of the run's kit that can settle a gain (``decides``),
    newest first."""
    found = []
    for info in await all_artifacts(store, run_id, COMPARISON):
        if not info.name.startswith(f"{PREFIX}dev-"):
            continue
        try:
            record = ComparisonRecord.model_validate_json((await store.get_artifact(info.id)).text or "{}")
        except ValidationError:
            continue  # stored by another version of this module: compare again to get one the report reads
        if record.decides and record.split == "dev" and (kit is None or record.kit == kit):
            found.append(record)
    return sorted(found, key=lambda r: r.measured_at, reverse=True)


def newest_between(records: list[ComparisonRecord], first: str, second: str) -> ComparisonRecord | None:
    """The newest of ``records`` (newest first) that compared exactly these two, in either order."""
    return next((r for r in records if {r.a_candidate_id, r.b_candidate_id} == {first, second}), None)
