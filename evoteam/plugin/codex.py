"""Codex as a harness: its MCP server entries, hooks and skills, and its hook payloads.

Codex (checked with codex-cli 0.171.0) differs from Claude Code in ways that matter here:

- `codex exec` does not wait for MCP servers unless an entry says `required = true`; without it
  the first request goes out with no evoteam tools. MCP tool calls also need
  `default_tools_approval_mode = "approve"` in a non-interactive session.
- A stdio server sees only a few variables of Codex's environment; `env_vars` names the ones
  to pass on (the store, the shared server, the keys).
- Codex does not expand `${CLAUDE_PLUGIN_ROOT}`, so entries carry absolute paths.
- Hooks live in `$CODEX_HOME/hooks.json` (Claude Code's format and event names) and run only
  once trusted: interactively through `/hooks`, or with `--dangerously-bypass-hook-trust`
  for headless runs that evoteam starts itself.
- A hook's `tool_response` for an MCP tool is `{"content": [...]}` rather than the list.

This module imports only the standard library: hooks load it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

SERVERS = ("knowledge", "team", "retrieval", "bench")
SKILLS = ("evolve-team", "kernel-loop", "research")
# Codex event name -> our hook; the same names as Claude Code's.
EVENTS = {"SessionStart": "session-start", "PostToolUse": "post-tool-use", "SubagentStop": "subagent-stop",
          "Stop": "stop", "PreCompact": "pre-compact"}
POST_TOOL_MATCHER = "mcp__.*knowledge__start_run|mcp__.*team__design_team"
# Variables of the Codex process that the servers need to see.
ENV_VARS = ("EVOTEAM_DB", "EVOTEAM_KNOWLEDGE_URL", "EVOTEAM_TOKEN", "EVOTEAM_PROJECT", "EVOTEAM_PROJECT_DIR",
            "EVOTEAM_KITS", "EVOTEAM_CORPUS", "EVOTEAM_PREDICTOR", "EVOTEAM_PYTHON", "EVOTEAM_HOOK_LOG",
            "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "TAVILY_API_KEY", "OPENAI_API_KEY")
MARK = "# evoteam:"  # starts each block of config.toml that evoteam writes


def codex_home(env: dict[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get("CODEX_HOME"):
        return Path(env["CODEX_HOME"])
    return Path(env.get("HOME") or Path.home()) / ".codex"


# ---------------------------------------------------------------- hook payloads


def tool_response(response: Any) -> Any:
    """Codex passes an MCP tool's result as `{"content": [...], ...}`; our hooks read the list."""
    if isinstance(response, dict) and isinstance(response.get("content"), list) and "structuredContent" not in response:
        return response["content"]
    if isinstance(response, dict) and isinstance(response.get("structuredContent"), dict):
        return response["structuredContent"]
    return response


# ---------------------------------------------------------------- config.toml entries


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a valid TOML basic string
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def server_entry(server: str, launcher: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """One `[mcp_servers.<server>]` entry: started by the launcher, waited for, tools approved."""
    entry: dict[str, Any] = {"command": launcher, "args": ["serve", server], "required": True,
                             "startup_timeout_sec": 60, "tool_timeout_sec": 900,
                             "default_tools_approval_mode": "approve", "env_vars": list(ENV_VARS)}
    if env:
        entry["env"] = dict(env)
    return entry


def exec_overrides(server: str, command: str, args: list[str], env: dict[str, str]) -> list[str]:
    """The same entry as `-c key=value` flags of one `codex exec` (headless roles)."""
    entry = server_entry(server, command, env)
    entry["args"] = args
    out: list[str] = []
    for key, value in entry.items():
        out += ["-c", f"mcp_servers.{server}.{key}={_toml(value)}"]
    return out


_TABLE = re.compile(r"^\s*\[\s*mcp_servers\.(\"?)([A-Za-z0-9_-]+)\1(\.[^\]]*)?\s*\]\s*$")
_ANY_TABLE = re.compile(r"^\s*\[")


def _strip_servers(text: str, names: tuple[str, ...]) -> str:
    """Remove the `[mcp_servers.<name>]` tables (and their sub-tables) of `names`, and our marks."""
    out: list[str] = []
    skipping = False
    for line in text.splitlines():
        m = _TABLE.match(line)
        if m:
            skipping = m.group(2) in names
        elif _ANY_TABLE.match(line):
            skipping = False
        if not skipping and not line.startswith(MARK):
            out.append(line)
    while out and not out[-1].strip():
        out.pop()
    return "\n".join(out) + ("\n" if out else "")


def write_servers(config: Path, launcher: str, servers: tuple[str, ...] = SERVERS) -> None:
    """Replace evoteam's server entries in Codex's config.toml (idempotent; other entries kept)."""
    text = config.read_text(encoding="utf-8") if config.is_file() else ""
    text = _strip_servers(text, servers)
    blocks = []
    for name in servers:
        lines = [f"{MARK} the {name} server (evoteam install-plugin; edits here are replaced)",
                 f"[mcp_servers.{name}]"]
        lines += [f"{k} = {_toml(v)}" for k, v in server_entry(name, launcher).items()]
        blocks.append("\n".join(lines))
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(text + ("\n" if text else "") + "\n\n".join(blocks) + "\n", encoding="utf-8")


def remove_servers(config: Path, servers: tuple[str, ...] = SERVERS) -> None:
    if config.is_file():
        config.write_text(_strip_servers(config.read_text(encoding="utf-8"), servers), encoding="utf-8")


# ---------------------------------------------------------------- hooks.json


def _ours(handler: dict[str, Any]) -> bool:
    return "evoteam-launch" in str(handler.get("command", ""))


def hooks_config(launcher: str) -> dict[str, list[dict[str, Any]]]:
    """Our handlers in Codex's hooks.json format (Claude Code's format and event names)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for event, name in EVENTS.items():
        group: dict[str, Any] = {"hooks": [{"type": "command", "command": f'"{launcher}" hook {name}',
                                            "timeout": 30 if name == "subagent-stop" else 15}]}
        if event == "PostToolUse":
            group["matcher"] = POST_TOOL_MATCHER
        out[event] = [group]
    return out


def _without_ours(data: dict[str, Any]) -> dict[str, Any]:
    hooks = data.get("hooks") if isinstance(data.get("hooks"), dict) else {}
    kept: dict[str, Any] = {}
    for event, groups in hooks.items():
        new_groups = []
        for group in groups if isinstance(groups, list) else []:
            handlers = [h for h in group.get("hooks", []) if not _ours(h)]
            if handlers:
                new_groups.append({**group, "hooks": handlers})
        if new_groups:
            kept[event] = new_groups
    return {**data, "hooks": kept}


def write_hooks(path: Path, launcher: str) -> None:
    """Add our handlers to `hooks.json`, keeping every other handler (idempotent)."""
    data = _read_json(path)
    data = _without_ours(data)
    for event, groups in hooks_config(launcher).items():
        data["hooks"].setdefault(event, []).extend(groups)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def remove_hooks(path: Path) -> None:
    if path.is_file():
        data = _without_ours(_read_json(path))
        path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"hooks": {}}
    return data if isinstance(data, dict) else {"hooks": {}}


# ---------------------------------------------------------------- the whole registration


def register(home: Path, plugin_root: Path) -> list[str]:
    """Register evoteam with Codex: the four servers (config.toml), our hooks (hooks.json) and
    the skills ($CODEX_HOME/skills), all pointing into `plugin_root` (a copy without .venv).
    Returns what was done, one line each."""
    launcher = str(plugin_root / "hooks" / "evoteam-launch")
    write_servers(home / "config.toml", launcher)
    write_hooks(home / "hooks.json", launcher)
    for skill in SKILLS:
        target = home / "skills" / skill
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(plugin_root / "skills" / skill, target)
    return [f"servers {' '.join(SERVERS)} in {home / 'config.toml'} (required, tools approved)",
            f"hooks {', '.join(EVENTS)} in {home / 'hooks.json'} (trust them once with /hooks in Codex)",
            f"skills {' '.join('$' + s for s in SKILLS)} in {home / 'skills'}"]


def unregister(home: Path) -> None:
    remove_servers(home / "config.toml")
    remove_hooks(home / "hooks.json")
    for skill in SKILLS:
        shutil.rmtree(home / "skills" / skill, ignore_errors=True)
