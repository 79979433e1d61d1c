"""The real Codex CLI (pinned in tests/support/codex_cli.py) against the scripted Responses API,
with evoteam registered the way the README says (`install.sh --register-only`, which runs
`evoteam install-plugin --codex`)."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import threading
import time
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


def test_evolve_team_skill_runs_one_cycle_in_codex(codex_dir, tmp_path):
    """A Codex session driven by the /evolve-team skill ($evolve-team in Codex): start_run,
    design_team, a headless codex role (team.spawn_role) that evaluates a candidate and records a
    learning, reflect; then the Stop hook keeps the supervisor going while budget remains."""
    from tests.team.conftest import git_project
    from tests.team.test_e2e_codex import CAND_RE, KIT, better_code

    home = tmp_path / "home"
    project = git_project(tmp_path / "project")
    env = codex_env(home, codex_dir, EVOTEAM_DB=str(tmp_path / "kb.db"), EVOTEAM_HOOK_LOG=str(tmp_path / "hooks.log"),
                    EVOTEAM_MAX_IDLE_CONTINUES="1")
    _register(home, env)
    prompt = f"$evolve-team {KIT} --budget-usd 5"
    prober = "You are the **Distance Prober**"
    role_done = threading.Event()

    def out(rec, i=-1) -> dict:
        return json.loads(rec.outputs()[i].split("Output:", 1)[-1])

    def run_id(rec) -> str:
        return out(rec, 0)["id"]

    def wait_for_role(rec):
        assert role_done.wait(240), "the codex role did not finish"
        time.sleep(3)  # the runner records the outcome after the role's last reply
        return Call("team_status", {"run_id": run_id(rec)}, namespace="mcp__team")

    def role_last(rec):
        role_done.set()
        return "report: the row-blocked form passed; learning recorded"

    role_run = lambda rec: re.search(r"run=(run_[A-Za-z0-9_-]+)", "\n".join(rec.user_texts()))[1]  # noqa: E731
    rules = [
        Rule(prober, [
            lambda rec: Call("evaluate", {"kit": KIT, "code": better_code(), "run_id": role_run(rec)},
                             namespace="mcp__bench"),
            lambda rec: Call("add_learning", {"run_id": role_run(rec), "text": "row-blocked product beats broadcasting",
                                              "kind": "technique", "evidence": CAND_RE.findall(rec.outputs()[-1])[:1]},
                             namespace="mcp__knowledge"),
            role_last]),
        Rule(prompt, [
            Call("start_run", {"goal": "fast pairwise distances", "kit": KIT, "direction": "maximize", "x0": 1.0,
                               "budget_usd": 5.0}, namespace="mcp__knowledge"),
            lambda rec: Call("design_team", {"run_id": run_id(rec), "diagnosis": "first look", "rationale": "one prober",
                                             "roles": [{"name": "Distance Prober", "mandate": "Evaluate a faster "
                                                        "kernel and record why.", "mcp_servers": ["knowledge", "bench"]}]},
                             namespace="mcp__team"),
            lambda rec: Call("spawn_role", {"run_id": run_id(rec), "role": "Distance Prober", "runner": "codex"},
                             namespace="mcp__team"),
            wait_for_role,
            lambda rec: Call("reflect", {"run_id": run_id(rec), "observed_behaviour": "the prober evaluated one variant",
                                         "diagnosis": "one idea tried", "design_change": "widen the search",
                                         "outcome": "first candidate recorded"}, namespace="mcp__team"),
            "v1 reflected; next I would design v2",
        ]),
    ]
    with ScriptedResponses(rules) as api:
        config = home / ".codex" / "config.toml"
        config.write_text(provider_config(api.base_url) + config.read_text())
        events = _exec(prompt, env, project, "--dangerously-bypass-hook-trust")
        supervisor = api.conversation(prompt)
        assert not api.errors, api.errors
    calls = [(e["item"]["server"], e["item"]["tool"], e["item"]["status"]) for e in events
             if e.get("type") == "item.completed" and e["item"].get("type") == "mcp_tool_call"]
    assert calls == [("knowledge", "start_run", "completed"), ("team", "design_team", "completed"),
                     ("team", "spawn_role", "completed"), ("team", "team_status", "completed"),
                     ("team", "reflect", "completed")], calls
    rid = run_id(supervisor[-1])
    status = out(supervisor[-1], 3)
    assert [(r["role"], r["status"], r["runner"]) for r in status["roles"]] == [("Distance Prober", "finished", "codex")]

    async def state():
        from evoteam.servers.knowledge.local import LocalKnowledgeStore

        async with LocalKnowledgeStore.open(tmp_path / "kb.db") as kb:
            return ((await kb.list_candidates(rid)).items, (await kb.list_learnings(rid)).items,
                    (await kb.list_history(rid)).items)

    candidates, learnings, history = asyncio.run(state())
    assert [(c.status, c.provenance.role) for c in candidates] == [("PASSED", "Distance Prober")]
    assert any(x.kind == "technique" and x.evidence == [candidates[0].id] for x in learnings)
    assert [(h.team_version, h.diagnosis) for h in history] == [(1, "one idea tried")]
    # the Stop hook kept the supervisor going once (budget left), then its loop guard let go
    assert any("Continue the supervisor loop" in t for r in supervisor for t in r.user_texts()), \
        [r.user_texts()[-1][:200] for r in supervisor]
