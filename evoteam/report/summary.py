"""The report's numbers, small enough for a tool reply: what a supervisor reads to see the run
the way its report draws it (per-version bests and costs, spend by role, retrieval quality)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from evoteam.report.data import RunReport, gather
from evoteam.servers.knowledge.store import KnowledgeStore
from evoteam.servers.team.budget import costs_unrecorded, unrecorded_note


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
    costs: str | None = Field(default=None, description="set when nothing records this run's costs: spent_usd "
                                                       "is then not what was spent")
    remeasured_changed: list[str] = Field(default_factory=list,
                                          description="candidates whose recorded score the newest re-measurement "
                                                      "did not confirm")
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
        remeasured_changed=[e.candidate_id for e in (report.remeasured.entries if report.remeasured else [])
                            if e.changed],
        costs=unrecorded_note() if costs_unrecorded(len(report.spend_by_role), bool(report.candidates or report.versions))
        else None,
        report_command=f"evoteam report {run.id} -o report-{run.id}.html")


async def summarise_run(store: KnowledgeStore, run_id: str) -> RunSummary:
    return summarise(await gather(store, run_id))
