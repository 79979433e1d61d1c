"""Fair numbers after the fact: the best candidate of every team version, and the baseline,
measured again in one batch on this machine, interleaved, and kept as a measurement set.

Scores recorded during a run come from different hours, loads and sometimes machines. Measuring
the finalists again together (each round evaluates every one of them once, so a drift of the
machine touches all alike) gives numbers that can be compared with each other — the way the
papers re-measure every version at the end. The set is stored as an artifact of kind
`measurement_set` in the run, so it travels with exports and reaches a shared server unchanged.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from datetime import UTC, datetime

from pydantic import BaseModel, Field

from evoteam.config import Settings
from evoteam.servers.knowledge.models import ArtifactCreate, CandidateSummary
from evoteam.servers.knowledge.store import KnowledgeStore
from evoteam.servers.knowledge.verified import ranks

KIND = "measurement_set"
BASELINE = "baseline"


class Remeasured(BaseModel):
    """One finalist measured again: each round's score on each split, and the verdict."""

    candidate_id: str = Field(description="a candidate id, or 'baseline'")
    team_version: int | None
    recorded_score: float | None
    dev_scores: list[float | None] = Field(default_factory=list)
    heldout_scores: list[float | None] = Field(default_factory=list)
    dev_median: float | None = None
    heldout_median: float | None = None
    changed: bool = Field(default=False, description="the recorded score lies outside the re-measured "
                                                     "range widened by the noise allowance")


class MeasurementSet(BaseModel):
    run_id: str
    kit: str
    measured_at: datetime
    rounds: int
    splits: list[str]
    noise_allowance: float = Field(description="relative slack around the re-measured range before a "
                                               "recorded score counts as changed")
    entries: list[Remeasured]


def _median(values: list[float | None]) -> float | None:
    ok = [v for v in values if v is not None]
    return statistics.median(ok) if ok else None


def judge(entry: Remeasured, allowance: float) -> None:
    """Median per split; `changed` when the recorded dev score lies outside the rounds' range
    widened by `allowance` (relative), or when it passed then and fails now."""
    entry.dev_median = _median(entry.dev_scores)
    entry.heldout_median = _median(entry.heldout_scores)
    ok = [v for v in entry.dev_scores if v is not None]
    if entry.recorded_score is None:
        return
    if not ok:
        entry.changed = True
        return
    lo, hi = min(ok), max(ok)
    slack = allowance * max(abs(lo), abs(hi))
    entry.changed = not (lo - slack <= entry.recorded_score <= hi + slack)


async def finalists(store: KnowledgeStore, run_id: str) -> list[CandidateSummary]:
    """The best ranked candidate of each team version (candidates of no version count as one group)."""
    from evoteam.report.data import all_candidates

    run = await store.get_run(run_id)
    better = (lambda a, b: a > b) if run.direction == "maximize" else (lambda a, b: a < b)
    best: dict[int | None, CandidateSummary] = {}
    for c in await all_candidates(store, run_id):
        if not ranks(c.status, c.score, c.verified, c.flagged) or c.split == "heldout":
            continue
        held = best.get(c.provenance.team_version)
        if held is None or better(c.score, held.score):
            best[c.provenance.team_version] = c
    return [best[k] for k in sorted(best, key=lambda v: (v is None, v or 0))]


async def remeasure_run(settings: Settings, store: KnowledgeStore, run_id: str, *, rounds: int = 3,
                        split: str = "dev", allowance: float = 0.10,
                        progress: Callable[[int, int, str], None] | None = None) -> MeasurementSet:
    """Measure the finalists and the baseline again, `rounds` times each, interleaved; store and
    return the measurement set."""
    from evoteam.errors import DomainError
    from evoteam.servers.bench.core import evaluate_candidate
    from evoteam.servers.bench.kits import find_kit

    run = await store.get_run(run_id)
    if not run.kit:
        raise DomainError(f"run {run_id} is not bound to a kit: there is nothing to re-measure against")
    kit = find_kit(settings, run.kit)
    splits = ["dev", "heldout"] if split == "all" else [split]
    entries: list[tuple[Remeasured, str]] = []
    start = kit.starting_point()
    if start is not None:
        entries.append((Remeasured(candidate_id=BASELINE, team_version=None, recorded_score=None),
                        start.read_text(encoding="utf-8")))
    for c in await finalists(store, run_id):
        code = (await store.get_candidate(c.id)).code
        if code:
            entries.append((Remeasured(candidate_id=c.id, team_version=c.provenance.team_version,
                                       recorded_score=c.score), code))
    total, done = rounds * len(entries) * len(splits), 0
    for r in range(rounds):
        for entry, code in entries:
            for s in splits:
                if progress:  # (evaluations done, evaluations in all, what runs now)
                    progress(done, total, f"round {r + 1}/{rounds}: {entry.candidate_id} ({s})")
                done += 1
                result = await evaluate_candidate(settings, kit, code=code, split=s)
                score = result.score if result.status == "PASSED" and not result.flagged else None
                (entry.dev_scores if s == "dev" else entry.heldout_scores).append(score)
    if progress:
        progress(total, total, "measured")
    for entry, _ in entries:
        judge(entry, allowance)
    mset = MeasurementSet(run_id=run_id, kit=kit.name, measured_at=datetime.now(UTC), rounds=rounds,
                          splits=splits, noise_allowance=allowance, entries=[e for e, _ in entries])
    await store.put_artifact(ArtifactCreate(run_id=run_id, kind=KIND, name=f"remeasure-{mset.measured_at:%Y%m%dT%H%M%S}.json",
                                            text=mset.model_dump_json(indent=2)))
    return mset


async def latest_measurement_set(store: KnowledgeStore, run_id: str) -> MeasurementSet | None:
    found, cursor = [], None
    while True:
        page = await store.list_artifacts(run_id, kind=KIND, limit=100, cursor=cursor)
        found.extend(page.items)
        cursor = page.next_cursor
        if not cursor:
            break
    if not found:
        return None
    newest = max(found, key=lambda a: (a.provenance.created_at, a.id))
    return MeasurementSet.model_validate_json((await store.get_artifact(newest.id)).text or "{}")
