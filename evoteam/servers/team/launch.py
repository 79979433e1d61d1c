"""How evoteam starts a headless Claude Code session of its own (a role, a supervisor wake):
the environment that marks it as evoteam's (so the plugin's hooks leave it alone) and makes it
wait for its MCP servers, and the process guard it runs under (see `procguard`)."""

from __future__ import annotations

import shutil
import sys
import tempfile
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


def guarded_cli(cli_path: str | Path | None = None) -> str:
    """An executable that runs the Claude Code CLI under the process guard (a tiny script in a
    temporary folder, made once per process and CLI)."""
    real = _real_cli(cli_path)
    if real not in _GUARDS:
        folder = Path(tempfile.mkdtemp(prefix="evoteam-guard-"))
        script = folder / "claude"
        script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -P -m evoteam.servers.team.procguard "{real}" "$@"\n')
        script.chmod(0o755)
        _GUARDS[real] = str(script)
    return _GUARDS[real]
