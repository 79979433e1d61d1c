"""End to end with the real Claude Code CLI (bundled in claude-agent-sdk) against the scripted
Messages API: the supervisor and the roles are real headless Claude Code sessions that call
the real evoteam MCP servers over stdio.

- one full cycle: v1 designed, its role evaluates a candidate on a CPU kit (bench) and adds a
  learning, the team finishes, the supervisor reflects and designs v2; then the budget stop;
- kill-and-resume: `evoteam supervise` killed while a role runs, started again, continues;
- the materialised agent files show up as agents of a Claude Code session.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from evoteam.config import Settings, load_settings
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.store import Actor
from evoteam.servers.team.runners import default_runner_factory
from evoteam.servers.team.store import TeamStore
from evoteam.supervisor.cli import supervise_async
from evoteam.supervisor.waker import ClaudeWaker
from tests.support.claude_cli import claude_env, run_print_session
from tests.support.scripted_api import Reply, Rule, tool_use
from tests.team.conftest import git_project

pytestmark = [pytest.mark.claude_cli, pytest.mark.slow]

KIT = "pairwise_distance_cpu"
HAS_BENCH = importlib.util.find_spec("evoteam.servers.bench.server") is not None
SUPERVISOR = "You are the supervisor of an evolving agent team"
RUN_RE = re.compile(r"run=(run_[A-Za-z0-9_-]+)|Run `(run_[A-Za-z0-9_-]+)`")
CAND_RE = re.compile(r"cand_[0-9a-f]{16}")


def run_of(req) -> str:
    m = RUN_RE.search(req.first_user_text)
    assert m, req.first_user_text[:500]
    return m[1] or m[2]


def better_code() -> str:
    settings = load_settings()
    for base in settings.kits_dirs:
        path = Path(base) / KIT / "examples" / "better.py"
        if path.is_file():
            return path.read_text()
    pytest.skip(f"kit {KIT} is not available")


def role(name: str, mandate: str, **extra) -> dict:
    return {"name": name, "mandate": mandate, "mcp_servers": ["knowledge", "bench"], **extra}


def design_call(name: str, roles: list[dict], diagnosis: str):
    return lambda req: tool_use("mcp__team__design_team", {
        "run_id": run_of(req), "diagnosis": diagnosis, "rationale": f"{name}: one focused role", "roles": roles})


def evaluate_call(req):
    if HAS_BENCH:
        return tool_use("mcp__bench__evaluate", {"kit": KIT, "code": better_code(), "run_id": run_of(req)})
    return tool_use("mcp__knowledge__record_candidate", {"run_id": run_of(req), "code": better_code(),
                                                          "status": "PASSED", "score": 1.5})


def learning_call(req):
    cands = CAND_RE.findall(req.last_user_text) or CAND_RE.findall(req.all_text)
    return tool_use("mcp__knowledge__add_learning", {
        "run_id": run_of(req), "text": "row-blocked matrix product form beats broadcasting", "kind": "technique",
        "evidence": cands[-1:], "confidence": 0.8})


def cycle_rules(stall: threading.Event | None = None) -> list[Rule]:
    def maybe_stall(req):
        if stall is not None and not stall.is_set():
            stall.wait(120)  # the driver is killed while this request is pending
        return evaluate_call(req)

    return [
        Rule(system="You are the **Distance Prober**", name="prober",
             replies=[maybe_stall, learning_call, "report: evaluated the better variant and recorded why"]),
        Rule(system="You are the **Budget Burner**", name="burner",
             replies=[Reply([tool_use("mcp__knowledge__learnings", {"run_id": "x"})],
                            usage={"input_tokens": 2_000_000, "output_tokens": 10}), "burnt"]),
        Rule(system=SUPERVISOR, first_user="wake 1: start]", name="wake-start",
             replies=[design_call("v1", [role("Distance Prober", "Evaluate a faster distance kernel and say why "
                                                                 "it is faster.")], "first look at the task"),
                      "designed v1"]),
        Rule(system=SUPERVISOR, first_user=": team_finished]", name="wake-finished",
             replies=[lambda req: tool_use("mcp__team__reflect", {
                          "run_id": run_of(req), "observed_behaviour": "the prober evaluated one variant",
                          "diagnosis": "exhausted search on one idea", "design_change": "a new role",
                          "outcome": "first candidate recorded"}),
                      design_call("v2", [role("Budget Burner", "Spend money on nothing.", isolation="shared")],
                                  "exhausted search"),
                      "designed v2"]),
    ]


def _group_alive(pgid: int) -> bool:
    """Does any process of this process group still run (zombies do not count)?"""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            text = stat.read_text()
            fields = text[text.rfind(")") + 2:].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                return True
    return False


async def _store(db: Path):
    return LocalKnowledgeStore.open(db, Actor(user="tester"))


def test_full_cycle_then_budget_stop(scripted_api, claude_home, tmp_path):
    project = git_project(tmp_path / "repo")
    scripted_api.add(*cycle_rules())
    env = claude_env(claude_home, scripted_api.base_url, {"TMPDIR": str(tmp_path)})
    settings = Settings(db=tmp_path / "evoteam.db")

    async def main():
        await supervise_async(
            settings, KIT, budget_usd=2.0, interval_s=3600, runner="claude", max_parallel=None, run_id=None,
            new=True, project_dir=project, supervisor_cap=None, role_cap=None, max_versions=None, model=None,
            live=False, waker=ClaudeWaker(extra_env=env), runner_factory=default_runner_factory(extra_env=env),
            poll_s=0.2)
        async with LocalKnowledgeStore.open(settings.db, Actor(user="tester")) as kb:
            run = (await kb.list_runs()).items[0]
            team = TeamStore(kb)
            versions = await team.list_versions(run.id)
            sessions = await team.list_sessions(run.id)
            return (run, versions, sessions, (await kb.list_learnings(run.id)).items,
                    (await kb.list_history(run.id)).items, await kb.list_candidates(run.id), await kb.spend(run.id),
                    await team.list_wakes(run.id))

    run, versions, sessions, learnings, history, candidates, spend, wakes = asyncio.run(main())
    dump = scripted_api.dump()
    assert [v.roles for v in versions] == [["Distance Prober"], ["Budget Burner"]], dump
    by_role = {s.role: s for s in sessions}
    prober = by_role["Distance Prober"]
    assert prober.status == "finished" and prober.runner == "claude", (prober, dump)
    assert prober.branch == f"evoteam/{run.id}/v1-distance-prober" and Path(prober.worktree).is_dir()
    assert prober.cost_usd > 0
    # the role evaluated a candidate on the kit and cited it in a learning, with its provenance
    assert candidates.total == 1, dump
    cand = candidates.items[0]
    assert (cand.provenance.role, cand.provenance.team_version) == ("Distance Prober", 1)
    if HAS_BENCH:
        assert cand.status == "PASSED" and cand.score is not None
    lrn = next(x for x in learnings if x.kind == "technique")
    assert lrn.evidence == [cand.id] and lrn.provenance.role == "Distance Prober"
    # the supervisor reflected on v1 before designing v2, and the run stopped at its budget
    assert history[0].team_version == 1 and history[0].diagnosis == "exhausted search on one idea"
    assert history[0].provenance.role == "supervisor"
    assert "budget is spent" in history[-1].outcome
    assert by_role["Budget Burner"].status == "over_budget", by_role["Budget Burner"]
    assert run.status == "budget_spent"
    assert spend.spent_usd >= 2.0
    roles_paid = {line.role for line in spend.lines}
    assert {"supervisor", "Distance Prober", "Budget Burner"} <= roles_paid
    assert [w.trigger for w in wakes] == ["start", "team_finished"]
    assert all(w.status == "done" and w.cost_usd > 0 for w in wakes)


def test_kill_and_resume(scripted_api, claude_home, tmp_path):
    project = git_project(tmp_path / "repo")
    stall = threading.Event()
    scripted_api.add(*cycle_rules(stall))
    db = tmp_path / "evoteam.db"
    env = claude_env(claude_home, scripted_api.base_url, {
        "TMPDIR": str(tmp_path), "EVOTEAM_DB": str(db), "PYTHONPATH": os.pathsep.join(sys.path)})
    cmd = [sys.executable, "-m", "evoteam.cli", "supervise", KIT, "--budget-usd", "50", "--max-versions", "2",
           "--no-live", "--project-dir", str(project)]

    def start():
        return subprocess.Popen(cmd, cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True)

    first = start()
    procs = project / ".evoteam" / "procs"
    try:
        # wait until the prober's first model request is pending (it stalls there), then kill the
        # driver's pid alone (not its group): the role's process group must go with it
        give_up = time.monotonic() + 180
        while not scripted_api.matched("prober") or not list(procs.glob("*.json")):
            assert first.poll() is None, first.stdout.read()
            assert time.monotonic() < give_up, f"no role process was recorded in {procs}"
            threading.Event().wait(0.1)
        (record,) = [json.loads(p.read_text()) for p in procs.glob("*.json")]
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
        deadline = time.monotonic() + 30
        while _group_alive(record["pgid"]) and time.monotonic() < deadline:
            threading.Event().wait(0.1)
        assert not _group_alive(record["pgid"]), "the role's processes outlived the killed driver"
    finally:
        stall.set()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(first.pid, signal.SIGKILL)

    async def state():
        async with LocalKnowledgeStore.open(db, Actor(user="tester")) as kb:
            run = (await kb.list_runs()).items[0]
            return run, await TeamStore(kb).list_sessions(run.id), await TeamStore(kb).list_wakes(run.id)

    run, sessions, _ = asyncio.run(state())
    assert [(s.role, s.status) for s in sessions] == [("Distance Prober", "running")]

    second = start()
    out, _ = second.communicate(timeout=240)
    assert second.returncode == 0, out
    assert f"continuing run {run.id}" in out, out
    assert "reached 2 team versions" in out, out
    run, sessions, wakes = asyncio.run(state())
    prober = [s for s in sessions if s.role == "Distance Prober"]
    assert len(prober) == 1 and prober[0].status == "finished", (prober, out)  # restarted in place
    assert run.current_version == 2
    assert [w.trigger for w in wakes] == ["start", "team_finished"], out
    # the prober's conversation was started twice: once cut off, once to the end
    assert sum(1 for r in scripted_api.matched("prober") if r.turn == 0) == 2, scripted_api.dump()

    async def records():
        async with LocalKnowledgeStore.open(db, Actor(user="tester")) as kb:
            return (await kb.list_candidates(run.id)).items, (await kb.list_learnings(run.id)).items

    candidates, learnings = asyncio.run(records())
    # exactly one candidate and one learning by the role: the cut-off process did not finish its work
    assert [c.provenance.role for c in candidates] == ["Distance Prober"], candidates
    assert [x.provenance.role for x in learnings if x.kind == "technique"] == ["Distance Prober"], learnings


def test_materialised_agents_are_seen_by_claude_code(scripted_api, claude_home, tmp_path):
    """Agent files written by design_team before a session starts are loaded by Claude Code."""
    project = git_project(tmp_path / "repo")

    async def design():
        from evoteam.servers.knowledge.models import RunCreate
        from evoteam.servers.team.core import TeamService
        from evoteam.servers.team.models import TeamDesign

        async with LocalKnowledgeStore.open(tmp_path / "k.db", Actor(user="tester")) as kb:
            run = await kb.start_run(RunCreate(goal="g"))
            await TeamService(TeamStore(kb), project_dir=project).design_team(TeamDesign(
                run_id=run.id, diagnosis="d", rationale="r",
                roles=[{"name": "Workload Analyst", "mandate": "Find the slow workloads.\nThen say why."},
                       {"name": "Primitive Study Agent", "mandate": "Study \"quoted\" primitives: a, b.",
                        "model": "haiku"}]))

    asyncio.run(design())
    scripted_api.add(Rule(first_user="list agents", name="main", replies=["ok"]))
    s = run_print_session("list agents", api=scripted_api, home=claude_home, cwd=project, timeout=60,
                          env_extra={"TMPDIR": str(tmp_path)})
    assert s.returncode == 0, s.describe()
    agents = s.init.get("agents", [])
    assert "workload-analyst" in agents and "primitive-study-agent" in agents, s.describe()


def test_in_session_supervisor_spawns_through_the_team_member_agent(scripted_api, claude_home, tmp_path):
    """A `-p` session as supervisor: design_team writes the role's agent file mid-session (which
    the session cannot see), so it spawns the role through the shipped team-member subagent with
    the plan's prompt; the role records a learning; the supervisor records the role's end and
    reflects."""
    project = git_project(tmp_path / "repo")
    agents = project / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "team-member.md").write_text((Path(__file__).resolve().parents[2] / "agents" / "team-member.md")
                                           .read_text())
    db = tmp_path / "evoteam.db"

    async def start():
        from evoteam.servers.knowledge.models import RunCreate

        async with LocalKnowledgeStore.open(db, Actor(user="tester")) as kb:
            return (await kb.start_run(RunCreate(goal="Find the fastest distance kernel.", budget_usd=5))).id

    run_id = asyncio.run(start())

    def plan_call(req):
        text = req.tool_results()[-1]["text"]
        data = json.loads(text)
        data = data.get("result", data)
        if isinstance(data, str):
            data = json.loads(data)
        call = data["plan"]["steps"][0]["calls"][0]
        return tool_use("Agent", {**call, "run_in_background": False})

    scripted_api.add(
        Rule(first_user="[evoteam role=field-scout version=1", name="role", replies=[
            tool_use("mcp__knowledge__add_learning", {"run_id": run_id, "text": "blocked GEMM wins",
                                                      "role": "Field Scout", "team_version": 1}),
            "SCOUT REPORT: one learning recorded"]),
        Rule(first_user="act as the supervisor", name="supervisor", replies=[
            tool_use("mcp__team__design_team", {
                "run_id": run_id, "diagnosis": "nothing known yet", "rationale": "scout first",
                "roles": [{"name": "Field Scout", "mandate": "Survey the options.", "isolation": "shared"}]}),
            plan_call,
            tool_use("mcp__team__record_role_result", {"run_id": run_id, "role": "Field Scout",
                                                       "summary": "SCOUT REPORT: one learning recorded"}),
            tool_use("mcp__team__reflect", {"run_id": run_id, "observed_behaviour": "the scout recorded one learning",
                                            "diagnosis": "knowledge gap closing", "outcome": "v1 done"}),
            "supervisor done"]),
    )
    servers = {name: {"command": sys.executable, "args": ["-m", "evoteam.cli", "serve", name],
                      "env": {"EVOTEAM_DB": str(db), "EVOTEAM_PROJECT_DIR": str(project)}}
               for name in ("knowledge", "team")}
    s = run_print_session(f"act as the supervisor of run {run_id}", api=scripted_api, home=claude_home, cwd=project,
                          mcp_config=servers, strict_mcp_config=True, permission_mode="bypassPermissions",
                          timeout=120, env_extra={"TMPDIR": str(tmp_path)})
    assert s.returncode == 0, s.describe()
    assert (project / ".claude/agents/field-scout.md").is_file()
    agent_calls = [u for u in s.tool_uses(main_only=True) if u["name"] == "Agent"]
    assert agent_calls and agent_calls[0]["input"]["subagent_type"] == "team-member", s.describe()
    role_requests = scripted_api.matched("role")
    assert len(role_requests) == 2 and not role_requests[1].tool_results()[0]["is_error"], scripted_api.dump()
    assert "You are one member of an evolving agent team" in role_requests[0].system_text

    async def check():
        async with LocalKnowledgeStore.open(db, Actor(user="tester")) as kb:
            team = TeamStore(kb)
            return ((await kb.list_learnings(run_id)).items, await team.list_sessions(run_id),
                    (await kb.list_history(run_id)).items, await kb.spend(run_id))

    learnings, sessions, history, spend = asyncio.run(check())
    assert [(x.text, x.provenance.role) for x in learnings] == [("blocked GEMM wins", "Field Scout")]
    assert [(x.role, x.status, x.runner) for x in sessions] == [("Field Scout", "finished", "subagent")]
    assert sessions[0].last_message.startswith("SCOUT REPORT")
    assert history[0].diagnosis == "knowledge gap closing" and history[0].team_version == 1
    assert spend.spent_usd == 0

    # what the SubagentStop hook does with the real subagent transcript Claude Code wrote
    transcripts = list(claude_home.glob(".claude/projects/*/*/subagents/agent-*.jsonl"))
    assert len(transcripts) == 1, list(claude_home.rglob("*.jsonl"))
    payload = {"agent_type": "team-member", "agent_transcript_path": str(transcripts[0]),
               "last_assistant_message": "SCOUT REPORT: one learning recorded"}

    async def hook():
        from evoteam.servers.team.hooks import on_subagent_stop

        async with LocalKnowledgeStore.open(db, Actor(user="tester")) as kb:
            first = await on_subagent_stop(kb, payload)
            again = await on_subagent_stop(kb, payload)  # a repeated hook call counts once
            return first, again, await kb.spend(run_id)

    first, again, spend = asyncio.run(hook())
    assert (first.role, first.version, first.team_finished) == ("Field Scout", 1, True)
    assert "reflect" in first.message
    assert first.cost_usd > 0 and again.cost_usd == first.cost_usd
    assert [(x.role, x.team_version) for x in spend.lines] == [("Field Scout", 1)]
    assert spend.spent_usd == pytest.approx(first.cost_usd)
