"""The budget of a run as `team.budget` reports it, and what it says when nothing records costs.

Costs reach the store from the hooks (the Stop hook prices the supervisor's transcript, the
SubagentStop hook each role's), from headless runners (the SDK's total cost) and from
`record_role_result(cost_usd | transcript_path)`. Installed without hooks (`--mcp-only`, or Codex
without trusted hooks) an interactive run records none of them: the budget would stay at $0 and
"stop when the budget is exhausted" would never fire. So the budget and the run report say
"costs unrecorded" instead of a spend that looks real, and `exhausted` falls back to a number of
finished team versions.
"""

from __future__ import annotations

from evoteam.servers.knowledge.models import Run
from evoteam.servers.knowledge.store import KnowledgeStore
from evoteam.servers.team.models import TERMINAL, BudgetLine, BudgetReport
from evoteam.servers.team.readsql import costs_unrecorded  # also imported from here (report/summary.py)
from evoteam.servers.team.store import TeamStore

# Team versions a run may finish while no cost is recorded before the budget reports it
# exhausted; a user who wants more says so, and the supervisor designs on.
VERSIONS_WITHOUT_COSTS = 3

# A user who asked for two versions read "2 of 3 (more only when the user asks)" as one more to run (mp70).
_THEIRS = " (where the user named a number of versions, stop at theirs: exhausted does not know it)"


def unrecorded_note(versions_done: int | None = None) -> str:
    counted = "" if versions_done is None else (
        f"; exhausted counts finished team versions instead: {versions_done} of {VERSIONS_WITHOUT_COSTS}, the "
        f"default{_THEIRS}")
    return ("costs unrecorded (no evoteam hooks here): spent_usd is not what was spent; record_role_result's "
            "cost_usd records a role's" + counted)


async def finished_versions(team: TeamStore, run: Run) -> int:
    """Team versions of the run whose roles have all ended (earlier versions count as done)."""
    if not run.current_version:
        return 0
    latest = await team.latest_sessions(run.id, run.current_version)
    ended = bool(latest) and all(s.status in TERMINAL for s in latest.values())
    return run.current_version - (0 if ended else 1)


async def budget_report(team: TeamStore, kb: KnowledgeStore, run_id: str) -> BudgetReport:
    spend = await kb.spend(run_id)
    by_version: dict[str, float] = {}
    by_role: dict[str, float] = {}
    for line in spend.lines:
        v = "none" if line.team_version is None else f"v{line.team_version}"
        by_version[v] = round(by_version.get(v, 0.0) + line.usd, 6)
        r = line.role or "(none)"
        by_role[r] = round(by_role.get(r, 0.0) + line.usd, 6)
    exhausted = spend.left_usd is not None and spend.left_usd <= 0
    run = await team.run(run_id)
    recorded, note = True, None
    has_work = bool(run.candidates or run.current_version)
    if not spend.lines and not has_work:  # nothing to tell yet: "recorded" alone read as hooks at work
        # The version count said now, as the skill has the model tell the user (mp67 read it only later).
        note = ("no cost recorded yet: the evoteam hooks record each session's spend; where none run, "
                "costs_recorded turns false once the run has candidates or a team, and exhausted then counts "
                f"finished team versions instead: {VERSIONS_WITHOUT_COSTS}, the default{_THEIRS}")
    if costs_unrecorded(len(spend.lines), has_work):
        done = await finished_versions(team, run)
        recorded, note = False, unrecorded_note(done)
        exhausted = exhausted or done >= VERSIONS_WITHOUT_COSTS
    # Unrecorded costs leave nothing known to be left ("left_usd: 10.0" beside "exhausted: true").
    return BudgetReport(run_id=run_id, budget_usd=spend.budget_usd, spent_usd=round(spend.spent_usd, 6),
                        left_usd=spend.left_usd if recorded else None, exhausted=exhausted, costs_recorded=recorded, note=note,
                        by_version=by_version, by_role=by_role,
                        lines=[BudgetLine(role=x.role, team_version=x.team_version, usd=x.usd) for x in spend.lines])
