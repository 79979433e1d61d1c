"""What Claude Code hooks call into the team core for (kept small: a hook must be quick).

    from evoteam.servers.team.hooks import on_subagent_stop
    result = await on_subagent_stop(store, hook_input)   # hook_input: the SubagentStop JSON

It finds which role the subagent played (the `[evoteam role=... version=... run=...]` marker
that every spawn-plan prompt starts with, read from the subagent's transcript, or from the
given text), records the role's end with its final message, prices the transcript with the
price table and records the cost under that role and version (once per transcript), and says
whether the whole version has now finished, so the hook can tell the supervisor to reflect.
A subagent that is not an evoteam role returns None.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel

from evoteam.servers.knowledge.connect import component_store
from evoteam.servers.knowledge.store import KnowledgeStore
from evoteam.servers.team.core import TeamService
from evoteam.servers.team.cost import PriceTable, load_price_table
from evoteam.servers.team.materialise import RoleMarker, parse_role_marker, role_from_transcript
from evoteam.servers.team.models import RoleSession


class SubagentStopResult(BaseModel):
    run_id: str
    version: int
    role: str
    session: RoleSession
    cost_usd: float
    team_finished: bool
    message: str  # a line for the supervisor's context


def find_role(payload: dict[str, Any]) -> RoleMarker | None:
    """The role a subagent played, from its transcript or its hook payload."""
    path = payload.get("agent_transcript_path")
    if path:
        marker = role_from_transcript(path)
        if marker:
            return marker
    for key in ("prompt", "last_assistant_message"):
        marker = parse_role_marker(str(payload.get(key) or ""))
        if marker:
            return marker
    return None


async def on_subagent_stop(store: KnowledgeStore, payload: dict[str, Any], *,
                           prices: PriceTable | None = None) -> SubagentStopResult | None:
    marker = find_role(payload)
    if marker is None:
        return None
    svc = TeamService(component_store("team", store), kb=store, prices=prices or load_price_table(), write_agent_files=False)
    team = await svc.get_team(marker.run_id, marker.version)
    spec = team.role(marker.slug)
    if spec is None:
        return None
    path = payload.get("agent_transcript_path")
    transcript = path if path and Path(path).is_file() else None
    summary = str(payload.get("last_assistant_message") or "")
    session = await svc.record_role_result(marker.run_id, spec.name, marker.version, status="finished",
                                           summary=summary, transcript_path=transcript)
    status = await svc.team_status(marker.run_id, marker.version)
    if status.finished:
        message = (f"evoteam: every role of team v{marker.version} (run {marker.run_id}) has ended; reflect on "
                   f"it (team.reflect) and design the next version.")
    else:
        left = [r.role for r in status.roles if r.status not in ("finished", "failed", "over_budget", "stopped",
                                                                  "skipped")]
        message = f"evoteam: {spec.name} (v{marker.version}) ended; still running: {', '.join(left)}."
    return SubagentStopResult(run_id=marker.run_id, version=marker.version, role=spec.name, session=session,
                              cost_usd=session.cost_usd, team_finished=status.finished, message=message)
