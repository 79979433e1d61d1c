"""The hooks' logic (evoteam.plugin.hooks) and their runner, without the Claude Code CLI: real
SQLite store, real team service, hand-made hook inputs as Claude Code 2.1.332 sends them."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import pytest

from evoteam.plugin import hooks, run as runner, state
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.models import LearningCreate, RunCreate
from evoteam.servers.knowledge.store import Actor
from evoteam.servers.team.core import TeamService
from evoteam.servers.team.models import RoleSpec, TeamDesign
from evoteam.servers.team.plan import role_prompt
from evoteam.servers.team.store import TeamStore


@pytest.fixture
def env(tmp_path, monkeypatch):
    for var in ("CLAUDE_PROJECT_DIR", "EVOTEAM_PROJECT_DIR", "EVOTEAM_RUN", "EVOTEAM_AUTOCONTINUE", "EVOTEAM_HOOKS",
                "EVOTEAM_KNOWLEDGE_URL", "EVOTEAM_MAX_IDLE_CONTINUES"):
        monkeypatch.delenv(var, raising=False)
    db = tmp_path / "kb.db"
    monkeypatch.setenv("EVOTEAM_DB", str(db))
    monkeypatch.setenv("EVOTEAM_HOOK_LOG", str(tmp_path / "hooks.log"))
    monkeypatch.setenv("EVOTEAM_HOOK_WARM", "0")  # these run the hook in this process; test_warm_hooks.py runs them warm
    project = tmp_path / "project"
    project.mkdir()
    return {"db": db, "project": project, "log": tmp_path / "hooks.log"}


def _store(db: Path):
    return LocalKnowledgeStore.open(db, Actor.local())


def seed(db: Path, budget: float | None = 5.0, learning: str | None = "tiling by 64 rows beats 128") -> str:
    async def go():
        async with _store(db) as kb:
            run = await kb.start_run(RunCreate(goal="Make RMSNorm fast\nmore text", kit="rmsnorm_cpu", x0=1.0,
                                               budget_usd=budget))
            if learning:
                await kb.add_learning(LearningCreate(run_id=run.id, text=learning, kind="technique"))
            return run.id

    return asyncio.run(go())


def base_input(project: Path, event: str, **extra) -> dict:
    return {"session_id": "sess-1", "transcript_path": "/nonexistent", "cwd": str(project),
            "hook_event_name": event, **extra}


# ------------------------------------------------------------------ state


def test_state_activate_read_override_and_off_switch(env, monkeypatch):
    p = env["project"]
    assert state.read_state(p) is None
    state.activate(p, "run_a", version=2, session_id="s")
    assert state.read_state(p)["run_id"] == "run_a" and state.read_state(p)["version"] == 2
    state.activate(p, "run_a")  # same run: keeps the version
    assert state.read_state(p)["version"] == 2
    monkeypatch.setenv("EVOTEAM_RUN", "run_b")
    assert state.read_state(p)["run_id"] == "run_b"
    monkeypatch.delenv("EVOTEAM_RUN")
    assert state.autocontinue_off(p) is None
    state.set_autocontinue(p, False)
    assert "no-continue" in state.autocontinue_off(p)
    state.set_autocontinue(p, True)
    monkeypatch.setenv("EVOTEAM_AUTOCONTINUE", "0")
    assert state.autocontinue_off(p) == "EVOTEAM_AUTOCONTINUE is off"
    assert state.deactivate(p) and state.read_state(p) is None


def test_project_dir_prefers_claude_project_dir(tmp_path, monkeypatch):
    monkeypatch.delenv("EVOTEAM_PROJECT_DIR", raising=False)
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(tmp_path))
    assert state.project_dir({"cwd": "/elsewhere"}) == tmp_path


# ------------------------------------------------------------------ runner


def test_runner_never_fails_and_logs(env):
    out = io.StringIO()
    state.activate(env["project"], "run_missing")
    code = runner.main(["session-start"], stdin=io.StringIO(json.dumps(base_input(env["project"], "SessionStart"))),
                       stdout=out)
    assert code == 0 and out.getvalue() == ""
    assert "session-start: failed" in env["log"].read_text()
    assert runner.main(["no-such-event"], stdin=io.StringIO("{}"), stdout=out) == 0
    assert runner.main(["stop"], stdin=io.StringIO("not json"), stdout=out) == 0
    assert "unknown hook event" in env["log"].read_text()


def test_runner_switched_off(env, monkeypatch):
    monkeypatch.setenv("EVOTEAM_HOOKS", "off")
    run_id = seed(env["db"])
    state.activate(env["project"], run_id)
    out = io.StringIO()
    assert runner.main(["session-start"], stdin=io.StringIO(json.dumps(base_input(env["project"], "SessionStart"))),
                       stdout=out) == 0
    assert out.getvalue() == ""


# ------------------------------------------------------------------ SessionStart


def test_session_start_context(env):
    p = env["project"]
    assert hooks.session_start(base_input(p, "SessionStart", source="startup")) is None
    run_id = seed(env["db"])
    state.activate(p, run_id)
    out = hooks.session_start(base_input(p, "SessionStart", source="startup"))
    ctx = out["hookSpecificOutput"]["additionalContext"]
    assert out["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    assert f"evoteam run `{run_id}` (active)" in ctx and "rmsnorm_cpu" in ctx
    assert "tiling by 64 rows" in ctx and "$0.00 of $5.00 spent" in ctx and "/evolve-team" in ctx
    assert len(ctx) < 5000
    compact = hooks.session_start(base_input(p, "SessionStart", source="compact"))
    assert "compacted" in compact["hookSpecificOutput"]["additionalContext"]


def test_session_start_quiet_for_finished_run(env):
    run_id = seed(env["db"])

    async def finish():
        async with _store(env["db"]) as kb:
            await kb.update_run(run_id, status="finished")

    asyncio.run(finish())
    state.activate(env["project"], run_id)
    assert hooks.session_start(base_input(env["project"], "SessionStart")) is None


# ------------------------------------------------------------------ PostToolUse


@pytest.mark.parametrize("response", [
    [{"type": "text", "text": json.dumps({"result": {"id": "run_abc", "goal": "g"}})}],
    json.dumps({"result": json.dumps({"id": "run_abc"})}),
    {"id": "run_abc", "goal": "g"},
])
def test_post_tool_use_start_run_activates(env, response):
    p = env["project"]
    hooks.post_tool_use(base_input(p, "PostToolUse", tool_name="mcp__plugin_evoteam_knowledge__start_run",
                                   tool_input={"goal": "g"}, tool_response=response))
    assert state.read_state(p)["run_id"] == "run_abc" and state.read_state(p)["session_id"] == "sess-1"


def test_post_tool_use_design_team_records_version_and_ignores_subagents(env):
    p = env["project"]
    resp = [{"type": "text", "text": json.dumps({"result": {"version": 3, "run_id": "run_x", "roles": []}})}]
    hooks.post_tool_use(base_input(p, "PostToolUse", tool_name="mcp__team__design_team", agent_id="a1",
                                   tool_input={"run_id": "run_x"}, tool_response=resp))
    assert state.read_state(p) is None
    hooks.post_tool_use(base_input(p, "PostToolUse", tool_name="mcp__team__design_team",
                                   tool_input={"run_id": "run_x"}, tool_response=resp))
    assert state.read_state(p)["version"] == 3


# ------------------------------------------------------------------ Stop


def test_stop_keeps_going_with_budget_and_loop_guard(env, monkeypatch):
    p = env["project"]
    run_id = seed(env["db"])
    state.activate(p, run_id, session_id="sess-1")
    monkeypatch.setenv("EVOTEAM_MAX_IDLE_CONTINUES", "2")
    inp = base_input(p, "Stop", stop_hook_active=False, background_tasks=[])
    first = hooks.stop(inp)
    assert first["decision"] == "block" and "design team v1" in first["reason"] and "$5.00" in first["reason"]
    assert hooks.stop({**inp, "stop_hook_active": True})["decision"] == "block"
    tripped = hooks.stop({**inp, "stop_hook_active": True})
    assert "decision" not in tripped and "without progress" in tripped["systemMessage"]
    # progress in the store resets the guard
    assert hooks.stop(inp)["decision"] == "block"


def test_stop_lets_go(env):
    p = env["project"]
    inp = base_input(p, "Stop", background_tasks=[])
    assert hooks.stop(inp) is None  # no active run
    run_id = seed(env["db"])
    state.activate(p, run_id, session_id="sess-1")
    assert hooks.stop({**inp, "session_id": "another"}) is None
    assert hooks.stop({**inp, "background_tasks": [{"id": "t", "type": "subagent", "status": "running"}]}) is None
    state.set_autocontinue(p, False)
    assert hooks.stop(inp) is None
    state.set_autocontinue(p, True)
    no_budget = seed(env["db"], budget=None)
    state.activate(p, no_budget, session_id="sess-1")
    assert hooks.stop(inp) is None


# ------------------------------------------------------------------ SubagentStop + Stop after a finished version


def _design(db: Path, project: Path, run_id: str) -> str:
    async def go():
        async with _store(db) as kb:
            svc = TeamService(TeamStore(kb), project_dir=project, write_agent_files=False)
            result = await svc.design_team(TeamDesign(
                run_id=run_id, diagnosis="start", rationale="one role",
                roles=[RoleSpec(name="Profiling Scientist", mandate="profile", isolation="shared")]))
            team = await svc.get_team(run_id, result.version)
            run = await kb.get_run(run_id)
            return role_prompt(team, "profiling-scientist", run)

    return asyncio.run(go())


def _transcript(path: Path, prompt: str) -> Path:
    usage = {"input_tokens": 1000, "output_tokens": 200, "cache_creation_input_tokens": 0,
             "cache_read_input_tokens": 0}
    lines = [
        {"type": "user", "isSidechain": True, "message": {"role": "user", "content": prompt}},
        {"type": "assistant", "isSidechain": True,
         "message": {"id": "msg_1", "model": "claude-sonnet-4-5", "role": "assistant", "usage": usage,
                     "content": [{"type": "text", "text": "REPORT: profiled it"}]}},
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return path


def test_subagent_stop_records_role_and_prompts_reflection(env, tmp_path):
    p = env["project"]
    run_id = seed(env["db"])
    prompt = _design(env["db"], p, run_id)
    state.activate(p, run_id, version=1, session_id="sess-1")
    transcript = _transcript(tmp_path / "agent-1.jsonl", prompt)
    inp = base_input(p, "SubagentStop", agent_id="a1", agent_type="evoteam:team-member",
                     agent_transcript_path=str(transcript), last_assistant_message="REPORT: profiled it",
                     stop_hook_active=False)
    out = hooks.subagent_stop(inp)
    assert "Profiling Scientist" in out["systemMessage"] and "reflect" in out["systemMessage"]
    hooks.subagent_stop(inp)  # repeated call: no double counting

    async def read():
        async with _store(env["db"]) as kb:
            sessions = await TeamStore(kb).list_sessions(run_id, 1)
            return sessions, await kb.list_costs(run_id)

    sessions, costs = asyncio.run(read())
    (session,) = sessions
    assert session.status == "finished" and session.last_message == "REPORT: profiled it"
    assert len(costs) == 1 and costs[0].usd == pytest.approx((1000 * 3 + 200 * 15) / 1e6)
    assert costs[0].provenance.role == "Profiling Scientist" and costs[0].provenance.team_version == 1
    assert state.read_state(p)["finished_version"] == 1
    reason = hooks.stop(base_input(p, "Stop", background_tasks=[]))["reason"]
    assert "Every role of team v1 has ended" in reason and "v2" in reason


def test_subagent_stop_ignores_other_subagents(env, tmp_path):
    transcript = _transcript(tmp_path / "agent-2.jsonl", "just explore the repo")
    assert hooks.subagent_stop(base_input(env["project"], "SubagentStop", agent_transcript_path=str(transcript))) is None
    assert hooks.subagent_stop(base_input(env["project"], "SubagentStop")) is None


# ------------------------------------------------------------------ PreCompact


def test_pre_compact_writes_checkpoint(env, tmp_path):
    p = env["project"]
    run_id = seed(env["db"])
    state.activate(p, run_id, version=1)
    tx = tmp_path / "main.jsonl"
    tx.write_text(json.dumps({"type": "assistant", "message": {"content": [
        {"type": "text", "text": "Diagnosis: exhausted search on tile sizes; next: a synthesis role."}]}}) + "\n")
    inp = base_input(p, "PreCompact", trigger="auto", custom_instructions="", transcript_path=str(tx))
    out = hooks.pre_compact(inp)
    assert "checkpoint" in out["systemMessage"]
    hooks.pre_compact(inp)  # idempotent while nothing changed

    async def read():
        async with _store(env["db"]) as kb:
            return (await kb.list_learnings(run_id, kind="checkpoint")).items

    (learning,) = asyncio.run(read())
    assert "exhausted search on tile sizes" in learning.text and run_id in learning.text
    assert learning.provenance.role == "supervisor"
