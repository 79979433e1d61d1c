"""Scratch folders in the temporary directory — a candidate's files, the baseline's, a trusted
worker's, a program kit's evaluator's — and what a harness that died left of them.

A harness removes its folders when an evaluation ends, and its idle trusted workers' at exit; a
process killed by a signal (a server stopped with SIGTERM or SIGKILL, a test that kills one)
does neither, and its folders stayed in /tmp for good: ~27 from every test run, a candidate's code
among them. So each folder is held by the process that made it — a shared `flock` on the folder,
released by the kernel whatever way the process ends, in any PID namespace — and its name ends in
``-held``; a harness removes the folders so named that nobody holds any more (`sweep_abandoned`,
at most once every GRACE_S). Only such names are touched: a folder of an evoteam from before
these locks, or anyone else's, is never taken for abandoned just because nobody holds it.
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
MARK = "-held"  # the end of every name new_folder gives: only these are ever swept
# An unheld folder younger than this is left alone (its maker takes the hold a moment after
# mkdtemp); also the least time between two sweeps of one process.
GRACE_S = 600.0

_held: dict[str, int] = {}  # folder -> the descriptor holding its lock
_lock = threading.Lock()
_last_sweep = float("-inf")


def new_folder(kind: str) -> Path:
    """A fresh ``evoteam-<kind>-…-held`` folder in the temporary directory, held by this process
    until remove_folder (or its end, however it ends). OSError when it cannot be held: an unheld
    folder would look abandoned to the next sweep."""
    folder = Path(tempfile.mkdtemp(prefix=f"evoteam-{kind}-", suffix=MARK))
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            # Never waits: only a sweep takes the exclusive lock, and only for a moment.
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise
    except OSError as exc:
        shutil.rmtree(folder, ignore_errors=True)
        raise OSError(exc.errno, f"cannot hold the scratch folder {folder}: {exc.strerror}") from None
    with _lock:
        _held[str(folder)] = fd
    return folder


def remove_folder(folder: Path | str) -> None:
    """Remove a folder new_folder made (its files first, then the hold: never unheld while there),
    read-only parts included."""
    _writable(Path(folder))
    shutil.rmtree(folder, ignore_errors=True)
    with _lock:
        fd = _held.pop(str(folder), None)
    if fd is not None:
        os.close(fd)


def _ours(name: str) -> bool:
    parts = name.split("-")
    return len(parts) >= 4 and parts[0] == "evoteam" and parts[1] in KINDS and name.endswith(MARK)


def _writable(path: Path) -> None:
    """Let a harness that is not root rmtree into folders an evaluation made read-only (a program's
    folder is 0555). Through descriptors, never following a link: the tree was a candidate's."""
    if os.geteuid() == 0:
        return  # root removes whatever the modes say
    for _, _, _, dir_fd in os.fwalk(path, follow_symlinks=False):
        try:
            os.fchmod(dir_fd, 0o700)
        except OSError:
            pass


def sweep_abandoned(root: Path | None = None, grace_s: float | None = None) -> list[str]:
    """Remove the scratch folders in ``root`` (the temporary directory) that no process holds and
    that are older than ``grace_s``: those of harnesses that died. At most once every GRACE_S
    per process unless ``root`` is given (a long-lived server also clears what harnesses that die
    after it started leave). The names removed."""
    global _last_sweep
    if root is None:
        now = time.monotonic()
        with _lock:
            if now - _last_sweep < GRACE_S:
                return []
            _last_sweep = now
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
            _writable(path)
            shutil.rmtree(path, ignore_errors=True)
            if not os.path.lexists(path):
                removed.append(name)
        finally:
            os.close(fd)
    return removed

