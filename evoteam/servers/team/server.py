"""The `team` MCP server: thin tools over `TeamService`.

Environment it honours (besides the usual EVOTEAM_DB / EVOTEAM_PROJECT):
- EVOTEAM_PROJECT_DIR (else CLAUDE_PROJECT_DIR, else the working directory): where
  `.claude/agents/` and the role worktrees go;
- EVOTEAM_TOOL_PREFIX or EVOTEAM_PLUGIN=1: how MCP tools are named in agent files;
- EVOTEAM_SPAWN_MODE=queue: spawn_role only queues roles (the headless supervisor's driver
  starts them), instead of running them in this server process;
- EVOTEAM_SUBAGENT_TYPE: the generic subagent the spawn plan uses (default team-member).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Literal

from mcp.server import MCPServer
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from evoteam.report.summary import RunSummary, summarise_run
from evoteam.servers.team.reflection import Reflection, remeasure_first
from evoteam.servers.guard import EvoServer
from evoteam.config import Settings
from evoteam.servers.common import DomainError, session_actor, tool_errors
from evoteam.servers.knowledge.connect import component_store, open_store
from evoteam.servers.knowledge.rows import decode_cursor, encode_cursor
from evoteam.servers.knowledge.store import KnowledgeStore
from evoteam.servers.team.core import TeamService, role_env
from evoteam.servers.team.cost import load_price_table
from evoteam.servers.team.materialise import GENERIC_AGENT
from evoteam.servers.team.toolnaming import ToolNaming
from evoteam.servers.team.models import (
    BudgetReport,
    Coordination,
    DesignResult,
    KnowledgePlan,
    RoleSession,
    RoleSpec,
    SpawnPlan,
    TeamDesign,
    TeamStatus,
    TeamVersion,
    TeamVersionSummary,
)
from evoteam.servers.team.runners import RunnerFactory

INSTRUCTIONS = """\
evoteam team tools: design a team version of invented roles for a run (design_team), start it
(follow the returned spawn plan with the Agent tool, or spawn_role for headless sessions in their
own git worktrees), watch it (team_status, budget), stop roles (stop_role), record an in-session
role's end (record_role_result), and record the supervisor's reflection on a version (reflect).
Every version, session, reflection and cost is kept in the knowledge store. The supervisor's
guide (how to run the /evolve-team loop) is the resource evoteam://team/supervisor-guide and the
prompt supervisor_guide, in every install."""

GUIDE_URI = "evoteam://team/supervisor-guide"


def supervisor_guide(run_id: str | None = None) -> str:
    """The in-session supervisor prompt with this install's tool names. The team CLI's `prompt`
    command prints the same text; the skill loads it through the plugin's launcher when it can."""
    from evoteam.supervisor.prompts import supervisor_prompt  # the prompt texts live with the supervisor

    return supervisor_prompt("session", run_id, ToolNaming.from_env())

Version = Annotated[int | None, Field(ge=1, description="default: the current one")]


class VersionList(BaseModel):
    run_id: str
    items: list[TeamVersionSummary]
    total: int
    next_cursor: str | None = None


class TeamView(BaseModel):
    """A team version, and its spawn plan when asked for."""

    team: TeamVersion
    plan: SpawnPlan | None = None


class StopResult(BaseModel):
    run_id: str
    stopped: list[RoleSession]


def _project_dir(project_dir: Path | None) -> Path:
    if project_dir is not None:
        return Path(project_dir)
    for var in ("EVOTEAM_PROJECT_DIR", "CLAUDE_PROJECT_DIR"):
        if os.environ.get(var):
            return Path(os.environ[var])
    return Path.cwd()


def build_server(settings: Settings, store: KnowledgeStore | None = None, *,
                 runner_factory: RunnerFactory | None = None, project_dir: Path | None = None) -> MCPServer:
    """Build the team server. Without `store`, it opens the configured store for its lifetime."""
    holder: dict[str, TeamService] = {}
    errors: list[str] = []

    def make_service(kb: KnowledgeStore) -> TeamService:
        mode = "queue" if os.environ.get("EVOTEAM_SPAWN_MODE") == "queue" else "run"
        return TeamService(component_store("team", kb), kb=kb, project_dir=_project_dir(project_dir), naming=ToolNaming.from_env(),
                           runner_factory=runner_factory, prices=load_price_table(settings),
                           subagent_type=os.environ.get("EVOTEAM_SUBAGENT_TYPE") or GENERIC_AGENT,
                           spawn_mode=mode, env=role_env(settings),
                           queue_dir=settings.state_root / "bench" / "queue")

    @contextlib.asynccontextmanager
    async def lifespan(_server: MCPServer) -> AsyncIterator[dict]:
        if store is not None:
            holder.setdefault("svc", make_service(store))
            try:
                yield {}
            finally:
                await holder["svc"].shutdown()
            return
        async with open_store(settings, session_actor(settings, "team"), at_first_call=True) as opened:
            try:
                holder["svc"] = make_service(opened)
            except DomainError as exc:  # e.g. a shared knowledge server: the tools say why they cannot work
                errors.append(str(exc))
                yield {}
                return
            try:
                yield {}
            finally:
                await holder["svc"].shutdown()

    server = EvoServer("team", instructions=INSTRUCTIONS, lifespan=lifespan)

    def svc() -> TeamService:
        if errors:
            raise DomainError(errors[0])
        if "svc" not in holder:
            if store is None:
                raise RuntimeError("the team server's store is not open")
            holder["svc"] = make_service(store)
        return holder["svc"]

    @server.resource(GUIDE_URI, name="supervisor-guide", mime_type="text/markdown",
                     description="The supervisor's guide: read the state, diagnose, reflect, design, start, monitor")
    def guide_resource() -> str:
        return supervisor_guide()

    @server.prompt(name="supervisor_guide", description="The evoteam supervisor's guide for one run")
    def guide_prompt(run_id: str | None = None) -> str:
        return supervisor_guide(run_id)

    @server.tool()
    @tool_errors
    async def design_team(run_id: str, diagnosis: str, rationale: str, roles: list[RoleSpec],
                          coordination: Coordination | None = None,
                          knowledge_plan: KnowledgePlan | None = None) -> DesignResult:
        """Store the next team version of a run and get its spawn plan.

        diagnosis: why progress stalled (v1: your first assessment); rationale: how this answers it.
        Returns the Agent calls (team-member subagent, each role's brief) in steps; isolation=worktree
        roles get a git worktree now. Earlier versions' unfinished roles are stopped."""
        design = TeamDesign(run_id=run_id, diagnosis=diagnosis, rationale=rationale, roles=roles,
                            coordination=coordination or Coordination(),
                            knowledge_plan=knowledge_plan or KnowledgePlan())
        return await svc().design_team(design)

    @server.tool()
    @tool_errors
    async def get_team(run_id: str, version: Version = None, plan: bool = False) -> TeamView:
        """A stored team version, as designed; plan=true adds its spawn plan."""
        team = await svc().get_team(run_id, version)
        return TeamView(team=team, plan=await svc().spawn_plan(run_id, team.version) if plan else None)

    @server.tool()
    @tool_errors
    async def list_versions(run_id: str, limit: Annotated[int, Field(ge=1, le=200)] = 50,
                            cursor: Annotated[str | None, Field(description="next_cursor of the previous page")] = None
                            ) -> VersionList:
        """A run's team versions, oldest first, with roles and diagnosis (shortened)."""
        items = await svc().list_versions(run_id)
        start = decode_cursor(cursor)
        page = items[start:start + limit]
        more = start + len(page) < len(items)
        return VersionList(run_id=run_id, items=page, total=len(items),
                           next_cursor=encode_cursor(start + limit) if more else None)

    @server.tool()
    @tool_errors
    async def spawn_role(run_id: str, role: str, version: Version = None,
                         runner: Literal["claude", "codex"] | None = None,
                         cap_usd: Annotated[float | None, Field(gt=0)] = None) -> RoleSession:
        """Start one role headless (Agent SDK or codex) in its worktree, capped at cap_usd. Returns
        at once. In a session, use the spawn plan instead."""
        return await svc().spawn_role(run_id, role, version, runner=runner, cap_usd=cap_usd)

    @server.tool()
    @tool_errors
    async def team_status(run_id: str, version: Version = None) -> TeamStatus:
        """A team version's state: each role's status, cost and last message; whether the version
        has finished; the run's best score, NDG, spend, and evaluations queued on this host."""
        return await svc().team_status(run_id, version)

    @server.tool(annotations=ToolAnnotations(destructiveHint=True, idempotentHint=True))
    @tool_errors
    async def stop_role(run_id: str, role: str | None = None, version: Version = None,
                        reason: str = "stopped by the supervisor") -> StopResult:
        """Stop one role (or all) of a team version: headless sessions end, planned ones never
        start, work stays; an in-session subagent is only marked stopped."""
        stopped = await svc().stop_role(run_id, role, version, reason=reason)
        return StopResult(run_id=run_id, stopped=stopped)

    @server.tool()
    @tool_errors
    async def record_role_result(run_id: str, role: str, version: Version = None,
                                 status: Literal["finished", "failed", "over_budget", "stopped"] = "finished",
                                 summary: str = "", cost_usd: Annotated[float | None, Field(ge=0)] = None,
                                 transcript_path: str | None = None) -> RoleSession:
        """Record that an in-session role (a subagent you started) ended: status, its report as
        summary, cost_usd or transcript_path to price it. The SubagentStop hook does this."""
        return await svc().record_role_result(run_id, role, version, status=status, summary=summary,
                                              cost_usd=cost_usd, transcript_path=transcript_path)

    @server.tool()
    @tool_errors
    async def reflect(run_id: str, observed_behaviour: str = "", diagnosis: str = "", design_change: str = "",
                      outcome: str = "", version: Version = None) -> Reflection:
        """Record your reflection on a team version before designing the next: what it did, why,
        the design change, the outcome. The reply says if its gain is significant."""
        entry = await svc().reflect(run_id, observed_behaviour, diagnosis, design_change, outcome, version)
        summary = await summarise_run(svc().kb, run_id)
        line = next((v for v in summary.versions if v.version == entry.provenance.team_version), None)
        return Reflection(**entry.model_dump(), version_result=line,
                          versions_without_significant_gain=summary.versions_without_significant_gain,
                          roles_not_ended=await svc().roles_not_ended(run_id, entry.provenance.team_version),
                          remeasure_first=remeasure_first(line, summary.remeasure_missing))

    @server.tool()
    @tool_errors
    async def budget(run_id: str) -> BudgetReport:
        """Money spent on a run and left of its budget, per role and per team version."""
        return await svc().budget(run_id)

    @server.tool()
    @tool_errors
    async def run_report(run_id: str) -> RunSummary:
        """The run's numbers for diagnosis: bests with intervals, NDG, each version's gain and
        whether it is significant, costs, gate decisions. `report_command` draws it as a page."""
        return await svc().run_report(run_id)

    return server


def serve_stdio(settings: Settings) -> None:
    build_server(settings).run()
