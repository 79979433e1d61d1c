"""Spawn plans: how a supervisor session starts a team version with the Agent tool.

A `-p` or SDK session does not see agent files written after it started, so the plan never
names the role's own subagent type: every call goes to the generic team-member subagent (or
`general-purpose`), after a marker line that tells hooks which role it is. Its prompt names the
role, its mandate and the agent file that holds the full brief, which the role reads first: the
supervisor then copies a few lines per role instead of every brief (each repeating the task and
the team's rationale), and design_team's output stays small. Where no agent file of this version
exists (it could not be written, or the user's own file has the name), the prompt carries the
whole brief.
"""

from __future__ import annotations

from pathlib import Path

from evoteam.servers.knowledge.models import Candidate, Run
from evoteam.servers.team.materialise import GENERIC_AGENT, role_brief, role_marker
from evoteam.servers.team.toolnaming import ToolNaming
from evoteam.servers.team.models import AgentCall, SpawnPlan, SpawnStep, TeamVersion
from evoteam.servers.team.validate import stage_of


def role_prompt(team: TeamVersion, slug: str, run: Run, naming: ToolNaming | None = None,
                brief_file: Path | None = None, worktree_note: str | None = None,
                best: Candidate | None = None) -> str:
    role = team.role(slug)
    if role is None:
        raise KeyError(slug)
    marker = role_marker(run.id, team.version, role.slug)
    if brief_file is not None:
        mandate = " ".join(role.mandate.split())
        # The first sentence is the brief's own: hooks read the role's name from it (plugin/roles.py).
        return (f"{marker}\nYou are the **{role.name}** in version {team.version} of an evolving agent team working "
                f"on evoteam run `{run.id}`. Your mandate: {mandate[:400] + (' …' if len(mandate) > 400 else '')}\nYour full brief from the "
                f"supervisor (the task, your mandatory reads, where you work, where to record, the rules) is the file "
                f"`{brief_file}`: read it first with the Read tool, then follow it for the whole of this task.")
    return (f"{marker}\n"
            f"Take on the role below for the whole of this task. It is your brief from the supervisor.\n\n"
            f"{role_brief(team, role, run, naming, worktree_note, best)}")


def brief_files(team: TeamVersion, run: Run, project_dir: Path | None) -> dict[str, Path]:
    """The agent files under `<project>/.claude/agents/` that hold this version's briefs (a later
    version's role of the same name replaces the file, so each is checked)."""
    found: dict[str, Path] = {}
    if project_dir is None:
        return found
    mark = f"(evoteam team v{team.version}, run {run.id})"
    for role in team.roles:
        path = Path(project_dir).resolve() / ".claude" / "agents" / f"{role.slug}.md"
        try:
            head = path.read_text(encoding="utf-8", errors="replace")[:2000]
        except OSError:
            continue
        if mark in head:
            found[role.slug] = path
    return found


def spawn_plan(team: TeamVersion, run: Run, naming: ToolNaming | None = None,
               subagent_type: str = GENERIC_AGENT, only: list[str] | None = None,
               materialised: list[str] | None = None, project_dir: Path | None = None,
               notes: dict[str, str] | None = None, best: Candidate | None = None) -> SpawnPlan:
    """The plan for starting `team` (or only the roles named in `only`)."""
    naming = naming or ToolNaming()
    files = brief_files(team, run, project_dir)
    notes = notes or {}
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
                           prompt=role_prompt(team, r.slug, run, naming, files.get(r.slug), notes.get(r.slug), best))
                 for r in roles]
        steps.append(SpawnStep(stage=index, name=name, roles=[r.name for r in roles], calls=calls))
    k = naming.tool
    instructions = (
        f"Start team v{team.version}: per step, all of its Agent calls in ONE message, each with exactly the given "
        f"subagent_type ('general-purpose' if that type is not offered), description and prompt; the next step "
        f"once every role of this one has ended. Without the evoteam hooks, call "
        f"`{k('team', 'record_role_result')}` with each role's final report when it ends. Then "
        f"`{k('team', 'team_status')}`, reflect (`{k('team', 'reflect')}`) and design the next version.")
    return SpawnPlan(run_id=run.id, version=team.version, subagent_type=subagent_type, steps=steps,
                     materialised=materialised or [], instructions=instructions)
