"""evoteam inside the real Claude Code CLI: install.sh into a temporary HOME (the plugin route),
then the servers, the /evolve-team skill, the hooks and a whole supervisor -> role -> reflect
cycle on a CPU kit, driven by the scripted Messages API.

One HOME is installed per module (install.sh runs once); each test uses its own project dir and
store file. See docs/plugin.md and docs/testing.md.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import pytest

from evoteam.servers.team.launch import MCP_WAIT_ENV
from tests.support.claude_cli import claude_env, claude_mcp_list, claude_path, prepare_home, run_print_session
from tests.support.scripted_api import Rule, ScriptedAPI, tool_use

ROOT = Path(__file__).resolve().parents[2]
SERVERS = ("knowledge", "team", "retrieval", "bench")
P = "mcp__plugin_evoteam_"
KIT = "rmsnorm_cpu"
CANDIDATE = ROOT / "task_kits" / KIT / "examples" / "better.py"

# Make -p sessions wait until every MCP server is connected, as evoteam's own sessions do (by
# default they connect in the background and the first request may go out before the tools are there).
MCP_WAIT = MCP_WAIT_ENV

pytestmark = pytest.mark.claude_cli


def _shim_dir(tmp: Path) -> Path:
    """A PATH folder with a `claude` that execs the CLI bundled in claude-agent-sdk."""
    d = tmp / "shim"
    d.mkdir(parents=True, exist_ok=True)
    shim = d / "claude"
    shim.write_text(f'#!/bin/sh\nexec "{claude_path()}" "$@"\n')
    shim.chmod(0o755)
    return d


def _install_env(home: Path, shim: Path) -> dict[str, str]:
    env = claude_env(home)
    # install.sh sees `claude` (the shim) but no `codex`; it reuses this test's virtual environment.
    env["PATH"] = f"{shim}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}/usr/bin:/bin"
    env["EVOTEAM_VENV"] = str(Path(sys.executable).parent.parent)
    return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict:
    """A HOME into which ./install.sh registered evoteam (plugin route), plus a trusted project."""
    base = tmp_path_factory.mktemp("evt")
    home = base / "home"
    project = base / "project"
    project.mkdir()
    prepare_home(home, trusted_dirs=[project])
    shim = _shim_dir(base)
    env = _install_env(home, shim)
    proc = subprocess.run([str(ROOT / "install.sh"), "--no-self-check"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return {"home": home, "project": project, "base": base, "install_output": proc.stdout, "env": env}


def _session_env(db: Path, extra: dict | None = None) -> dict[str, str]:
    return {"EVOTEAM_DB": str(db), "EVOTEAM_PREDICTOR": "agent", **MCP_WAIT, **(extra or {})}


def _result(req, index: int = -1) -> dict:
    """The structured result of a tool call seen in a request (mcp 2.x: {"result": ...} text)."""
    text = req.tool_results()[index]["text"]
    data = json.loads(text)
    return data.get("result", data) if isinstance(data, dict) else data


# ------------------------------------------------------------------ install + registration


def test_install_registers_plugin_servers_and_skill(installed, scripted_api):
    home, project = installed["home"], installed["project"]
    assert "installed the evoteam plugin" in installed["install_output"], installed["install_output"]
    assert "Codex CLI not found" in installed["install_output"]
    assert (home / ".evoteam" / "python").read_text().strip().endswith("python")

    listing = claude_mcp_list(home, cwd=project, timeout=90)
    for name in SERVERS:
        # plugin servers are listed as plugin:evoteam:<name>: <command> - <status>
        line = next((x for x in listing.raw.splitlines() if x.startswith(f"plugin:evoteam:{name}: ")), "")
        assert "✔ Connected" in line, listing.raw

    scripted_api.add(Rule(name="main", replies=["nothing to do"]))
    s = run_print_session("hello", home=home, cwd=project, api=scripted_api, timeout=90,
                          env_extra=_session_env(installed["base"] / "kb-init.db"))
    assert s.returncode == 0, s.describe()
    commands = s.init["slash_commands"]
    assert "evoteam:evolve-team" in commands or "evolve-team" in commands, commands
    assert "evoteam:kernel-loop" in commands and "evoteam:research" in commands, commands
    assert all(s.mcp_servers.get(f"plugin:evoteam:{n}") == "connected" for n in SERVERS), s.mcp_servers


def test_install_is_idempotent_and_uninstall_removes_the_plugin(installed, tmp_path):
    """A second install.sh run leaves one marketplace and one plugin; --register-only works."""
    home = installed["home"]
    proc = subprocess.run([str(ROOT / "install.sh"), "--register-only"], cwd=ROOT, env=installed["env"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    plugins = json.loads((home / ".claude" / "plugins" / "installed_plugins.json").read_text())["plugins"]
    assert list(plugins) == ["evoteam@evoteam"] and len(plugins["evoteam@evoteam"]) == 1, plugins
    staged = home / ".evoteam" / "plugin"
    assert (staged / ".claude-plugin" / "plugin.json").is_file() and not (staged / ".venv").exists()


def test_plugin_validates(tmp_path):
    proc = subprocess.run([claude_path(), "plugin", "validate", str(ROOT)], capture_output=True, text=True,
                          timeout=60, env=claude_env(tmp_path / "home"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Validation failed" not in proc.stdout


# ------------------------------------------------------------------ SessionStart context


async def _seed_run(db: Path) -> str:
    from evoteam.servers.knowledge.local import LocalKnowledgeStore
    from evoteam.servers.knowledge.models import LearningCreate, RunCreate
    from evoteam.servers.knowledge.store import Actor

    async with LocalKnowledgeStore.open(db, Actor.local()) as store:
        run = await store.start_run(RunCreate(goal="Make RMSNorm fast on the CPU", kit=KIT, x0=1.0,
                                              budget_usd=3.0))
        await store.add_learning(LearningCreate(run_id=run.id, kind="technique",
                                                text="float32 accumulation with np.einsum beats the float64 upcast"))
        return run.id


def test_session_start_context_reaches_first_request(installed, scripted_api, tmp_path):
    home = installed["home"]
    project = tmp_path / "proj"
    project.mkdir()
    prepare_home(home, trusted_dirs=[project])
    db = tmp_path / "kb.db"
    run_id = asyncio.run(_seed_run(db))
    from evoteam.plugin import state

    state.activate(project, run_id)
    scripted_api.add(Rule(name="main", replies=["noted"]))
    s = run_print_session("what is going on?", home=home, cwd=project, api=scripted_api, timeout=90,
                          env_extra=_session_env(db, {"EVOTEAM_AUTOCONTINUE": "0"}))
    assert s.returncode == 0, s.describe()
    first = scripted_api.matched("main")[0]
    assert "SessionStart hook additional context" in first.system_messages_text, scripted_api.dump()
    assert f"evoteam run `{run_id}`" in first.system_messages_text, first.system_messages_text[-3000:]
    assert "np.einsum" in first.system_messages_text
    assert "$0.00 of $3.00 spent" in first.system_messages_text


# ------------------------------------------------------------------ a whole /evolve-team cycle


def _skill_session(prompt: str, home: Path, project: Path, db: Path, tmp_path: Path, api,
                   idle_continues: int) -> tuple[str, str]:
    """Run one `-p` session with a skill command; returns (the API's dump, the hook log).

    The hooks use a warm hook process (evoteam.plugin.warm) as they do on a user's machine: its
    socket folder is short (pytest's paths are too long for a socket) and it leaves soon after."""
    warm_home = Path(tempfile.mkdtemp(prefix="evw-", dir="/tmp"))
    try:
        s = run_print_session(prompt, home=home, cwd=project, api=api, permission_mode="bypassPermissions",
                              timeout=150, env_extra=_session_env(db, {
                                  "EVOTEAM_MAX_IDLE_CONTINUES": str(idle_continues), "EVOTEAM_HOME": str(warm_home),
                                  "EVOTEAM_HOOK_WARM_IDLE": "5", "EVOTEAM_HOOK_LOG": str(tmp_path / "hooks.log"),
                                  "EVOTEAM_HOOK_DEBUG": "1", "TMPDIR": str(tmp_path)}))
    finally:
        shutil.rmtree(warm_home, ignore_errors=True)  # a warm process whose socket is gone leaves
    dump = api.dump()
    hook_log = (tmp_path / "hooks.log").read_text() if (tmp_path / "hooks.log").exists() else "(no hook log)"
    assert s.returncode == 0, s.describe() + dump + hook_log
    return dump, hook_log

_MARKER = re.compile(r"\[evoteam role=(?P<slug>[a-z0-9-]+) version=(?P<version>\d+) run=(?P<run>[A-Za-z0-9_-]+)\]")


def _role_rule(db: Path | None = None, seen: dict | None = None) -> Rule:
    def evaluate(req):
        m = _MARKER.search(req.first_user_text)
        if db is not None and seen is not None:
            # what the store says while the role works (read directly: this runs in the API's thread)
            with sqlite3.connect(db) as conn:
                seen["while_working"] = conn.execute("SELECT status FROM role_sessions WHERE run_id = ?",
                                                     (m["run"],)).fetchall()
        # no role or team_version given: the provenance must come from the session's context
        return tool_use(P + "bench__evaluate", {
            "kit": KIT, "candidate_path": str(CANDIDATE), "run_id": m["run"],
            "notes": "float32 einsum instead of the float64 upcast"})

    def learn(req):
        m = _MARKER.search(req.first_user_text)
        cand = _result(req)
        return tool_use(P + "knowledge__add_learning", {
            "run_id": m["run"], "kind": "technique", "evidence": [cand["candidate_id"] if "candidate_id" in cand
                                                                  else cand["candidate"]["id"]],
            "text": "ROLE-LEARNING: computing the mean square in float32 is within tolerance and faster"})

    return Rule(first_user="[evoteam role=", system="cc_is_subagent=true", name="role",
                replies=[evaluate, learn, "ROLE-REPORT: evaluated one candidate, recorded one learning."])


def _supervisor_rule(subagent_type: str, state: dict) -> Rule:
    def start(req):
        return tool_use(P + "knowledge__start_run", {
            "goal": "Make RMSNorm fast on the CPU", "kit": KIT, "direction": "maximize", "x0": 1.0,
            "budget_usd": 5.0})

    def design(req):
        run = _result(req)
        state["run_id"] = run["id"]
        return tool_use(P + "team__design_team", {
            "run_id": run["id"], "diagnosis": "v1: no measurements yet; the baseline upcasts to float64.",
            "rationale": "one narrow role measures the obvious float32 variant first",
            "roles": [{"name": "Vectorisation Scout", "mandate": "Measure a float32 variant of the baseline.",
                       "mcp_servers": ["knowledge", "bench"], "isolation": "shared"}]})

    def spawn(req):
        result = _result(req)
        call = result["plan"]["steps"][0]["calls"][0]
        state["plan_subagent_type"] = call["subagent_type"]
        return tool_use("Agent", {"description": "Vectorisation Scout", "prompt": call["prompt"],
                                  "subagent_type": subagent_type, "run_in_background": False})

    def reflect(req):
        return tool_use(P + "team__reflect", {
            "run_id": state["run_id"], "version": 1, "observed_behaviour": "the scout evaluated one candidate",
            "diagnosis": "SUPERVISOR-REFLECTION: float32 accumulation is the first lever",
            "outcome": "one candidate scored", "design_change": "v2 would try blocking"})

    return Rule(first_user="evolve-team", name="supervisor",
                replies=[start, design, spawn, reflect, "Team v1 done; reflection recorded."],
                after="Stopping here.")


async def _read_store(db: Path, run_id: str) -> dict:
    from evoteam.servers.knowledge.local import LocalKnowledgeStore
    from evoteam.servers.knowledge.store import Actor
    from evoteam.servers.team.store import TeamStore

    async with LocalKnowledgeStore.open(db, Actor.local()) as store:
        team = TeamStore(store)
        return {
            "run": await store.get_run(run_id),
            "version": await team.get_version(run_id, 1),
            "sessions": await team.list_sessions(run_id, 1),
            "costs": await store.list_costs(run_id),
            "candidates": (await store.list_candidates(run_id)).items,
            "learnings": (await store.list_learnings(run_id)).items,
            "history": (await store.list_history(run_id)).items,
        }


def test_evolve_team_cycle_on_a_cpu_kit(installed, scripted_api, tmp_path):
    home = installed["home"]
    from tests.team.conftest import git_project

    project = git_project(tmp_path / "proj")
    prepare_home(home, trusted_dirs=[project])
    db = tmp_path / "kb.db"
    seen: dict = {}
    # The generic team-member agent comes with the plugin once agents/team-member.md exists.
    has_member = (ROOT / "agents" / "team-member.md").is_file()
    subagent_type = "evoteam:team-member" if has_member else "general-purpose"
    state: dict = {}
    scripted_api.add(_role_rule(db, seen), _supervisor_rule(subagent_type, state))
    dump, hook_log = _skill_session(f"/evolve-team task_kits/{KIT} --budget-usd 5", home, project, db, tmp_path,
                                    scripted_api, idle_continues=1)
    sup = scripted_api.matched("supervisor")
    assert len(sup) >= 5, dump + hook_log
    # the skill expanded: the supervisor guide (the shared supervisor prompt) is in the first message
    assert "You are the supervisor of an evolving agent team" in sup[0].first_user_text, sup[0].first_user_text[:3000]
    assert state.get("plan_subagent_type") == "evoteam:team-member", state
    for req in sup[1:5]:
        assert req.tool_results()[-1]["is_error"] is False, dump
    role = scripted_api.matched("role")
    assert len(role) == 3 and all(not r.tool_results()[-1]["is_error"] for r in role[1:]), dump
    assert "ROLE-REPORT" in sup[3].tool_results()[-1]["text"], dump

    # the PostToolUse hook recorded the active run; the Stop hook kept the supervisor going once
    active = json.loads((project / ".evoteam" / "active_run.json").read_text())
    assert active["run_id"] == state["run_id"] and active["version"] == 1, active
    assert len(sup) == 6 and "Continue the supervisor loop" in sup[5].all_text, dump + hook_log

    got = asyncio.run(_read_store(db, state["run_id"]))
    assert got["run"].kit == KIT and got["run"].current_version == 1
    assert [r.name for r in got["version"].roles] == ["Vectorisation Scout"]
    (session,) = got["sessions"]
    assert seen["while_working"] == [("running",)], seen  # launched and working: not "planned"
    assert session.status == "finished" and session.runner == "subagent", session
    assert session.turns == 3, session  # the role's real assistant turns, from its transcript
    assert "ROLE-REPORT" in (session.last_message or ""), session
    assert session.cost_usd and session.cost_usd > 0, session
    transcript_costs = [c for c in got["costs"] if c.source == "transcript"]
    assert transcript_costs and transcript_costs[0].provenance.role == "Vectorisation Scout", got["costs"]
    (cand,) = got["candidates"]
    assert cand.status == "PASSED" and cand.score and cand.score > 0, cand
    assert (cand.provenance.role, cand.provenance.team_version) == ("Vectorisation Scout", 1), \
        f"{cand.provenance}\n{hook_log}"
    role_learning = next(x for x in got["learnings"] if "ROLE-LEARNING" in x.text)
    assert (role_learning.provenance.role, role_learning.provenance.team_version) == ("Vectorisation Scout", 1)
    assert _git_status(project) == "", _git_status(project)  # .evoteam/ and the agent files are excluded
    assert any("ROLE-LEARNING" in x.text for x in got["learnings"]), got["learnings"]
    assert any("SUPERVISOR-REFLECTION" in h.diagnosis and h.team_version == 1 for h in got["history"]), got["history"]
    # After the first hook, the others ran in the warm hook process: one pid served several hooks.
    pids = Counter(line.split("(pid ")[1].split(")")[0] for line in hook_log.splitlines() if ": ok in " in line)
    assert pids and max(pids.values()) >= 3, hook_log


# ------------------------------------------------------------------ evoteam's own sessions on a plugin machine


def _git_status(project: Path) -> str:
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=project,
                          capture_output=True, text=True, check=True).stdout


def test_headless_run_on_a_machine_with_the_plugin(installed, scripted_api, tmp_path):
    """`evoteam supervise` where the plugin (and so its hooks) is installed: the wake and the role
    cost exactly their scripted requests (no hook keeps them going), the role's first request
    already offers the evoteam tools, what the role records carries its role and version, and
    evoteam's own files stay out of the user's git status."""
    from evoteam.config import Settings
    from evoteam.servers.knowledge.local import LocalKnowledgeStore
    from evoteam.servers.knowledge.store import Actor
    from evoteam.servers.team.runners import default_runner_factory
    from evoteam.supervisor.cli import supervise_async
    from evoteam.supervisor.waker import ClaudeWaker
    from tests.team.conftest import git_project
    from tests.team.test_e2e_claude import KIT as HKIT
    from tests.team.test_e2e_claude import cycle_rules

    project = git_project(tmp_path / "repo")
    scripted_api.add(*cycle_rules())
    env = claude_env(installed["home"], scripted_api.base_url, {
        "TMPDIR": str(tmp_path), "EVOTEAM_HOOK_LOG": str(tmp_path / "hooks.log")})
    settings = Settings(db=tmp_path / "evoteam.db")

    async def main():
        await supervise_async(
            settings, f"task_kits/{HKIT}", budget_usd=5.0, interval_s=3600, runner="claude", max_parallel=None,
            run_id=None, new=True, project_dir=project, supervisor_cap=None, role_cap=None, max_versions=1,
            model=None, live=False, waker=ClaudeWaker(extra_env=env),
            runner_factory=default_runner_factory(extra_env=env), poll_s=0.2)
        async with LocalKnowledgeStore.open(settings.db, Actor(user="tester")) as kb:
            run = (await kb.list_runs()).items[0]
            return run, (await kb.list_candidates(run.id)).items, (await kb.list_learnings(run.id)).items

    run, candidates, learnings = asyncio.run(main())
    dump = scripted_api.dump()
    assert run.kit == HKIT, run  # the path-like argument named the shipped kit
    assert len(scripted_api.matched("wake-start")) == 2, dump
    prober = scripted_api.matched("prober")
    assert len(prober) == 3, dump
    assert "mcp__bench__evaluate" in prober[0].tool_names, prober[0].tool_names
    assert "mcp__team__design_team" in scripted_api.matched("wake-start")[0].tool_names
    assert [(c.provenance.role, c.provenance.team_version) for c in candidates] == [("Distance Prober", 1)]
    technique = [x for x in learnings if x.kind == "technique"]
    assert [(x.provenance.role, x.provenance.team_version) for x in technique] == [("Distance Prober", 1)]
    assert _git_status(project) == "", _git_status(project)
    # the same records on the command line
    env_kb = {**os.environ, "EVOTEAM_DB": str(settings.db)}

    def kb(*args: str):
        out = subprocess.run([sys.executable, "-m", "evoteam.cli", "kb", *args, run.id, "--json"], env=env_kb,
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    listed = kb("candidates")
    assert [(c["provenance"]["role"], c["provenance"]["team_version"]) for c in listed["items"]] == [
        ("Distance Prober", 1)]
    history = kb("history")
    assert history["total"] == 1 and history["items"][0]["provenance"]["role"] == "supervisor", history


def test_kernel_loop_stays_solo_and_the_supervisor_spend_counts(installed, scripted_api, tmp_path):
    """/kernel-loop in the user's repository with a budget its own session alone exceeds: the
    Stop hook prices the session, marks the run budget_spent and stops; it never asks for a team."""
    from tests.team.conftest import git_project

    home = installed["home"]
    project = git_project(tmp_path / "proj")
    prepare_home(home, trusted_dirs=[project])
    db = tmp_path / "kb.db"

    def start(req):
        return tool_use(P + "knowledge__start_run", {
            "goal": "Make RMSNorm fast on the CPU", "kit": KIT, "direction": "maximize", "x0": 1.0,
            "budget_usd": 0.001})

    describe = tool_use(P + "bench__describe_kit", {"kit": f"task_kits/{KIT}"})  # the README's form
    scripted_api.add(Rule(first_user="kernel-loop", name="solo", replies=[start, describe, "SOLO: one round done"],
                          after="still here"))
    dump, hook_log = _skill_session(f"/kernel-loop task_kits/{KIT} --budget-usd 0.001", home, project, db,
                                    tmp_path, scripted_api, idle_continues=2)
    solo = scripted_api.matched("solo")
    assert not any("design team" in r.all_text for r in solo), dump
    assert len(solo) == 3, dump + hook_log
    assert solo[2].tool_results()[-1]["is_error"] is False, solo[2].tool_results()  # the path named the kit

    async def read():
        from evoteam.servers.knowledge.local import LocalKnowledgeStore
        from evoteam.servers.knowledge.store import Actor

        async with LocalKnowledgeStore.open(db, Actor.local()) as store:
            run = (await store.list_runs()).items[0]
            return run, await store.spend(run.id)

    run, spend = asyncio.run(read())
    assert run.status == "budget_spent", (run, hook_log)
    assert [line.role for line in spend.lines] == ["supervisor"] and spend.spent_usd > 0.001, spend
    assert _git_status(project) == "", _git_status(project)
