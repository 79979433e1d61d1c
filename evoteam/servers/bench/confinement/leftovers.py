"""What evoteam processes killed with SIGKILL leave behind, cleared by the next one that jails a
worker: empty cgroups, and workers still stopped (SIGSTOP) whose harness is gone.

A harness stops a candidate's worker between calls; killed itself, it can no longer kill the
worker, which then stays stopped forever, holding its memory (seen after servers and test runs
were killed). Only orphans are touched: a worker whose parent is gone has been re-parented to
init (ppid 1) and has nobody to answer; a live harness's workers are its children.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

WORKER_MODULE = b"evoteam.servers.bench.measurement.worker"
_SWEPT: set[Path] = set()


def sweep_leftovers(base: Path) -> int:
    """Remove the empty groups that evoteam processes now dead left in ``base`` (a server killed
    with SIGKILL never reaches its clean-up), once per folder and process; how many went.

    Only ``evoteam-<pid>-…`` folders of pids that no longer exist are touched, and ``rmdir``
    removes a cgroup only while no process is in it, so a live evaluation's group is never hit."""
    if base in _SWEPT:
        return 0
    _SWEPT.add(base)
    removed = 0
    try:
        entries = list(base.iterdir())
    except OSError:
        return 0
    for entry in entries:
        parts = entry.name.split("-")
        if parts[0] != "evoteam" or len(parts) < 3:
            continue
        pid = parts[2] if parts[1] == "probe" else parts[1]
        if not pid.isdigit() or _alive(int(pid)):
            continue
        try:
            entry.rmdir()
            removed += 1
        except OSError:
            pass
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # it exists; it is someone else's
    return True


_REAPED = False


def kill_orphaned_workers() -> list[int]:
    """SIGKILL (which ends a stopped process too) every evoteam measurement worker re-parented to
    init; once per process. The pids killed."""
    global _REAPED
    if _REAPED:
        return []
    _REAPED = True
    killed: list[int] = []
    if os.getpid() == 1 or b"evoteam" in _cmdline(1):
        return killed  # evoteam is init here (a container's entry): init's workers are its own
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return killed
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                ppid = int(fh.read().rsplit(b")", 1)[1].split()[1])
            if ppid != 1:
                continue
            argv = _cmdline(pid).split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if WORKER_MODULE in argv and argv[argv.index(WORKER_MODULE) - 1] == b"-m":
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except OSError:
                pass  # another user's, where we may not signal it
    return killed


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read()
    except OSError:
        return b""
