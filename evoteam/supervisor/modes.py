"""Ablation modes of `evoteam supervise`: the evolving team against a fixed team and a single
agent, at the same budget on the same kit (the papers' comparisons, as a feature).

- `evolving` (the default): the supervisor wakes, diagnoses and redesigns the team.
- `fixed`: one static team, started again as the next version each time it finishes; the
  supervisor never wakes and the team is never redesigned. By default the four roles of the
  Evolving Agent Teams paper's fixed baseline (planner, hardware researcher, implementer,
  profiler), in our own words; `--team FILE.json` gives another.
- `solo`: one engineer doing everything, started again each time it finishes.

Both static modes record every version in the same store with the same provenance, so
`evoteam compare` can put them beside an evolving run of the same kit.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import TypeAdapter, ValidationError

from evoteam.errors import DomainError
from evoteam.servers.team.models import Coordination, RoleSpec, Stage, TeamDesign

Mode = Literal["evolving", "fixed", "solo"]

_TOOLS = ["knowledge", "bench", "retrieval"]

FIXED_TEAM = [
    RoleSpec(name="Planner", mandate="Read the learnings and the best candidates, decide the next optimisation "
             "to try and why, and write the plan as a learning for the others.", mcp_servers=_TOOLS),
    RoleSpec(name="Hardware Researcher", mandate="Find what the target hardware and the literature say about "
             "the current bottleneck (retrieval gate first) and record the facts that matter, with sources.",
             mcp_servers=_TOOLS),
    RoleSpec(name="Implementer", mandate="Implement the plan as a candidate, evaluate it with the bench, and "
             "record what happened as a learning with the evaluation as evidence.", mcp_servers=_TOOLS),
    RoleSpec(name="Profiler", mandate="Measure where the best candidate spends its time, per workload, and "
             "record the profile and the next bottleneck as learnings.", mcp_servers=_TOOLS),
]

SOLO = [RoleSpec(name="Engineer", mandate="Improve the kit's score on your own: read the learnings, use "
                 "retrieval when stuck, write candidates, evaluate every one with the bench, and record "
                 "what you learn.", mcp_servers=_TOOLS)]


def load_team_file(path: Path) -> list[RoleSpec]:
    """A JSON list of roles (the `roles` of design_team) for `--mode fixed --team FILE`."""
    try:
        roles = TypeAdapter(list[RoleSpec]).validate_json(path.read_bytes())
    except OSError as exc:
        raise DomainError(f"cannot read the team file {path}: {exc.strerror}") from exc
    except (ValidationError, json.JSONDecodeError) as exc:
        first = exc.errors()[0] if isinstance(exc, ValidationError) else {"msg": str(exc), "loc": ()}
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise DomainError(f"{path} is not a list of roles ({where}: {first['msg']}); each role needs a name "
                          "and a mandate") from None
    if not roles:
        raise DomainError(f"{path} lists no roles")
    return roles


def static_design(mode: Mode, run_id: str, version: int, roles: list[RoleSpec] | None = None) -> TeamDesign:
    """Team version `version` of a fixed or solo run: the same roles every time."""
    if mode == "evolving":
        raise ValueError("an evolving run is designed by its supervisor")
    chosen = roles or (FIXED_TEAM if mode == "fixed" else SOLO)
    what = "one agent" if mode == "solo" else f"a fixed team of {len(chosen)}"
    stages = [Stage(roles=[r.name for r in chosen[:1]]), Stage(roles=[r.name for r in chosen[1:]])] \
        if mode == "fixed" and len(chosen) > 1 and roles is None else []
    return TeamDesign(
        run_id=run_id,
        diagnosis=f"{mode} mode (ablation): no supervisor diagnosis; {what}, started again as version {version}",
        rationale=f"the {mode} baseline of a matched-budget comparison: the team is never redesigned",
        roles=chosen, coordination=Coordination(stages=stages))


def mode_of(diagnoses: list[str]) -> Mode:
    """The mode a run was driven in, read from its team versions' diagnoses (a static mode
    writes its name first, see `static_design`); a run with no version yet counts as evolving."""
    for diagnosis in diagnoses:
        for mode in ("fixed", "solo"):
            if diagnosis.startswith(f"{mode} mode (ablation)"):
                return mode  # type: ignore[return-value]
    return "evolving"
