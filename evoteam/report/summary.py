"""The report's numbers, small enough for a tool reply: what a supervisor reads to see the run
the way its report draws it (per-version bests and costs, spend by role, retrieval quality)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from evoteam.report.data import RunReport, gather
from evoteam.servers.knowledge.store import KnowledgeStore


class VersionLine(BaseModel):
    version: int
    roles: list[str]
    best_dev_score: float | None
    cost_usd: float
    spent_usd_when_designed: float


class RunSummary(BaseModel):
    run_id: str
    direction: str
    best_dev_score: float | None
    best_candidate_id: str | None
    best_heldout_score: float | None
    ndg: float | None
    spent_usd: float
    budget_usd: float | None
    candidates: int
    failed_candidates: int
    flagged_candidates: int
    versions: list[VersionLine]
    spend_by_role: dict[str, float]
    gate_decisions: dict[str, int]
    repeated_url_rate: float | None
    spearman_predicted_vs_realised: float | None
    remeasure_changed: list[str] = Field(default_factory=list,
                                         description="finalists whose place in the order by pessimistic bound the "
                                                     "newest re-measurement moved (`bench.remeasure`'s rule)")
    remeasure_within_noise_of_top: list[str] = Field(default_factory=list,
                                                     description="finalists whose re-measured interval overlaps "
                                                                 "the top one's: not established as worse")
    report_command: str


def summarise(report: RunReport, max_versions: int = 30) -> RunSummary:
    run = report.run
    decisions: dict[str, int] = {}
    for g in report.retrieval.gates:
        decisions[g.decision] = decisions.get(g.decision, 0) + 1
    return RunSummary(
        run_id=run.id, direction=run.direction, best_dev_score=run.best_score,
        best_candidate_id=report.best_candidate_id, best_heldout_score=report.best_heldout, ndg=run.ndg,
        spent_usd=run.spent_usd, budget_usd=run.budget_usd, candidates=len(report.candidates),
        failed_candidates=sum(1 for c in report.candidates if c.status != "PASSED"),
        flagged_candidates=sum(1 for c in report.candidates if c.flagged),
        versions=[VersionLine(version=v.version, roles=v.roles, best_dev_score=v.best_of_version, cost_usd=v.cost_usd,
                              spent_usd_when_designed=v.spent_usd) for v in report.versions[-max_versions:]],
        spend_by_role={s.label: round(s.usd, 4) for s in report.spend_by_role},
        gate_decisions=decisions, repeated_url_rate=report.retrieval.repeated_url_rate,
        spearman_predicted_vs_realised=report.retrieval.spearman,
        remeasure_changed=list(report.remeasured.changed) if report.remeasured else [],
        remeasure_within_noise_of_top=list(report.remeasured.within_noise_of_top) if report.remeasured else [],
        report_command=f"evoteam report {run.id} -o report-{run.id}.html")


async def summarise_run(store: KnowledgeStore, run_id: str) -> RunSummary:
    return summarise(await gather(store, run_id))
