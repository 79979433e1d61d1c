"""The plugin's static parts agree with each other: manifests, hooks, MCP config, skills, launcher."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SERVERS = ("knowledge", "team", "retrieval", "bench")
LAUNCHER = ROOT / "hooks" / "evoteam-launch"


def test_manifests():
    plugin = json.loads((ROOT / ".claude-plugin" / "plugin.json").read_text())
    market = json.loads((ROOT / ".claude-plugin" / "marketplace.json").read_text())
    codex = json.loads((ROOT / ".codex-plugin" / "plugin.json").read_text())
    assert plugin["name"] == codex["name"] == "evoteam" == market["plugins"][0]["name"]
    assert plugin["version"] == codex["version"] == market["plugins"][0]["version"]
    assert market["plugins"][0]["source"] == "./"
    assert "./agents/team-member.md" in plugin["agents"]


def test_mcp_config_uses_the_launcher_for_every_server():
    servers = json.loads((ROOT / ".mcp.json").read_text())["mcpServers"]
    assert set(servers) == set(SERVERS)
    for name, spec in servers.items():
        assert spec["command"] == "${CLAUDE_PLUGIN_ROOT}/hooks/evoteam-launch" and spec["args"] == ["serve", name]
    assert servers["team"]["env"]["EVOTEAM_SUBAGENT_TYPE"] == "evoteam:team-member"


def test_hooks_json_events_and_commands():
    from evoteam.plugin.hooks import HOOKS

    config = json.loads((ROOT / "hooks" / "hooks.json").read_text())["hooks"]
    assert {"SessionStart", "SubagentStop", "Stop", "PreCompact", "PostToolUse"} <= set(config)
    for groups in config.values():
        for group in groups:
            for h in group["hooks"]:
                assert h["command"].startswith('"${CLAUDE_PLUGIN_ROOT}/hooks/evoteam-launch" hook ')
                assert h["command"].split()[-1] in HOOKS
    assert os.access(LAUNCHER, os.X_OK)


def test_skills_have_frontmatter():
    for name in ("evolve-team", "kernel-loop", "research"):
        text = (ROOT / "skills" / name / "SKILL.md").read_text()
        assert text.startswith("---\n") and f"\nname: {name}\n" in text and "\ndescription: " in text


def test_launcher_hook_without_python_is_silent_and_serve_explains(tmp_path):
    env = {"HOME": str(tmp_path), "PATH": "/nonexistent", "EVOTEAM_PYTHON": ""}
    fake = tmp_path / "plugin" / "hooks"
    fake.mkdir(parents=True)
    launcher = fake / "evoteam-launch"
    launcher.write_bytes(LAUNCHER.read_bytes())
    launcher.chmod(0o755)
    hook = subprocess.run(["/bin/sh", str(launcher), "hook", "stop"], input="{}", env=env, capture_output=True,
                          text=True, timeout=30)
    assert hook.returncode == 0 and hook.stdout == ""
    serve = subprocess.run(["/bin/sh", str(launcher), "serve", "knowledge"], env=env, capture_output=True, text=True,
                           timeout=30)
    assert serve.returncode == 1 and "install.sh" in serve.stderr


def test_files_in_the_working_folder_never_shadow_evoteams_modules(tmp_path):
    """Hooks and servers start in the project (a role's worktree, where agents write
    candidates): a file there named like a module evoteam imports must not run in their place."""
    from evoteam.servers.team.runners import mcp_server_config

    project = tmp_path / "project"
    project.mkdir()
    marker = tmp_path / "imported"
    for module in ("json", "asyncio", "pydantic", "click", "evoteam"):
        (project / f"{module}.py").write_text(f"open({str(marker)!r}, 'a').write({module!r} + ' ')\n")
    home = Path(tempfile.mkdtemp(prefix="evw-", dir="/tmp"))
    env = {**os.environ, "EVOTEAM_PYTHON": sys.executable, "EVOTEAM_HOME": str(home), "HOME": str(tmp_path),
           "EVOTEAM_DB": str(tmp_path / "kb.db"), "EVOTEAM_HOOK_LOG": str(tmp_path / "hooks.log"),
           "EVOTEAM_HOOK_WARM_IDLE": "2"}
    try:
        for _ in range(2):  # the second hook is served by the warm hook process, started in the project
            hook = subprocess.run([str(LAUNCHER), "hook", "stop"], input="{}", cwd=project, env=env,
                                  capture_output=True, text=True, timeout=60)
            assert hook.returncode == 0
            time.sleep(1.0)
        cli = subprocess.run([str(LAUNCHER), "hook", "show"], cwd=project, env=env, capture_output=True, text=True,
                             timeout=60)
        assert cli.returncode == 0, cli.stderr
        prompt = subprocess.run([str(LAUNCHER), "prompt", "--mode", "session"], cwd=project, env=env,
                                capture_output=True, text=True, timeout=60)
        assert prompt.returncode == 0 and "supervisor" in prompt.stdout, prompt.stderr
        assert not marker.exists(), marker.read_text()
        # The servers a headless role starts (in its worktree) run the same way.
        config = mcp_server_config("bench", {})
        server = subprocess.run([config["command"], *config["args"], "--help"], cwd=project, env=env,
                                capture_output=True, text=True, timeout=60)
        assert server.returncode == 0 and "-P" in config["args"], server.stderr
        assert not marker.exists(), marker.read_text()
    finally:
        shutil.rmtree(home, ignore_errors=True)
