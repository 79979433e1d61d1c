"""Validation of a team design, with errors that say what to change."""

from __future__ import annotations

import difflib
import re

from evoteam.errors import DomainError
from evoteam.servers.team.models import TeamDesign, slugify
from evoteam.servers.team.toolnaming import ToolNaming


class TeamDesignError(DomainError):
    """A team design that cannot be stored; the message lists every problem."""


def validate_design(design: TeamDesign, budget_left: float | None = None) -> list[str]:
    """Check a design; raise TeamDesignError listing every problem, or return warnings."""
    problems: list[str] = []
    warnings: list[str] = []
    seen: dict[str, str] = {}
    for role in design.roles:
        slug = role.slug
        if slug in seen:
            problems.append(f"roles {seen[slug]!r} and {role.name!r} have the same name (as '{slug}'): "
                            f"give each role a distinct name")
        else:
            seen[slug] = role.name
        if not role.mandate.strip():
            problems.append(f"role {role.name!r} has an empty mandate: say what it is responsible for")
        if slug == "team-member":
            problems.append("'team-member' is the name of the generic subagent; invent a name for the role")
        if role.runner == "codex" and role.model not in ("inherit",) and role.model.startswith(("sonnet", "opus",
                                                                                               "haiku")):
            warnings.append(f"role {role.name!r} runs on codex but names Claude model {role.model!r}; "
                            f"codex ignores it")
    staged: dict[str, int] = {}
    for index, stage in enumerate(design.coordination.stages):
        label = stage.name or f"stage {index + 1}"
        for name in stage.roles:
            key = slugify(name)
            if key not in seen:
                problems.append(f"{label} names an unknown role {name!r}; roles are: "
                                f"{', '.join(repr(n) for n in seen.values())}")
            elif key in staged:
                problems.append(f"role {seen[key]!r} appears in two stages ({staged[key] + 1} and {index + 1}); "
                                f"put each role in one stage")
            else:
                staged[key] = index
    for handoff in design.coordination.handoffs:
        for end in (handoff.from_role, handoff.to_role):
            if slugify(end) not in seen:
                problems.append(f"hand-off {handoff.from_role!r} -> {handoff.to_role!r} names an unknown role "
                                f"{end!r}")
        if slugify(handoff.from_role) == slugify(handoff.to_role):
            problems.append(f"hand-off from {handoff.from_role!r} to itself: name two different roles")
        elif all(slugify(end) in seen for end in (handoff.from_role, handoff.to_role)):
            warnings += _handoff_order(handoff.from_role, handoff.to_role, staged)
    if budget_left is not None:
        capped = sum(r.budget_usd or 0 for r in design.roles)
        if capped > budget_left:
            warnings.append(f"the roles' caps add up to ${capped:.2f} but only ${budget_left:.2f} is left; "
                            f"headless roles will be capped at what is left")
    problems += unknown_tools(design)
    if problems:
        raise TeamDesignError("the team design was not stored:\n- " + "\n- ".join(problems))
    return warnings


# Every tool of the four servers: a role's text that names another sends the role to a tool that
# does not exist (mp67 wrote knowledge.record_learning; the brief copied it beside add_learning).
# tests/team/test_tool_names.py keeps this equal to what the servers register.
SERVER_TOOL_NAMES: dict[str, frozenset[str]] = {
    "knowledge": frozenset({"add_history", "add_learning", "best_candidates", "finish_run", "get_artifact",
                            "get_candidate", "get_run", "history", "learnings", "list_artifacts", "list_runs",
                            "put_artifact", "record_candidate", "search", "start_run", "trajectory"}),
    "team": frozenset({"budget", "design_team", "get_team", "list_versions", "record_role_result", "reflect",
                       "run_report", "spawn_role", "stop_role", "team_status"}),
    "retrieval": frozenset({"gate", "lookup", "record_outcome", "retrieval_stats", "score_documents", "search"}),
    "bench": frozenset({"compare", "describe_kit", "evaluate", "evaluation_result", "list_kits", "remeasure"}),
}
# `knowledge.add_learning`, `mcp__bench__evaluate`, `mcp__plugin_evoteam_team__budget`, and names under
# the user's EVOTEAM_TOOL_PREFIX (toolnaming.ToolNaming), not another MCP server's that happens to end
# in one of ours (`mcp__github_retrieval__search_code`); a path's `docs/knowledge.md` is no tool (a
# name with no underscore is read only where it is close to one).
_SERVERS = "(knowledge|bench|team|retrieval)"


def _tool_ref() -> re.Pattern[str]:
    either = "|".join(re.escape(p) for p in sorted(ToolNaming.prefixes(), key=len, reverse=True))
    return re.compile(rf"(?<![\w/.-])(?:(?:{either}){_SERVERS}__|{_SERVERS}[.:])([A-Za-z]\w*)")


def unknown_tools(design: TeamDesign) -> list[str]:
    """The tools a design's texts name on a server that has none of that name, each with the
    nearest of that server's tools: refused before anything is stored (said after, a fix would
    have cost a team version)."""
    texts = {"the knowledge plan": [*design.knowledge_plan.shared_reads, *design.knowledge_plan.shared_writes,
                                    design.knowledge_plan.notes],
             "the coordination": [design.coordination.notes, *(h.what for h in design.coordination.handoffs)]}
    for role in design.roles:
        texts[f"role {role.name!r}"] = [role.mandate, *role.deliverables, *role.reads_first, *role.writes_to]
    found: dict[tuple[str, str], list[str]] = {}
    ref = _tool_ref()
    for where, parts in texts.items():
        for m in ref.finditer("\n".join(parts)):
            server, tool = m.group(1) or m.group(2), m.group(3)
            # Near a real tool's name: a typo or a guess ("knowledge.run_id" is a field, sent to no tool).
            known = SERVER_TOOL_NAMES[server]
            if tool not in known and difflib.get_close_matches(tool, known, n=1, cutoff=0.6 if "_" in tool else 0.75):
                places = found.setdefault((server, tool), [])
                places += [] if where in places else [where]
    said = []
    for (server, tool), where in found.items():
        near = difflib.get_close_matches(tool, sorted(SERVER_TOOL_NAMES[server]), n=2, cutoff=0.6)
        said.append(f"{', '.join(where)} {'names' if len(where) == 1 else 'name'} {server}.{tool}, which the "
                    f"{server} server does not have (did you mean {' or '.join(f'{server}.{n}' for n in near)}?): "
                    f"the brief would send the role to it; if it is no tool, write it without `{server}.`")
    return said


def _handoff_order(giver: str, receiver: str, staged: dict[str, int]) -> list[str]:
    """A hand-off whose receiver does not start after its giver ends: said, since the receiver then
    never waits for what it is handed (roles in no stage start at once, with the first stage)."""
    g, r = staged.get(slugify(giver), 0), staged.get(slugify(receiver), 0)
    if r > g:
        return []
    when = "start together" if r == g else "and the receiver ends before the giver starts"
    return [f"hand-off {giver!r} -> {receiver!r}: their stages ({g + 1} and {r + 1}) {when}, so "
            f"{receiver!r} never waits for it; put {receiver!r} in a later stage than {giver!r} for it to"]


def stage_of(design: TeamDesign) -> dict[str, int]:
    """Role slug -> stage number (0-based); unstaged roles are in stage 0."""
    result = {role.slug: 0 for role in design.roles}
    for index, stage in enumerate(design.coordination.stages):
        for name in stage.roles:
            result[slugify(name)] = index
    return result
