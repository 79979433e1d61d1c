"""What decides whether something made earlier may be reused: evoteam's code, the installed
packages and the environment.

The warm hook process (evoteam/plugin/warm.py) and the servers' fast-start front
(evoteam/servers/front.py) reuse work done by an earlier process. Both key it on everything
that could change an answer (a source edit, an upgrade, the store, an off switch, a config
variable), so that nothing is served from a stale process or manifest: a miss costs speed, a
wrong hit would serve wrong answers. Standard library only: both run before any heavy import.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent

# Variables that change from one session, terminal or event to the next and that evoteam never
# reads: keying on them would make every session miss. Claude Code's were read off version
# 2.1.x (its hooks and MCP servers, two sessions compared); a client that adds another
# per-session variable costs speed, never a wrong answer.
VOLATILE_ENV = frozenset({
    # the shell's own
    "_", "SHLVL", "OLDPWD", "PWD",
    # terminals, multiplexers, editors, agents
    "TERM_SESSION_ID", "ITERM_SESSION_ID", "WINDOWID", "TMUX_PANE", "KITTY_WINDOW_ID", "KITTY_PID", "WEZTERM_PANE",
    "SSH_AUTH_SOCK", "SSH_AGENT_PID", "SSH_CLIENT", "SSH_CONNECTION", "SSH_TTY", "XDG_SESSION_ID",
    "GPG_AGENT_INFO", "SECURITYSESSIONID",
    "VSCODE_GIT_IPC_HANDLE", "VSCODE_IPC_HOOK_CLI", "VSCODE_PID", "VSCODE_NONCE", "VSCODE_INJECTION",
    # Claude Code: per session (ids, tokens, its IDE port, its messaging socket, notes folder, pid)
    "CLAUDE_CODE_SSE_PORT", "CLAUDE_CODE_SESSION_ID", "CLAUDE_CODE_REMOTE_SESSION_ID",
    "CLAUDE_CODE_SESSION_ACCESS_TOKEN", "CLAUDE_CODE_LAUNCHED_BY_SESSION_IDS", "CLAUDE_CODE_MESSAGING_SOCKET",
    "CLAUDE_CODE_MESSAGING_TOKEN", "CLAUDE_CODE_CHILD_NOTES_DIR", "CLAUDE_PID",
    # Claude Code: per hook event (SessionStart's env file, Stop's effort level)
    "CLAUDE_ENV_FILE", "CLAUDE_EFFORT",
})


def code_fingerprint(root: Path | str = PACKAGE_DIR) -> str:
    """Path, size and modification time of every Python file of evoteam (a few ms): an edit or
    an upgrade changes it."""
    root = str(root)
    digest = hashlib.sha256(root.encode("utf-8", "surrogateescape"))
    found: list[str] = []
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        if entry.name != "__pycache__":
                            stack.append(entry.path)
                    elif entry.name.endswith(".py"):
                        st = entry.stat()
                        found.append(f"{os.path.relpath(entry.path, root)}\0{st.st_size}\0{st.st_mtime_ns}")
        except OSError:
            continue
    for line in sorted(found):
        digest.update(line.encode("utf-8", "surrogateescape") + b"\n")
    return digest.hexdigest()


def installed_fingerprint() -> list[str]:
    """The distributions installed beside `mcp` (their names carry versions: an upgrade of mcp,
    pydantic or anything else there changes it) and the modification time of mcp's package."""
    spec = importlib.util.find_spec("mcp")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        return ["no mcp"]
    package = Path(list(spec.submodule_search_locations)[0])
    site = package.parent
    names = sorted(n for n in os.listdir(site) if n.endswith((".dist-info", ".egg-info", ".pth")))
    return [str(package), str(package.stat().st_mtime_ns), *names]


def environment_items(env: dict[str, str]) -> list[tuple[str, str]]:
    """The environment as a key: every variable but the volatile ones, sorted."""
    return sorted((name, value) for name, value in env.items() if name not in VOLATILE_ENV)
