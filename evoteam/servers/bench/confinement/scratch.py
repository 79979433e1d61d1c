"""Scratch folders in the temporary directory — a candidate's files, the baseline's, a trusted
worker's, a program kit's evaluator's — and what a harness that died left of them.

A harness removes its folders when an evaluation ends, and its idle trusted workers' at exit; a
process killed by a signal (a server stopped with SIGTERM or SIGKILL, a test that kills one)
does neither, and its folders stayed in /tmp for good: ~27 from every test run, a candidate's code
among them, owned by the uid its worker ran as. So each folder is held by the process that made
it — a shared `flock` on the folder, released by the kernel whatever way the process ends, in any
PID namespace — and the next harness on the machine removes those nobody holds any more
(`sweep_abandoned`, once per process). And while such a folder exists its owner's uid is not
given to a new worker (`owner_uids`, jail.pick_uid): without Landlock, a worker could otherwise read
an older candidate's files through the uid it happens to share with them.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import stat
import tempfile
import threading
import time
from pathlib import Path

KINDS = ("cand", "baseline", "trusted", "evaluator", "evaluated", "program")
# An unheld folder younger than this is left alone: the maker holds it a moment after mkdtemp,
# and a folder of an evoteam from before these locks may still be in use.
GRACE_S = 600.0

_held: dict[str, int] = {}  # folder -> the descriptor holding its lock
_lock = threading.Lock()
_swept = False


def new_folder(kind: str) -> Path:
    """A fresh ``evoteam-<kind>-…`` folder in the temporary directory, held by this process until
    remove_folder (or its end, however it ends)."""
    folder = Path(tempfile.mkdtemp(prefix=f"evoteam-{kind}-"))
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return folder  # unheld: a sweep that cannot lock it leaves it alone
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
    except OSError:
        os.close(fd)
        return folder
    with _lock:
        _held[str(folder)] = fd
    return folder


def remove_folder(folder: Path | str) -> None:
    """Remove a folder new_folder made (its files first, then the hold: never unheld while there)."""
    shutil.rmtree(folder, ignore_errors=True)
    with _lock:
        fd = _held.pop(str(folder), None)
    if fd is not None:
        os.close(fd)


def _ours(name: str) -> bool:
    parts = name.split("-")
    return len(parts) >= 3 and parts[0] == "evoteam" and parts[1] in KINDS


def sweep_abandoned(root: Path | None = None, grace_s: float | None = None) -> list[str]:
    """Remove the scratch folders in ``root`` (the temporary directory) that no process holds and
    that are older than ``grace_s``: those of harnesses that died. Once per process unless
    ``root`` is given. The names removed."""
    global _swept
    if root is None:
        if _swept:
            return []
        _swept = True
    base = Path(root or tempfile.gettempdir())
    grace_s = GRACE_S if grace_s is None else grace_s
    removed: list[str] = []
    try:
        names = [n for n in os.listdir(base) if _ours(n)]
    except OSError:
        return removed
    now = time.time()
    for name in names:
        path = base / name
        try:
            st = os.lstat(path)
            if not stat.S_ISDIR(st.st_mode) or now - st.st_mtime < grace_s:
                continue  # a link is never followed, a young folder may be about to be held
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # held by a live harness (or a filesystem without locks): left alone
            shutil.rmtree(path, ignore_errors=True)
            if not os.path.lexists(path):
                removed.append(name)
        finally:
            os.close(fd)
    return removed


def owner_uids(lo: int, hi: int, root: Path | None = None) -> set[int]:
    """The uids in [lo, hi) that own an ``evoteam-…`` entry in ``root`` (the temporary directory),
    or anything directly in one: files a worker running as that uid could read."""
    base = Path(root or tempfile.gettempdir())
    uids: set[int] = set()
    try:
        names = [n for n in os.listdir(base) if n.startswith("evoteam-")]
    except OSError:
        return uids
    for name in names:
        path = base / name
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if lo <= st.st_uid < hi:
            uids.add(st.st_uid)
        if stat.S_ISDIR(st.st_mode):
            try:
                with os.scandir(path) as entries:
                    for e in entries:
                        u = e.stat(follow_symlinks=False).st_uid
                        if lo <= u < hi:
                            uids.add(u)
            except OSError:
                continue  # unreadable to us: not ours to judge
    return uids
