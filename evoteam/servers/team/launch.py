"""How evoteam starts a headless Claude Code session of its own (a role, a supervisor wake):
the environment that marks it as evoteam's (so the plugin's hooks leave it alone) and makes it
wait for its MCP servers, and the process guard it runs under (see `procguard`)."""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

# Set in every session evoteam starts itself: "role" or "wake". The plugin's hooks read it
# (evoteam.plugin.state.started_by_evoteam) and never steer such a session.
ORIGIN_VAR = "EVOTEAM_SESSION_ORIGIN"

# Claude Code connects MCP servers in the background by default, so a `-p` session's first
# request can go out before the evoteam tools exist. These make it wait for them. 60 s, the most
# Claude Code honours for MCP_TIMEOUT: a server's first start (no fast-start manifest yet, so the
# MCP SDK is imported before `initialize` is answered) passed its default 30 s on a 2-core
# machine with two busy loops.
MCP_WAIT_ENV = {
    "MCP_CONNECTION_NONBLOCKING": "false",
    "MCP_SERVER_CONNECTION_BATCH_SIZE": "8",
    "CLAUDE_CODE_MCP_STARTUP_WAIT_MS": "60000",
    "MCP_TIMEOUT": "60000",
}


def session_env(origin: str) -> dict[str, str]:
    """Environment for a session evoteam starts itself (caller-given values win over it)."""
    return {**MCP_WAIT_ENV, ORIGIN_VAR: origin}


def proc_file(project_dir: Path, session_id: str) -> Path:
    """Where the guard of a role session records its process group."""
    return Path(project_dir) / ".evoteam" / "procs" / f"{session_id}.json"


def _real_cli(cli_path: str | Path | None) -> str:
    if cli_path:
        return str(cli_path)
    import claude_agent_sdk

    bundled = Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude"
    if bundled.is_file():
        return str(bundled)
    found = shutil.which("claude")
    if not found:
        raise FileNotFoundError("Claude Code was not found: install it (npm i -g @anthropic-ai/claude-code)")
    return found


_GUARDS: dict[str, str] = {}
GUARD_PREFIX = "evoteam-guard-"


# A guard folder younger than this is never swept: a guard written by an evoteam from before the
# folders were held is in use by its (still running) process for a while, and its maker takes the
# hold a moment after mkdtemp.
GUARD_GRACE_S = 24 * 3600.0
_held: list[int] = []


def _sweep_guards() -> None:
    """Remove guard folders that no process holds any more (one per team server process stayed
    in the temporary folder for good). Each is held by its process with a shared flock, which the
    kernel drops however the process ends, in any PID namespace (as bench scratch folders are)."""
    now = time.time()
    for old in Path(tempfile.gettempdir()).glob(GUARD_PREFIX + "*"):
        try:
            if now - old.lstat().st_mtime < GUARD_GRACE_S:
                continue
            fd = os.open(old, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue  # held by a live process
        shutil.rmtree(old, ignore_errors=True)
        os.close(fd)


def _remove_own_guards() -> None:
    for script in _GUARDS.values():
        shutil.rmtree(Path(script).parent, ignore_errors=True)


def guarded_cli(cli_path: str | Path | None = None) -> str:
    """An executable that runs the Claude Code CLI under the process guard (a tiny script in a
    temporary folder, made once per process and CLI, removed when the process exits)."""
    real = _real_cli(cli_path)
    if real not in _GUARDS:
        if not _GUARDS:
            _sweep_guards()
            atexit.register(_remove_own_guards)
        folder = Path(tempfile.mkdtemp(prefix=f"{GUARD_PREFIX}{os.getpid()}-"))
        with contextlib.suppress(OSError):  # held while this process lives: never swept meanwhile
            fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            _held.append(fd)
        script = folder / "claude"
        script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -P -m evoteam.servers.team.procguard "{real}" "$@"\n')
        script.chmod(0o755)
        _GUARDS[real] = str(script)
    return _GUARDS[real]
