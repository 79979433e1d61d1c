"""Hooks in real use (issue 12): they leave evoteam's own sessions alone, keep /kernel-loop solo,
count the supervisor's spend, and take a role's provenance from the subagent's context."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest

from evoteam.plugin import hooks, state
from evoteam.servers.team.core import TeamService
from evoteam.servers.team.models import RoleSpec, TeamDesign
from evoteam.servers.team.store import TeamStore
from tests.plugin.test_hooks import _design, _store, _transcript, base_input, env, seed  # noqa: F401


def _main_transcript(path, first_prompt: str, tokens: int = 1000):
    usage = {"input_tokens": tokens, "output_tokens": 10}
    lines = [{"type": "user", "message": {"role": "user", "content": first_prompt}},
             {"type": "assistant", "message": {"id": "m1", "model": "claude-sonnet-4-5", "usage": usage,
                                               "content": [{"type": "text", "text": "ok"}]}}]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return str(path)


def test_hooks_leave_sessions_evoteam_started_alone(env, monkeypatch, tmp_path):
    p = env["project"]
    run_id = seed(env["db"])
    monkeypatch.setenv("EVOTEAM_RUN", run_id)  # what a headless role's environment carries
    normal = base_input(p, "Stop", background_tasks=[],
                        transcript_path=_main_transcript(tmp_path / "main.jsonl", "optimise this"))
    assert hooks.stop(normal)["decision"] == "block"
    # a role: known by the environment its runner sets ...
    monkeypatch.setenv("EVOTEAM_SESSION_ORIGIN", "role")
    assert hooks.stop(normal) is None and hooks.session_start(normal) is None
    monkeypatch.delenv("EVOTEAM_SESSION_ORIGIN")
    # ... or by the marker its first prompt opens with
    role = base_input(p, "Stop", background_tasks=[], transcript_path=_main_transcript(
        tmp_path / "role.jsonl", f"[evoteam role=prober version=1 run={run_id}]\nBegin your work"))
    wake = base_input(p, "Stop", background_tasks=[], transcript_path=_main_transcript(
        tmp_path / "wake.jsonl", "[evoteam supervisor wake 2: interval]\nThe periodic check"))
    assert hooks.stop(role) is None and hooks.stop(wake) is None


def test_kernel_loop_is_never_told_to_design_a_team(env, tmp_path):
    p = env["project"]
    run_id = seed(env["db"])
    transcript = _main_transcript(tmp_path / "solo.jsonl",
                                  "<command-name>/evoteam:kernel-loop</command-name> task_kits/rmsnorm_cpu", 10)
    hooks.post_tool_use(base_input(p, "PostToolUse", tool_name="mcp__knowledge__start_run",
                                   transcript_path=transcript, tool_response={"id": run_id}))
    assert state.read_state(p)["mode"] == "solo"
    reason = hooks.stop(base_input(p, "Stop", background_tasks=[], transcript_path=transcript))["reason"]
    assert "kernel loop" in reason and "design" not in reason


def test_the_supervisors_own_spend_ends_the_run(env, tmp_path):
    p = env["project"]
    run_id = seed(env["db"], budget=0.002)
    state.activate(p, run_id, session_id="sess-1")
    transcript = _main_transcript(tmp_path / "main.jsonl", "/evolve-team rmsnorm_cpu", tokens=1000)  # $0.003
    out = hooks.stop(base_input(p, "Stop", background_tasks=[], transcript_path=transcript))
    assert "decision" not in out and "budget_spent" in out["systemMessage"]
    hooks.stop(base_input(p, "Stop", background_tasks=[], transcript_path=transcript))  # counted once

    async def read():
        async with _store(env["db"]) as kb:
            return await kb.get_run(run_id), await kb.spend(run_id)

    run, spend = asyncio.run(read())
    assert run.status == "budget_spent"
    assert [(x.role, round(x.usd, 6)) for x in spend.lines] == [("supervisor", 0.00315)]


def _session_files(tmp_path, session: str, agent_id: str):
    """A main session's (empty) transcript and where Claude Code keeps its subagent's."""
    main = tmp_path / f"{session}.jsonl"
    main.write_text("")
    agent = tmp_path / session / "subagents" / f"agent-{agent_id}.jsonl"
    agent.parent.mkdir(parents=True)
    return main, agent


def test_provenance_and_running_status_come_from_the_subagent_context(env, tmp_path):
    p = env["project"]
    run_id = seed(env["db"])
    prompt = _design(env["db"], p, run_id)
    main, agent = _session_files(tmp_path, "sess-1", "a7")
    _transcript(agent, prompt)
    # the Agent call that launches the role (background: it returns at once) marks it running
    hooks.pre_tool_use(base_input(p, "PreToolUse", tool_name="Agent", transcript_path=str(main),
                                  tool_input={"prompt": prompt, "run_in_background": True}))
    call = base_input(p, "PreToolUse", tool_name="mcp__plugin_evoteam_bench__evaluate", agent_id="a7",
                      transcript_path=str(main), tool_input={"kit": "rmsnorm_cpu", "code": "x"})
    out = hooks.pre_tool_use(call)["hookSpecificOutput"]
    assert out["updatedInput"] == {"kit": "rmsnorm_cpu", "code": "x", "role": "Profiling Scientist",
                                   "team_version": 1}
    # the main session's own calls are left as they are
    assert hooks.pre_tool_use({**call, "agent_id": None}) is None

    async def read():
        async with _store(env["db"]) as kb:
            return await TeamStore(kb).list_sessions(run_id, 1)

    assert [(s.role, s.status) for s in asyncio.run(read())] == [("Profiling Scientist", "running")]


def test_provenance_waits_for_a_transcript_still_in_claude_codes_write_queue(env, tmp_path):
    """Claude Code flushes transcripts every ~100 ms; a fast hook can start before the subagent's
    spawn prompt is on disk. It waits for it rather than record the call without its role."""
    p = env["project"]
    run_id = seed(env["db"])
    prompt = _design(env["db"], p, run_id)
    main, agent = _session_files(tmp_path, "sess-2", "b9")
    agent.write_text("")  # created, nothing flushed yet

    def flush_later():
        time.sleep(0.4)
        _transcript(agent, prompt)

    writer = threading.Thread(target=flush_later)
    writer.start()
    call = base_input(p, "PreToolUse", tool_name="mcp__plugin_evoteam_knowledge__add_learning", agent_id="b9",
                      transcript_path=str(main), tool_input={"run_id": run_id, "text": "t"})
    out = hooks.pre_tool_use(call)
    writer.join()
    assert out is not None and out["hookSpecificOutput"]["updatedInput"]["role"] == "Profiling Scientist", out
    # a subagent whose transcript never shows up is left alone after the wait, not blocked
    started = time.monotonic()
    assert hooks.pre_tool_use({**call, "agent_id": "never"}) is None
    assert time.monotonic() - started >= 2.5


def test_subagent_stop_waits_for_the_final_message_to_reach_the_transcript(env, tmp_path):
    """The final message and its usage count in the role's turns and cost even when the hook
    starts before Claude Code has flushed that message."""
    p = env["project"]
    run_id = seed(env["db"])
    prompt = _design(env["db"], p, run_id)
    agent = _transcript(tmp_path / "agent-c3.jsonl", prompt)
    final = {"type": "assistant", "isSidechain": True,
             "message": {"id": "msg_2", "model": "claude-sonnet-4-5", "role": "assistant",
                         "usage": {"input_tokens": 2000, "output_tokens": 100},
                         "content": [{"type": "text", "text": "FINAL REPORT: done"}]}}

    def flush_later():
        time.sleep(0.4)
        with agent.open("a") as fh:
            fh.write(json.dumps(final) + "\n")

    writer = threading.Thread(target=flush_later)
    writer.start()
    hooks.subagent_stop(base_input(p, "SubagentStop", agent_id="c3", agent_transcript_path=str(agent),
                                   last_assistant_message="FINAL REPORT: done", stop_hook_active=False))
    writer.join()

    async def read():
        async with _store(env["db"]) as kb:
            return await TeamStore(kb).list_sessions(run_id, 1), await kb.list_costs(run_id)

    (session,), costs = asyncio.run(read())
    assert session.turns == 2 and session.last_message == "FINAL REPORT: done", session
    assert len(costs) == 1 and costs[0].usd == pytest.approx((3000 * 3 + 300 * 15) / 1e6), costs


def test_a_new_version_keeps_a_working_subagents_report(env):
    p = env["project"]
    run_id = seed(env["db"])
    _design(env["db"], p, run_id)

    async def go():
        async with _store(env["db"]) as kb:
            svc = TeamService(TeamStore(kb), project_dir=p, write_agent_files=False)
            await svc.mark_running(run_id, "Profiling Scientist", 1)
            await svc.design_team(TeamDesign(run_id=run_id, diagnosis="d", rationale="r",
                                             roles=[RoleSpec(name="Other", mandate="m", isolation="shared")]))
            done = await svc.record_role_result(run_id, "Profiling Scientist", 1, summary="REPORT: found it")
            return done

    done = asyncio.run(go())
    assert (done.status, done.last_message) == ("finished", "REPORT: found it")
