"""What a role's brief needs besides the design: where the role works and what is best so far.

An in-session role (a subagent the supervisor starts with the Agent tool) used to be told it had
its own git worktree and branch while none existed, so an obedient role committed on the main
branch. Here the worktree is made when the team is designed, for every role whose isolation is
`worktree`, and the brief names its path and branch; where none can be made (the project is not
a git repository, or has no commit), the brief says the role works in the shared tree and must
not commit, and design_team warns the supervisor why.
"""

from __future__ import annotations

import re
from pathlib import Path

from evoteam.errors import DomainError
from evoteam.servers.knowledge.errors import StoreError
from evoteam.servers.knowledge.models import BaseModel, Candidate, Run  # BaseModel: built on first use
from evoteam.servers.knowledge.pairedbest import with_paired_best
from evoteam.servers.knowledge.store import KnowledgeStore
from evoteam.servers.team.materialise import shared_place
from evoteam.servers.team.models import TeamDesign, TeamVersion
from evoteam.servers.team.validate import SERVER_TOOL_NAMES
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


# A read that is a file's path and nothing else ("baseline.py", "task_kits/k/inputs.py", "/abs/x.cu"):
# a folder in it, or a source or text file's ending ("np.einsum", "docs.nvidia.com" are neither).
_FILE_READ = re.compile(r"^`?(?P<path>[\w./~-]*\w\.(?P<ext>[A-Za-z0-9]{1,6}))`?$")
_FILE_ENDINGS = frozenset("py pyi cu cuh cpp cc c hpp md txt rst json yaml yml toml csv ipynb sh log".split())


def missing_reads(design: TeamDesign, project_dir: Path) -> list[str]:
    """The reads (the plan's shared_reads, a role's reads_first) that are a file's path found
    neither as given nor under the project folder, and that no role or the plan is to write: a
    brief listed `baseline.py` and `task_kits/<kit>/baseline.py`, neither there, and the role was
    told to read them (mp70)."""
    written = {w.strip().strip("`") for w in [*design.knowledge_plan.shared_writes,
                                               *(x for r in design.roles for x in (*r.writes_to, *r.deliverables))]}
    missing: list[str] = []
    for item in [*design.knowledge_plan.shared_reads, *(r for role in design.roles for r in role.reads_first)]:
        match = _FILE_READ.match(item.strip())
        if match is None or match["path"] in missing or match["path"] in written:
            continue
        if "/" not in match["path"] and (match["ext"].lower() not in _FILE_ENDINGS
                                         or match["path"].split(".")[0] in SERVER_TOOL_NAMES):
            continue  # `np.einsum`, `team.budget`: a name, not a file
        path = Path(match["path"]).expanduser()
        try:
            found = (path if path.is_absolute() else Path(project_dir) / path).is_file()
        except OSError:  # a name too long, or a folder not readable: not found either way
            found = False
        if not found:
            missing.append(match["path"])
    return missing


_NOT_THERE = (" (no such file under the project folder when the team was designed: bench.describe_kit gives a "
              "kit's files)")


def with_missing_noted(design: TeamDesign, missing: list[str]) -> TeamDesign:
    """``design`` with a note beside each of its ``missing`` reads, so the briefs say it where the
    role reads them: the design was stored with the bare path, which the role could not open, and
    the supervisor, told so, could only fix it by designing a version more (mp71)."""
    if not missing:
        return design

    def noted(items: list[str]) -> list[str]:
        return [i + _NOT_THERE if (m := _FILE_READ.match(i.strip())) and m["path"] in missing else i for i in items]

    plan = design.knowledge_plan
    return design.model_copy(update={
        "knowledge_plan": plan.model_copy(update={"shared_reads": noted(plan.shared_reads)}),
        "roles": [r.model_copy(update={"reads_first": noted(r.reads_first)}) for r in design.roles]})


def missing_read_warnings(missing: list[str], project_dir: Path) -> list[str]:
    """One warning naming ``missing`` (missing_reads) to the supervisor."""
    if not missing:
        return []
    return [f"the reads {', '.join(f'`{m}`' for m in missing)} are no file{'s' if len(missing) > 1 else ''} under "
            f"the project folder {project_dir}: the briefs say so beside them (no new version is needed); where a "
            "role must read a kit's file, bench.describe_kit gives its absolute path"]


def _listed(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


async def best_candidate(kb: KnowledgeStore, run: Run) -> tuple[Run, Candidate | None]:
    """The run as a brief says it (with_paired_best) and its best candidate without its code, or None
    when nothing ranks yet: the one the kept paired rounds find better than the top by intervals,
    where they do (score_line says so, and a best within noise of the last new best)."""
    if not run.best_candidate_id:
        return run, None
    run = await with_paired_best(kb, run)
    try:
        best = await kb.get_candidate(run.paired_best or run.best_candidate_id)
    except StoreError:  # gone or not visible: the brief then gives the score alone
        return run, None
    return run, best.model_copy(update={"code": None})
