"""Validation of a team design, with errors that say what to change."""

from __future__ import annotations

from evoteam.errors import DomainError
from evoteam.servers.team.models import TeamDesign, slugify


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
    if problems:
        raise TeamDesignError("the team design was not stored:\n- " + "\n- ".join(problems))
    return warnings


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
