"""install.sh's registration on machines with and without the agent CLIs.

- without `claude`/`codex` on PATH (CI on a fresh clone): registration is skipped with a message;
- with Codex (npm `@openai/codex`, installed into a temporary prefix): `codex mcp list` shows the
  four servers after `install.sh --register-only`, and `--unregister` removes them;
- with Claude Code and `--mcp-only`: the servers are registered with `claude mcp add` and the
  skills copied (the plugin route is covered by test_evolve_team.py).

These tests reuse the running virtual environment through EVOTEAM_VENV (never --uninstall,
which would delete it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.claude_cli import claude_env, claude_mcp_list, claude_path, prepare_home

ROOT = Path(__file__).resolve().parents[2]
SERVERS = ("knowledge", "team", "retrieval", "bench")
VENV = str(Path(sys.executable).parent.parent)


def _env(home: Path, path_dirs: list[Path]) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    env = {"HOME": str(home), "EVOTEAM_VENV": VENV, "LANG": "C.UTF-8",
           "PATH": os.pathsep.join([*map(str, path_dirs), "/usr/bin", "/bin"])}
    return env


def _install(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([str(ROOT / "install.sh"), *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)


def test_register_without_agent_clis_skips_visibly(tmp_path):
    env = _env(tmp_path / "home", [])
    assert shutil.which("claude", path=env["PATH"]) is None and shutil.which("codex", path=env["PATH"]) is None
    proc = _install("--register-only", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Claude Code CLI not found" in proc.stdout and "Codex CLI not found" in proc.stdout, proc.stdout
    # the launcher the plugin uses finds this environment through ~/.evoteam/python
    assert (tmp_path / "home" / ".evoteam" / "python").read_text().strip() == f"{VENV}/bin/python"
    # The README's promise: evoteam's folder is private (0700) and its files 0600, whatever the umask.
    assert (tmp_path / "home" / ".evoteam").stat().st_mode & 0o777 == 0o700
    assert (tmp_path / "home" / ".evoteam" / "python").stat().st_mode & 0o777 == 0o600


def test_uninstall_removes_the_environment_and_registration_and_keeps_the_data(tmp_path):
    """The README's "`./install.sh --uninstall` removes the registrations and `.venv` and keeps
    your data", on a stand-in environment (never this one: --uninstall deletes it)."""
    home = tmp_path / "home"
    env = _env(home, [])
    assert _install("--register-only", env=env).returncode == 0  # what a registration leaves
    data = home / ".evoteam" / "evoteam.db"
    data.write_bytes(b"the user's store")
    stand_in = tmp_path / "stand-in-venv"
    (stand_in / "bin").mkdir(parents=True)
    (stand_in / "bin" / "python").write_text("#!/bin/sh\nexit 0\n")
    proc = _install("--uninstall", env={**env, "EVOTEAM_VENV": str(stand_in)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not stand_in.exists() and Path(VENV).is_dir()
    assert not (home / ".evoteam" / "python").exists() and not (home / ".evoteam" / "plugin").exists()
    assert data.read_bytes() == b"the user's store" and "your data in ~/.evoteam is kept" in proc.stdout


@pytest.fixture(scope="module")
def codex_bin() -> Path:
    from tests.support.codex_cli import codex_bin as pinned

    return pinned()  # the pinned @openai/codex from npm (skips with the reason when npm is unavailable)


def test_codex_mcp_list_shows_servers_after_install(codex_bin, tmp_path):
    env = _env(tmp_path / "home", [codex_bin])
    proc = _install("--register-only", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "registered knowledge team retrieval bench with Codex" in proc.stdout, proc.stdout
    listing = subprocess.run(["codex", "mcp", "list"], env=env, capture_output=True, text=True, timeout=60)
    assert listing.returncode == 0, listing.stderr
    for name in SERVERS:
        line = next((x for x in listing.stdout.splitlines() if x.split() and x.split()[0] == name), "")
        assert "evoteam-launch" in line and f"serve {name}" in line and "enabled" in line, listing.stdout
    # idempotent: a second run leaves exactly one entry per server
    assert _install("--register-only", env=env).returncode == 0
    config = (tmp_path / "home" / ".codex" / "config.toml").read_text()
    assert all(config.count(f"[mcp_servers.{n}]") == 1 for n in SERVERS), config
    # `codex exec` waits only for required servers, and runs MCP tools only when approved
    assert config.count("required = true") == 4 and config.count('default_tools_approval_mode = "approve"') == 4
    codex_home = tmp_path / "home" / ".codex"
    assert (codex_home / "skills" / "evolve-team" / "SKILL.md").is_file()
    assert "evoteam-launch" in (codex_home / "hooks.json").read_text()
    # the launcher the entries point at starts a real server (it finds the venv via ~/.evoteam/python)
    proc = _install("--unregister", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    listing = subprocess.run(["codex", "mcp", "list"], env=env, capture_output=True, text=True, timeout=60)
    assert not any(x.split() and x.split()[0] in SERVERS for x in listing.stdout.splitlines()), listing.stdout
    assert not (codex_home / "skills" / "evolve-team").exists()
    assert "evoteam-launch" not in (codex_home / "hooks.json").read_text()


@pytest.mark.claude_cli
def test_mcp_only_route_registers_servers_and_skills(tmp_path):
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "claude").write_text(f'#!/bin/sh\nexec "{claude_path()}" "$@"\n')
    (shim / "claude").chmod(0o755)
    home = tmp_path / "home"
    env = claude_env(home)
    env.update(EVOTEAM_VENV=VENV, PATH=f"{shim}{os.pathsep}/usr/bin:/bin")
    proc = _install("--register-only", "--mcp-only", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for skill in ("evolve-team", "kernel-loop", "research"):
        assert (home / ".claude" / "skills" / skill / "SKILL.md").is_file()
    # A folder the user trusts, as one they run claude in: Claude Code 2.x (claude-agent-sdk 0.2.190)
    # no longer checks MCP servers from an untrusted one ("Not checked (folder not trusted)").
    prepare_home(home, trusted_dirs=[tmp_path])
    listing = claude_mcp_list(home, cwd=tmp_path, timeout=90)
    for name in SERVERS:
        assert listing.is_connected(name), listing.raw
    proc = _install("--unregister", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not (home / ".claude" / "skills" / "evolve-team").exists()
    assert not any(n in claude_mcp_list(home, cwd=tmp_path, timeout=60).servers for n in SERVERS)
