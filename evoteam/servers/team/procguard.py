"""The process guard around every CLI session evoteam starts headless (roles, supervisor wakes).

`python -m evoteam.servers.team.procguard CLAUDE [ARGS...]` runs the CLI as the leader of its
own process group and ties that group to the life of the process that started the guard (the
`evoteam supervise` driver, or a team server):

- the guard asks Linux to send it SIGTERM when its parent dies (PR_SET_PDEATHSIG), so a driver
  killed with `kill -9` takes its roles with it; on SIGTERM/SIGINT/SIGHUP, and when the CLI
  exits, the guard kills the CLI's whole process group (its MCP servers, hooks and commands);
- the CLI itself gets SIGKILL if the guard dies first;
- when `EVOTEAM_PROC_FILE` is set, the guard writes `{"pid", "pgid", "start"}` there (start is
  the process start time from /proc, so a reused pid is never mistaken for the role), so that
  a restarted driver can find a role process that outlived its driver and end it.

Standard library only: it starts once per session and must start fast.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import sys
from pathlib import Path

PR_SET_PDEATHSIG = 1


def _set_parent_death_signal(sig: int) -> None:
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)


def start_time(pid: int) -> str | None:
    """The start time of a process (clock ticks since boot, from /proc), or None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name may hold spaces and parentheses: the fields follow the last ')'
    fields = stat[stat.rfind(")") + 2:].split()
    return fields[19] if len(fields) > 19 else None


def read_proc_file(path: Path) -> dict | None:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("pgid"), int) else None


def group_alive(record: dict) -> bool:
    """Does the CLI process recorded in a proc file still run (same pid and start time)?"""
    pgid = record.get("pgid")
    return isinstance(pgid, int) and start_time(pgid) is not None and start_time(pgid) == record.get("start")


def kill_recorded(path: Path) -> bool:
    """Kill the process group recorded in a proc file if its leader still runs; True if it did.
    The file is removed either way."""
    record = read_proc_file(path)
    killed = False
    if record is not None and group_alive(record):
        for pid in (record["pgid"], record.get("pid")):
            if isinstance(pid, int):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL) if pid == record["pgid"] else os.kill(pid, signal.SIGKILL)
                    killed = True
    Path(path).unlink(missing_ok=True)
    return killed


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m evoteam.servers.team.procguard CLI [ARGS...]", file=sys.stderr)
        return 2
    parent = os.getppid()
    _set_parent_death_signal(signal.SIGTERM)
    if os.getppid() != parent:  # the parent died before the signal was armed
        return 143
    child = os.fork()
    if child == 0:
        try:
            os.setpgid(0, 0)
            _set_parent_death_signal(signal.SIGKILL)
            os.execv(argv[0], argv)
        finally:
            os._exit(127)
    with contextlib.suppress(OSError):
        os.setpgid(child, child)  # also from this side: no race with the signal handler below

    def end(signum, _frame):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child, signal.SIGKILL)
        os._exit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, end)
    proc_file = os.environ.get("EVOTEAM_PROC_FILE")
    if proc_file:
        with contextlib.suppress(OSError):
            Path(proc_file).parent.mkdir(parents=True, exist_ok=True)
            # Whole or not at all: a reader between create and write read an empty file as no record
            # (a CI run's test of the guard, 2026-12-06).
            partial = Path(f"{proc_file}.{os.getpid()}.tmp")
            partial.write_text(json.dumps({"pid": os.getpid(), "pgid": child, "start": start_time(child)}))
            os.replace(partial, proc_file)
    # the CLI talks to the SDK over the inherited pipes; the guard keeps none of them open
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    _, status = os.waitpid(child, 0)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child, signal.SIGKILL)  # what the CLI left behind (MCP servers ignoring EOF, commands)
    if proc_file:
        with contextlib.suppress(OSError):
            Path(proc_file).unlink()
    return os.waitstatus_to_exitcode(status) if status else 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.exit(code if code >= 0 else 128 - code)
