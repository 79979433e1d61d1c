"""The store file's own failures, as one line saying what is wrong and what to do.

SQLite reports a read-only file, a full disk, a lock held too long or a damaged file as
`sqlite3.Error`; left alone they reach a user as a traceback and an agent as a bare "Error
executing tool". Every connection of `Database` turns them into a `StoreFailure` here.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from evoteam.servers.knowledge.errors import StoreFailure

_CODES = {name: getattr(sqlite3, name) for name in (
    "SQLITE_READONLY", "SQLITE_FULL", "SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_CORRUPT", "SQLITE_NOTADB",
    "SQLITE_CANTOPEN", "SQLITE_IOERR", "SQLITE_PERM", "SQLITE_AUTH") if hasattr(sqlite3, name)}


def _primary(exc: sqlite3.Error) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return None if code is None else code & 0xFF


def disk_full(path: Path) -> bool:
    """The filesystem holding ``path`` has no room left for an ordinary user."""
    import os

    try:
        st = os.statvfs(Path(path).parent)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < 64 * 1024


def describe(exc: BaseException, path: Path) -> StoreFailure | None:
    """A one-line StoreFailure for a failure of the store file, or None for anything else
    (a bug, a constraint broken by a caller: those are not the file's fault)."""
    if not isinstance(exc, sqlite3.Error):
        return None
    code, text = _primary(exc), str(exc).lower()

    def has(name: str) -> bool:
        return code is not None and code == _CODES.get(name)

    if has("SQLITE_FULL") or "disk is full" in text or "database or disk is full" in text or (
            (has("SQLITE_IOERR") or "disk i/o" in text) and disk_full(path)):  # a full disk fails WAL set-up as I/O
        return StoreFailure(f"the disk holding the store {path} is full; nothing of this write was kept: free "
                            f"space and retry (evoteam recovers by itself once there is room)")
    if has("SQLITE_READONLY") or "readonly" in text or "read-only" in text:
        return StoreFailure(f"the store {path} is read-only here, so it cannot be written: fix its permissions "
                            f"(and its folder's), or point EVOTEAM_DB at a writable copy; reading still works")
    if has("SQLITE_BUSY") or has("SQLITE_LOCKED") or "locked" in text or "busy" in text:
        return StoreFailure(f"the store {path} is busy: another process has held its write lock too long "
                            f"(a big import?); retry in a moment")
    if has("SQLITE_CORRUPT") or has("SQLITE_NOTADB") or "malformed" in text or "not a database" in text:
        return StoreFailure(f"the store {path} is damaged (not a readable evoteam database): run `evoteam doctor`, "
                            f"then restore it from a backup or `evoteam kb import` of an export into a new file")
    if has("SQLITE_CANTOPEN") or has("SQLITE_PERM") or "unable to open" in text:
        return StoreFailure(f"the store {path} cannot be opened: check that its folder exists and is readable "
                            f"(EVOTEAM_DB says where it is)")
    if has("SQLITE_IOERR") or "disk i/o" in text:
        return StoreFailure(f"reading or writing the store {path} failed (disk I/O error): check the disk, then "
                            f"retry; `evoteam doctor` checks the file")
    return None
