"""The real Codex CLI (pinned in tests/support/codex_cli.py) against the scripted Responses API,
with evoteam registered the way the README says (`install.sh --register-only`, which runs
`evoteam install-plugin --codex`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.codex_cli import codex_bin, codex_env, provider_config
from tests.support.scripted_responses import Call, Rule, ScriptedResponses

ROOT = Path(__file__).resolve().parents[2]
VENV = str(Path(sys.executable).parent.parent)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def codex_dir() -> Path:
    return codex_bin()


def _register(home: Path, env: dict[str, str]) -> None:
    proc = subprocess.run([str(ROOT / "install.sh"), "--register-only"], cwd=ROOT, capture_output=True, text=True,
                          env={**env, "EVOTEAM_VENV": VENV}, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "registered knowledge team retrieval bench with Codex" in proc.stdout, proc.stdout


def _exec(prompt: str, env: dict[str, str], cwd: Path, *flags: str) -> list[dict]:
    proc = subprocess.run(["codex", "exec", "--json", "--skip-git-repo-check", *flags, prompt], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def test_codex_exec_calls_evoteam_tools_and_hooks_record_the_run(codex_dir, tmp_path):
    home, project = tmp_path / "home", tmp_path / "project"
    project.mkdir()
    env = codex_env(home, codex_dir, EVOTEAM_DB=str(tmp_path / "kb.db"), EVOTEAM_HOOK_LOG=str(tmp_path / "hooks.log"))
    _register(home, env)
    # the skills reach Codex's skill list; the hooks are in hooks.json
    assert (home / ".codex" / "skills" / "evolve-team" / "SKILL.md").is_file()
    hooks = json.loads((home / ".codex" / "hooks.json").read_text())["hooks"]
    assert {"SessionStart", "PostToolUse", "Stop", "SubagentStop", "PreCompact"} <= set(hooks)

    prompt = "start an evoteam run on rmsnorm_cpu"
    rules = [Rule(prompt, [
        Call("describe_kit", {"kit": "rmsnorm_cpu"}, namespace="mcp__bench"),
        Call("start_run", {"goal": "rmsnorm via codex", "kit": "rmsnorm_cpu", "direction": "maximize",
                           "x0": 1.0, "budget_usd": 5.0}, namespace="mcp__knowledge"),
        lambda rec: "started " + json.loads(rec.outputs()[-1].split("Output:", 1)[-1])["id"],
    ])]
    with ScriptedResponses(rules) as api:
        (home / ".codex" / "config.toml").write_text(provider_config(api.base_url)
                                                     + (home / ".codex" / "config.toml").read_text())
        events = _exec(prompt, env, project, "--dangerously-bypass-hook-trust")
        first = api.conversation(prompt)[0]
        # the tools were visible in the very first request (required servers are waited for)
        assert {"mcp__bench.describe_kit", "mcp__knowledge.start_run", "mcp__team.design_team"} <= set(first.tool_names())
        assert any("evolve-team" in t for t in first.user_texts()) or "evolve-team" in json.dumps(first.body)
    calls = [e["item"] for e in events if e.get("type") == "item.completed" and e["item"].get("type") == "mcp_tool_call"]
    assert [(c["server"], c["tool"], c["status"]) for c in calls] == [
        ("bench", "describe_kit", "completed"), ("knowledge", "start_run", "completed")], calls
    final = [e["item"]["text"] for e in events if e.get("type") == "item.completed"
             and e["item"].get("type") == "agent_message"][-1]
    run_id = final.split()[-1]
    assert run_id.startswith("run_")
    # Codex's PostToolUse hook (through evoteam/plugin/codex.py) made it the project's active run
    state = json.loads((project / ".evoteam" / "active_run.json").read_text())
    assert state["run_id"] == run_id, state
    # a second session in the project gets the run's context from the SessionStart hook
    with ScriptedResponses([Rule("what is going on", ["ok"])]) as api:
        config = (home / ".codex" / "config.toml").read_text()
        (home / ".codex" / "config.toml").write_text(config.replace(config.split('base_url = "')[1].split('"')[0],
                                                                    api.base_url, 1))
        _exec("what is going on", env, project, "--dangerously-bypass-hook-trust")
        assert f"evoteam run `{run_id}`" in json.dumps(api.conversation("what is going on")[0].body)
