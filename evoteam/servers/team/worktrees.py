"""A git worktree and branch per role: `<project>/.evoteam/worktrees/<run>/v<N>-<slug>` on
branch `evoteam/<run>/v<N>-<slug>`, made from the project's current HEAD. A restarted role
reuses its worktree and branch."""

from __future__ import annotations

import asyncio
from pathlib import Path

from evoteam.errors import DomainError
from evoteam.safepath import ID_NAME, checked_name, inside


async def _git(cwd: Path, *args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec("git", *args, cwd=str(cwd), stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.STDOUT)
    out, _ = await proc.communicate()
    return proc.returncode or 0, out.decode(errors="replace").strip()


async def repo_root(project_dir: Path) -> Path:
    rc, out = await _git(project_dir, "rev-parse", "--show-toplevel")
    if rc != 0:
        raise DomainError(f"{project_dir} is not a git repository, so roles cannot get their own worktree: run "
                          f"`git init && git commit --allow-empty -m start` there, or give the roles "
                          f"isolation='shared'")
    return Path(out)


def branch_name(run_id: str, version: int, slug: str) -> str:
    return f"evoteam/{run_id}/v{version}-{slug}"


async def ensure_worktree(project_dir: Path, run_id: str, version: int, slug: str) -> tuple[Path, str]:
    """Create (or reuse) the role's worktree; returns (path, branch)."""
    root = await repo_root(Path(project_dir))
    rc, _ = await _git(root, "rev-parse", "--verify", "HEAD")
    if rc != 0:
        raise DomainError(f"the repository at {root} has no commit yet; commit once so that roles can branch "
                          f"from it")
    # The run id and slug come from the store (an imported run, an agent's role name): they
    # become path components and a branch name only by the one safe-path rule.
    checked_name(run_id, ID_NAME, "run id")
    checked_name(slug, ID_NAME, "role slug")
    path = inside(root / ".evoteam" / "worktrees", run_id, f"v{version}-{slug}", what="worktree")
    branch = branch_name(run_id, version, slug)
    _exclude(root)
    if (path / ".git").exists():
        return path, branch
    path.parent.mkdir(parents=True, exist_ok=True)
    rc, _ = await _git(root, "rev-parse", "--verify", f"refs/heads/{branch}")
    args = ["worktree", "add", str(path), branch] if rc == 0 else ["worktree", "add", "-b", branch, str(path), "HEAD"]
    rc, out = await _git(root, *args)
    if rc != 0:
        await _git(root, "worktree", "prune")
        rc, out = await _git(root, *args)
        if rc != 0:
            raise DomainError(f"git worktree add failed for role {slug}: {out}")
    return path, branch


def _exclude(root: Path) -> None:
    """Keep `.evoteam/` out of `git status` without touching the user's .gitignore."""
    exclude = root / ".git" / "info" / "exclude"
    if not exclude.parent.is_dir():
        return
    try:
        text = exclude.read_text() if exclude.exists() else ""
        if ".evoteam/" not in text.split():
            exclude.write_text(text + ("" if text.endswith("\n") or not text else "\n") + ".evoteam/\n")
    except OSError:
        pass
