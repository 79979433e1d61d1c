"""What a role's brief needs besides the design: where the role works and what is best so far.

An in-session role (a subagent the supervisor starts with the Agent tool) used to be told it had
its own git worktree and branch while none existed, so an obedient role committed on the main
branch. Here the worktree is made when the team is designed, for every role whose isolation is
`worktree`, and the brief names its path and branch; where none can be made (the project is not
a git repository, or has no commit), the brief says the role works in the shared tree and must
not commit, and design_team warns the supervisor why.
"""

from __future__ import annotations

from pathlib import Path

from evoteam.errors import DomainError
from evoteam.servers.knowledge.errors import StoreError
from evoteam.servers.knowledge.models import BaseModel, Candidate, Run  # BaseModel: built on first use
from evoteam.servers.knowledge.pairedbest import with_paired_best
from evoteam.servers.knowledge.store import KnowledgeStore
from evoteam.servers.team.materialise import shared_place
from evoteam.servers.team.models import TeamVersion
from evoteam.servers.team.worktrees import ensure_worktree


class Place(BaseModel):
    """Where one role works, as its brief states it."""

    note: str
    worktree: str | None = None
    branch: str | None = None
    warning: str | None = None


def worktree_note(path: Path | str, branch: str) -> str:
    return (f"Your own git worktree is `{path}` on branch `{branch}`, made for you: work and commit there "
            f"(e.g. `cd {path}` in Bash), never on the main branch. Other roles have their own branches.")


async def place_roles(team: TeamVersion, run: Run, project_dir: Path) -> dict[str, Place]:
    """Make (or reuse) the worktree of every role with isolation=worktree; say where each works."""
    places: dict[str, Place] = {}
    for role in team.roles:
        if role.isolation != "worktree":
            places[role.slug] = Place(note=shared_place(role))
            continue
        try:
            path, branch = await ensure_worktree(project_dir, run.id, team.version, role.slug)
        except DomainError as exc:
            places[role.slug] = Place(note=shared_place(role), warning=str(exc))
            continue
        places[role.slug] = Place(note=worktree_note(path, branch), worktree=str(path), branch=branch)
    return places


def shared_tree_warnings(team: TeamVersion, places: dict[str, Place]) -> list[str]:
    """One warning per reason a role got no worktree, naming every role it holds for: the same
    sentence once per role read twice, word for word, in a design reply (mp63)."""
    names: dict[str, list[str]] = {}
    for role in team.roles:
        if (place := places.get(role.slug)) is not None and place.warning:
            names.setdefault(place.warning, []).append(role.name)
    return [f"{_listed(who)} {'works' if len(who) == 1 else 'work'} in the shared tree: {why}"
            for why, who in names.items()]


def _listed(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


async def best_candidate(kb: KnowledgeStore, run: Run) -> Candidate | None:
    """The run's best candidate without its code, or None when nothing ranks yet: the one the kept
    paired rounds find better than the top by intervals, where they do (score_line says so)."""
    if not run.best_candidate_id:
        return None
    try:
        best = await kb.get_candidate((await with_paired_best(kb, run)).paired_best or run.best_candidate_id)
    except StoreError:  # gone or not visible: the brief then gives the score alone
        return None
    return best.model_copy(update={"code": None})
