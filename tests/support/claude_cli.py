"""Run the real Claude Code CLI (bundled in ``claude-agent-sdk``) offline, in a temporary HOME.

Pair with :mod:`tests.support.scripted_api`: the CLI's model calls go to the scripted server via
``ANTHROPIC_BASE_URL``; everything else that could reach the network is switched off by env.
See ``docs/testing.md`` for the facts these helpers rely on.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import claude_agent_sdk

DEFAULT_TIMEOUT = 60.0

#: Env every CLI run gets (on top of a minimal copy of PATH/LANG/TMPDIR).
OFFLINE_ENV: dict[str, str] = {
    "ANTHROPIC_API_KEY": "test-key",
    "ENABLE_TOOL_SEARCH": "false",  # MCP tools offered directly, not deferred behind tool search
    "DISABLE_AUTOUPDATER": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",  # no title/quota side calls, no statsig etc.
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_BUG_COMMAND": "1",
    "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY": "1",
    "IS_SANDBOX": "1",  # lets --dangerously-skip-permissions / bypassPermissions run as root
    "NO_COLOR": "1",
    "TERM": "dumb",
    # evoteam's warm hook process (evoteam/plugin/warm.py), if a test's hooks start one, leaves
    # 20 s after its last hook instead of 10 minutes.
    "EVOTEAM_HOOK_WARM_IDLE": "20",
    # A server's first start imports the MCP SDK before answering; on a busy 2-core machine that
    # passed Claude Code's default 30 s in `claude mcp list`. 60 s is what evoteam's own sessions
    # allow (evoteam/servers/team/launch.py).
    "MCP_TIMEOUT": "60000",
}

# Parent-env variables passed through (everything else, e.g. a real ANTHROPIC_* or
# CLAUDE_CONFIG_DIR, or proxies, is dropped).
_PASSTHROUGH = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TZ", "SYSTEMROOT")


class ClaudeCLIUnavailable(RuntimeError):
    pass


def claude_path() -> str:
    """Path of the Claude Code binary bundled with ``claude-agent-sdk``."""
    p = Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude"
    if not p.is_file() or not os.access(p, os.X_OK):
        raise ClaudeCLIUnavailable(f"bundled Claude Code CLI not found at {p}")
    return str(p)


def claude_version() -> str:
    """E.g. ``'2.1.332'``."""
    out = subprocess.run([claude_path(), "--version"], capture_output=True, text=True, timeout=30).stdout
    return out.split()[0] if out.strip() else ""


# --------------------------------------------------------------------------------------------
# HOME preparation
# --------------------------------------------------------------------------------------------


def prepare_home(
    home: str | os.PathLike[str],
    trusted_dirs: Sequence[str | os.PathLike[str]] = (),
    settings: Mapping[str, Any] | None = None,
) -> Path:
    """Pre-accept onboarding (and workspace trust for ``trusted_dirs``) in ``home/.claude.json``.

    ``-p`` runs and ``claude mcp ...`` do not need it, but an interactive-style run, project
    ``.mcp.json`` approval and some settings do. Existing keys (e.g. ``mcpServers`` written by
    ``claude mcp add``) are kept. ``settings`` is merged into ``home/.claude/settings.json``.
    """
    home = Path(home)
    (home / ".claude").mkdir(parents=True, exist_ok=True)
    cfg_path = home / ".claude.json"
    cfg: dict[str, Any] = {}
    if cfg_path.exists():
        try:
            cfg = json.loads(cfg_path.read_text() or "{}")
        except ValueError:
            cfg = {}
    cfg.setdefault("hasCompletedOnboarding", True)
    projects = cfg.setdefault("projects", {})
    for d in trusted_dirs:
        p = projects.setdefault(str(Path(d).resolve()), {})
        p["hasTrustDialogAccepted"] = True
        p["hasCompletedProjectOnboarding"] = True
    cfg_path.write_text(json.dumps(cfg, indent=2))
    if settings:
        s_path = home / ".claude" / "settings.json"
        current = json.loads(s_path.read_text()) if s_path.exists() else {}
        current.update(settings)
        s_path.write_text(json.dumps(current, indent=2))
    return home


def claude_env(
    home: str | os.PathLike[str],
    base_url: str | None = None,
    env_extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment for one CLI run: minimal parent env + :data:`OFFLINE_ENV` + HOME (+ base URL).

    The directory of the running Python (the venv's ``bin``) is put first on PATH so hooks and
    MCP servers started by the CLI find ``python`` / ``evoteam``.
    """
    env = {k: os.environ[k] for k in _PASSTHROUGH if k in os.environ}
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.update(OFFLINE_ENV)
    env["HOME"] = str(home)
    # An unreachable default so nothing ever goes to api.anthropic.com by accident.
    env["ANTHROPIC_BASE_URL"] = base_url or "http://127.0.0.1:9"
    if env_extra:
        env.update(env_extra)
    return env


# --------------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------------


def run_claude(
    args: Sequence[str],
    home: str | os.PathLike[str],
    cwd: str | os.PathLike[str] | None = None,
    env_extra: Mapping[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    base_url: str | None = None,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``claude *args`` with the offline env; never raises on a non-zero exit.

    The CLI runs in its own process group; on timeout the whole group (MCP servers and hooks
    included) is killed and :class:`subprocess.TimeoutExpired` is raised with the output so far.
    """
    cmd = [claude_path(), *map(str, args)]
    proc = subprocess.Popen(
        cmd,
        cwd=str(cwd) if cwd is not None else str(home),
        env=claude_env(home, base_url, env_extra),
        stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(input=input, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = proc.communicate()
        raise subprocess.TimeoutExpired(cmd, timeout, output=out, stderr=err) from None
    finally:
        if proc.poll() is None:
            _kill_group(proc)
    # Leftover children (a stdio MCP server that ignores stdin EOF) must not outlive the test.
    _kill_group(proc, quiet=True)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _kill_group(proc: subprocess.Popen[str], quiet: bool = False) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


# --------------------------------------------------------------------------------------------
# claude mcp list
# --------------------------------------------------------------------------------------------

_MCP_LINE = re.compile(r"^(?P<name>\S+): (?P<target>.*?) - (?P<status>\S.*)$")


@dataclass
class McpList:
    """Parsed ``claude mcp list``: ``servers`` maps name -> status text (e.g. ``'✔ Connected'``,
    ``'✗ Failed to connect'``, ``'! Needs authentication'``); ``targets`` name -> command/URL."""

    servers: dict[str, str]
    targets: dict[str, str]
    raw: str
    returncode: int

    @property
    def connected(self) -> list[str]:
        return [n for n, s in self.servers.items() if "Connected" in s]

    def is_connected(self, name: str) -> bool:
        return name in self.connected


def parse_mcp_list(stdout: str, returncode: int = 0) -> McpList:
    servers: dict[str, str] = {}
    targets: dict[str, str] = {}
    for line in stdout.splitlines():
        m = _MCP_LINE.match(line.strip())
        if m:
            servers[m["name"]] = m["status"].strip()
            targets[m["name"]] = m["target"].strip()
    return McpList(servers, targets, stdout, returncode)


def claude_mcp_list(
    home: str | os.PathLike[str],
    cwd: str | os.PathLike[str] | None = None,
    env_extra: Mapping[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> McpList:
    """Run ``claude mcp list`` (starts/contacts every configured server) and parse it."""
    p = run_claude(["mcp", "list"], home=home, cwd=cwd, env_extra=env_extra, timeout=timeout)
    return parse_mcp_list(p.stdout, p.returncode)


def claude_mcp_add(
    home: str | os.PathLike[str],
    name: str,
    command_or_url: str,
    *args: str,
    scope: str = "user",
    transport: str | None = None,
    headers: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``claude mcp add [-s scope] [--transport T] [--header ...] [-e K=V] NAME CMD_OR_URL [-- args]``;
    raises on failure."""
    # NAME and CMD/URL first: --header and -e are variadic and would swallow them.
    cmd: list[str] = ["mcp", "add", name, command_or_url, "-s", scope]
    if transport:
        cmd += ["--transport", transport]
    for k, v in (env or {}).items():
        cmd += ["-e", f"{k}={v}"]
    for k, v in (headers or {}).items():
        cmd += ["--header", f"{k}: {v}"]
    if args:
        cmd += ["--", *args]
    p = run_claude(cmd, home=home, cwd=cwd, timeout=30)
    if p.returncode != 0:
        raise RuntimeError(f"claude mcp add failed ({p.returncode}): {p.stdout}\n{p.stderr}")
    return p


# --------------------------------------------------------------------------------------------
# claude -p sessions
# --------------------------------------------------------------------------------------------


@dataclass
class PrintSession:
    """Parsed output of ``claude -p --output-format stream-json --verbose``."""

    events: list[dict[str, Any]]
    returncode: int
    stdout: str
    stderr: str
    args: list[str] = field(default_factory=list)

    def of_type(self, type: str, subtype: str | None = None) -> list[dict[str, Any]]:
        return [
            e
            for e in self.events
            if e.get("type") == type and (subtype is None or e.get("subtype") == subtype)
        ]

    @property
    def init(self) -> dict[str, Any]:
        """The ``system``/``init`` event: ``tools``, ``mcp_servers`` ([{name, status}]),
        ``slash_commands``, ``agents``, ``skills``, ``plugins``, ``model``, ``permissionMode``..."""
        found = self.of_type("system", "init")
        return found[0] if found else {}

    @property
    def result(self) -> dict[str, Any]:
        """The final ``result`` event (``subtype``, ``result`` text, ``total_cost_usd``, ``usage``,
        ``num_turns``, ``is_error``)."""
        found = self.of_type("result")
        return found[-1] if found else {}

    @property
    def result_text(self) -> str:
        return self.result.get("result", "")

    @property
    def mcp_servers(self) -> dict[str, str]:
        """name -> status (``connected``, ``failed``, ``pending``, ...) from the init event."""
        return {s.get("name"): s.get("status") for s in self.init.get("mcp_servers", [])}

    def tool_uses(self, main_only: bool = False) -> list[dict[str, Any]]:
        """tool_use blocks of assistant events (subagents' too unless ``main_only``)."""
        out = []
        for e in self.of_type("assistant"):
            if main_only and e.get("parent_tool_use_id"):
                continue
            out += [b for b in e.get("message", {}).get("content", []) if b.get("type") == "tool_use"]
        return out

    def tool_results(self) -> list[dict[str, Any]]:
        """tool_result blocks of user events (each event's ``tool_use_result`` is richer)."""
        out = []
        for e in self.of_type("user"):
            content = e.get("message", {}).get("content", [])
            if isinstance(content, list):
                out += [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
        return out

    def describe(self) -> str:
        lines = [f"rc={self.returncode} args={self.args}"]
        for e in self.events:
            lines.append(json.dumps(e)[:400])
        if self.stderr:
            lines.append("STDERR: " + self.stderr[-3000:])
        return "\n".join(lines)


def run_print_session(
    prompt: str,
    *,
    home: str | os.PathLike[str],
    cwd: str | os.PathLike[str] | None = None,
    base_url: str | None = None,
    api: Any = None,
    mcp_config: Mapping[str, Any] | str | os.PathLike[str] | None = None,
    strict_mcp_config: bool = False,
    allowed_tools: Sequence[str] = (),
    permission_mode: str | None = None,
    bypass_permissions: bool = False,
    model: str | None = None,
    max_turns: int | None = None,
    extra_args: Sequence[str] = (),
    env_extra: Mapping[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> PrintSession:
    """Run ``claude -p --output-format stream-json --verbose`` with ``prompt`` on stdin.

    ``api``: a started :class:`~tests.support.scripted_api.ScriptedAPI` (or pass ``base_url``).
    ``mcp_config``: a dict (``{"mcpServers": {...}}``) or a path, passed as ``--mcp-config``.
    ``bypass_permissions``: ``--dangerously-skip-permissions`` (works as root thanks to
    ``IS_SANDBOX=1`` in :data:`OFFLINE_ENV`).
    """
    if api is not None and base_url is None:
        base_url = api.base_url
    if base_url is None:
        raise ValueError("run_print_session needs api= or base_url=")
    args: list[str] = ["-p", "--output-format", "stream-json", "--verbose"]
    if model:
        args += ["--model", model]
    if max_turns is not None:
        args += ["--max-turns", str(max_turns)]
    if permission_mode:
        args += ["--permission-mode", permission_mode]
    if bypass_permissions:
        args += ["--dangerously-skip-permissions"]
    if mcp_config is not None:
        if isinstance(mcp_config, Mapping):
            cfg = dict(mcp_config)
            if "mcpServers" not in cfg:
                cfg = {"mcpServers": cfg}
            args += ["--mcp-config", json.dumps(cfg)]
        else:
            args += ["--mcp-config", str(mcp_config)]
    if strict_mcp_config:
        args += ["--strict-mcp-config"]
    if allowed_tools:
        # one comma-separated value: the flag is variadic, and the prompt goes on stdin anyway
        args += ["--allowedTools", ",".join(allowed_tools)]
    args += list(extra_args)
    p = run_claude(
        args, home=home, cwd=cwd, env_extra=env_extra, timeout=timeout, base_url=base_url, input=prompt
    )
    events = []
    for line in p.stdout.splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            events.append(json.loads(line))
        except ValueError:
            events.append({"type": "_non_json", "line": line})
    return PrintSession(events, p.returncode, p.stdout, p.stderr, args)
