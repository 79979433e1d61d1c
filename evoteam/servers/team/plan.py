"""Spawn plans: how a supervisor session starts a team version with the Agent tool.

A `-p` or SDK session does not see agent files written after it started, so the plan never
names the role's own subagent type: every call goes to the generic team-member subagent (or
`general-purpose`) and carries the role's full brief in its prompt, after a marker line that
tells hooks which role it is.
"""

from __future__ import annotations

from evoteam.servers.knowledge.models import Run
from evoteam.servers.team.materialise import GENERIC_AGENT, ToolNaming, role_brief, role_marker
from evoteam.servers.team.models import AgentCall, SpawnPlan, SpawnStep, TeamVersion
from evoteam.servers.team.validate import stage_of


def role_prompt(team: TeamVersion, slug: str, run: Run, naming: ToolNaming | None = None) -> str:
    role = team.role(slug)
    if role is None:
        raise KeyError(slug)
    return (f"{role_marker(run.id, team.version, role.slug)}\n"
            f"Take on the role below for the whole of this task. It is your brief from the supervisor.\n\n"
            f"{role_brief(team, role, run, naming)}")


def spawn_plan(team: TeamVersion, run: Run, naming: ToolNaming | None = None,
               subagent_type: str = GENERIC_AGENT, only: list[str] | None = None,
               materialised: list[str] | None = None) -> SpawnPlan:
    """The plan for starting `team` (or only the roles named in `only`)."""
    naming = naming or ToolNaming()
    stages = stage_of(team)
    wanted = {r.slug for r in team.roles} if only is None else {team.role(n).slug for n in only if team.role(n)}
    steps: list[SpawnStep] = []
    for index in sorted(set(stages.values())):
        roles = [r for r in team.roles if stages[r.slug] == index and r.slug in wanted]
        if not roles:
            continue
        name = (team.coordination.stages[index].name if index < len(team.coordination.stages)
                and team.coordination.stages[index].name else f"stage {index + 1}")
        calls = [AgentCall(subagent_type=subagent_type, description=f"{r.name} (team v{team.version})"[:80],
                           prompt=role_prompt(team, r.slug, run, naming)) for r in roles]
        steps.append(SpawnStep(stage=index, name=name, roles=[r.name for r in roles], calls=calls))
    k = naming.tool
    instructions = (
        f"Start team v{team.version}: for each step in order, make all of that step's Agent tool calls in ONE "
        f"message (they run in parallel; use run_in_background for long work), each with exactly the given "
        f"subagent_type, description and prompt. Wait until every role of a step has ended before starting the "
        f"next step. When a role ends, its completion and cost are recorded by the evoteam SubagentStop hook; "
        f"without the hook, call `{k('team', 'record_role_result')}` with the role's name and its final report. "
        f"Follow progress with `{k('team', 'team_status')}`; when every role has ended, reflect "
        f"(`{k('team', 'reflect')}`) and design the next version. If the subagent type "
        f"'{subagent_type}' is not available, use 'general-purpose' with the same prompt.")
    return SpawnPlan(run_id=run.id, version=team.version, subagent_type=subagent_type, steps=steps,
                     materialised=materialised or [], instructions=instructions)
