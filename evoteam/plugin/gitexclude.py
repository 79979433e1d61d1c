"""Keep evoteam's own files (`.evoteam/`, the generated `.claude/agents/*.md`) out of the
user's git status: patterns go into the repository's `info/exclude` (local to the clone, never
committed), not into a tracked .gitignore. Standard library only (hooks call it)."""

from __future__ import annotations

import contextlib
from pathlib import Path


def _git_dir(project: Path) -> tuple[Path, Path] | None:
    """(the git dir whose info/exclude applies, the work tree's top folder)."""
    for folder in [project, *project.parents]:
        dot = folder / ".git"
        if dot.is_dir():
            return dot, folder
        if dot.is_file():  # a worktree or submodule: "gitdir: <path>"
            text = dot.read_text(encoding="utf-8", errors="replace").strip()
            if not text.startswith("gitdir:"):
                return None
            gitdir = (folder / text[len("gitdir:"):].strip()).resolve()
            common = gitdir / "commondir"  # worktrees share the main clone's info/exclude
            if common.is_file():
                gitdir = (gitdir / common.read_text().strip()).resolve()
            return gitdir, folder
    return None


def keep_out_of_git(project: Path, patterns: list[str]) -> Path | None:
    """Add the patterns (paths relative to the repository root) missing from info/exclude.
    Returns the exclude file, or None when `project` is not in a git repository."""
    project = Path(project).resolve()
    with contextlib.suppress(OSError):
        found = _git_dir(project)
        if found is None:
            return None
        gitdir, root = found
        prefix = project.relative_to(root).as_posix()
        wanted = [f"/{prefix}/{p}" if prefix != "." else f"/{p}" for p in patterns]
        exclude = gitdir / "info" / "exclude"
        current = exclude.read_text(encoding="utf-8", errors="replace") if exclude.is_file() else ""
        missing = [p for p in wanted if p not in current.splitlines()]
        if missing:
            exclude.parent.mkdir(parents=True, exist_ok=True)
            head = "" if not current or current.endswith("\n") else "\n"
            if "# evoteam" not in current:
                head += "# evoteam's own files (run state, generated role agents)\n"
            exclude.write_text(current + head + "\n".join(missing) + "\n", encoding="utf-8")
        return exclude
    return None
