"""One rule for every file evoteam writes from data.

Names that come from data (a FlashInfer-Bench Solution's ``name`` and ``author``, an artifact's
name, a candidate id, a role's slug, a run id) end up as path components. Data is written by
agents, by candidates and by whoever made an export folder, so a name is checked twice before
anything is written:

1. against the naming rule of its format (``checked_name``): one plain component, no separator,
   no ``.``/``..``, no control character, bounded length;
2. the resolved destination must stay inside the destination folder (``inside``), so a symbolic
   link planted inside the folder cannot lead a write elsewhere.

Folders written as a whole (exports) are built in a hidden sibling and renamed into place
(``staged_folder``), so a failure half-way (a full disk) leaves no partial folder behind that a
later import could mistake for a complete one; single files are replaced atomically
(``write_atomic``). Kept free of heavy imports: hooks and the CLI load it.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from evoteam.errors import DomainError

# FlashInfer-Bench names its files after definitions, solutions and authors
# (``solutions/<author>/<op_type>/<definition>/<solution>.json``); its published names are
# identifiers with '.', '-' and '+'. Nothing else is accepted as such a name.
FIB_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]{0,127}$")
# Ids the stores make (``run_…``, ``cand_…``) and role slugs.
ID_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]{0,127}$")
# A relative path inside a folder (a solution's source file, a workload's blob): components
# of this shape joined by '/'.
_COMPONENT = re.compile(r"^[A-Za-z0-9_.+@=, -]{1,255}$")


class UnsafePath(DomainError):
    """A name or path from data that would not stay a plain name inside its folder."""


def checked_name(value: object, rule: re.Pattern[str], what: str) -> str:
    """``value`` when it is a string obeying ``rule`` and is one plain path component."""
    if not isinstance(value, str) or not rule.match(value) or value in (".", "..") or ".." in value:
        shown = repr(value)[:80] if isinstance(value, str) else type(value).__name__
        raise UnsafePath(f"{what} {shown} is not allowed as a file name: use letters, digits, '_', '-' and '.' "
                         f"(no '/', no '..', at most 128 characters)")
    return value


def _components(rel: str, what: str) -> list[str]:
    if not isinstance(rel, str) or not rel or rel.startswith("/") or "\\" in rel or "\x00" in rel:
        raise UnsafePath(f"{what} {str(rel)[:80]!r} is not a plain relative path")
    parts = rel.split("/")
    for part in parts:
        if part in ("", ".", "..") or not _COMPONENT.match(part) or part.strip() != part:
            raise UnsafePath(f"{what} {rel[:80]!r} is not a plain relative path (component {part[:40]!r})")
    return parts


def inside(base: Path, *parts: str, what: str = "path") -> Path:
    """``base / parts…`` after checking each part (a relative path of plain components) and that
    the fully resolved result, links followed, is still below ``base``."""
    root = Path(base).resolve()
    target = root
    for part in parts:
        for component in _components(part, what):
            target = target / component
    resolved = target.resolve()
    if resolved == root or not resolved.is_relative_to(root):
        raise UnsafePath(f"refusing to write {what} {'/'.join(parts)[:80]!r}: it would land outside {base}")
    return resolved


def write_atomic(path: Path, data: bytes | str, encoding: str = "utf-8") -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder, renamed over it:
    a reader sees the old file or the new one, never half of one."""
    path = Path(path)
    raw = data.encode(encoding) if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:40]}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


@contextmanager
def staged_folder(dest: Path) -> Iterator[Path]:
    """A fresh hidden folder beside ``dest`` to write into; renamed to ``dest`` when the block
    ends normally, removed whole when it raises. ``dest`` must not exist, or be an empty folder."""
    dest = Path(dest)
    parent = dest.parent.resolve()
    parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(dir=parent, prefix=f".{dest.name[:60]}.partial-"))
    try:
        yield stage
        if dest.is_dir() and not dest.is_symlink():
            dest.rmdir()  # only an empty folder; a non-empty one raises and nothing is replaced
        os.rename(stage, dest)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
