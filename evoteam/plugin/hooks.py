"""The hooks' logic as plain functions: `hook_input dict -> output dict | None`.

Each function is called by `evoteam.plugin.run` (the fast entry the hook scripts use) and by
`evoteam hook <event>`; both read the hook input (JSON) from stdin and print the output (JSON)
on stdout. A hook never blocks the user's session because of its own failure: the runner
catches everything, logs it to `~/.evoteam/logs/hooks.log` and exits 0.

Heavy imports (the store, the team service) happen inside the functions, only when there is an
active run to work on: with no active run, every hook returns after reading one small file.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from evoteam.plugin import state as st
from evoteam.plugin.codex import tool_response as codex_tool_response
from evoteam.plugin.roles import assistant_turns, role_in_text, role_of_call, session_mode, wait_for_last_message

# Most consecutive continuations the Stop hook forces without the store changing in between.
DEFAULT_MAX_IDLE_CONTINUES = 3
LEARNINGS_CHARS = 1800
CONTEXT_CHARS = 4000
PRIOR_CONTEXT_CHARS = 1500  # of CONTEXT_CHARS: other runs of the active run's kit


def _settings(project: Path):
    from evoteam.config import load_settings

    return load_settings(cwd=project)


def _actor(settings, client: str, role: str | None = None, version: int | None = None):
    from evoteam.servers.knowledge.store import Actor

    return Actor.local(client=client, default_project=settings.project, role=role, team_version=version)


def _run(coro):
    import asyncio  # only a hook with an active run gets here: the others return without it

    return asyncio.run(coro)


def _clip(text: str, limit: int) -> str:
    text = (text or "").strip()
    return text if len(text) <= limit else text[: limit - 2].rstrip() + " …"


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.6g}"


# ---------------------------------------------------------------- the run summary


async def _summary(store, run_id: str, learnings_chars: int = LEARNINGS_CHARS) -> tuple[Any, Any, str]:
    from evoteam.servers.knowledge.pairedbest import describe_best, with_paired_best

    run = await with_paired_best(store, await store.get_run(run_id))
    spend = await store.spend(run_id)
    budget = ("no budget set" if spend.budget_usd is None
              else f"${spend.spent_usd:.2f} of ${spend.budget_usd:.2f} spent, ${max(spend.left_usd or 0, 0):.2f} left")
    ndg = f", NDG {run.ndg:.1f}" if run.ndg is not None else ""
    lines = [
        f"evoteam run `{run.id}` ({run.status}): {_clip(run.goal.splitlines()[0], 200)}",
        f"- kit: {run.kit or 'none'}; score is {run.direction}d; x0 {_fmt(run.x0)}, best-known "
        f"{_fmt(run.best_known)}{ndg}; best so far {describe_best(run)}",
        f"- team version: {run.current_version or 'none yet'}; {run.candidates} candidates, "
        f"{run.learnings} learnings; budget: {budget}",
    ]
    doc = await store.render_learnings(run_id, max_chars=learnings_chars) if learnings_chars else None
    if doc is not None and doc.total:
        more = f" (showing {doc.shown} of {doc.total})" if doc.truncated or doc.shown < doc.total else ""
        lines += ["", f"Top learnings{more}:", doc.markdown.strip()]
    return run, spend, "\n".join(lines)


def _active(project: Path) -> dict[str, Any] | None:
    return st.read_state(project)


def not_in_own_sessions(fn):
    """Hooks never act in a session evoteam started itself (a headless role or supervisor
    wake): the driver or team server runs those, and a hook's "keep going" or context would
    change what they cost and report."""

    def hook(hook_input: dict[str, Any]) -> dict[str, Any] | None:
        if st.started_by_evoteam(hook_input):
            return None
        return fn(hook_input)

    hook.__name__, hook.__doc__ = fn.__name__, fn.__doc__
    return hook


# ---------------------------------------------------------------- SessionStart


@not_in_own_sessions
def session_start(hook_input: dict[str, Any]) -> dict[str, Any] | None:
    """A compact context of the project's active run: best score, version, budget, top learnings."""
    project = st.project_dir(hook_input)
    state = _active(project)
    if not state:
        from evoteam.plugin.prior_context import shared_prior_context

        context = shared_prior_context(project, _settings, _actor, _run)
        return {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": context}} \
            if context else None

    async def go():
        from evoteam.plugin.prior_context import other_runs_of_kit
        from evoteam.servers.knowledge.connect import open_store

        settings = _settings(project)
        async with open_store(settings, _actor(settings, "hook")) as store:
            run, spend, text = await _summary(store, state["run_id"])
            return run, text, await other_runs_of_kit(store, run, PRIOR_CONTEXT_CHARS)

    run, text, prior = _run(go())
    if run.status != "active":
        return None
    source = hook_input.get("source") or "startup"
    tail = ("You were supervising this run before the conversation was compacted; continue the "
            "supervisor loop (the /evolve-team skill) from the store's state." if source == "compact" else
            "To continue supervising it, use /evolve-team (it resumes the active run); the knowledge, team, "
            "bench and retrieval tools read and write this run.")
    context = _clip(text, CONTEXT_CHARS - len(prior)) + ("\n\n" + prior if prior else "") + "\n\n" + tail
    return {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": context}}


# ---------------------------------------------------------------- PostToolUse (records the active run)

_RUN_ID = re.compile(r'"id"\s*:\s*"(run_[A-Za-z0-9_-]+)"')
_RUN_ID_ANY = re.compile(r"\b(run_[A-Za-z0-9_-]+)")


def _result_payload(response: Any) -> Any:
    """The structured result of an MCP tool call, as Claude Code passes it to PostToolUse
    (a content list, a {"result": ...} text, or already a dict)."""
    if isinstance(response, list):
        texts = [b.get("text", "") for b in response if isinstance(b, dict) and b.get("type") == "text"]
        response = "\n".join(texts)
    if isinstance(response, str):
        try:
            response = json.loads(response)
        except ValueError:
            return response
    if isinstance(response, dict) and set(response) == {"result"}:
        inner = response["result"]
        if isinstance(inner, str):
            try:
                return json.loads(inner)
            except ValueError:
                return inner
        return inner
    return response


@not_in_own_sessions
def post_tool_use(hook_input: dict[str, Any]) -> dict[str, Any] | None:
    """After `knowledge.start_run` or `team.design_team` in the main session: record the run
    (and version) as the project's active run, so the other hooks know it."""
    tool = hook_input.get("tool_name") or ""
    if hook_input.get("agent_id"):  # a subagent's call: roles never change the active run
        return None
    project = st.project_dir(hook_input)
    payload = _result_payload(codex_tool_response(hook_input.get("tool_response")))
    session = hook_input.get("session_id")
    if tool.endswith("knowledge__start_run"):
        run_id = payload.get("id") if isinstance(payload, dict) else None
        if not run_id:
            m = _RUN_ID.search(json.dumps(hook_input.get("tool_response"), default=str))
            run_id = m.group(1) if m else None
        if run_id:
            state = st.activate(project, run_id, session_id=session)
            mode = session_mode(hook_input.get("transcript_path"))
            if mode and state.get("mode") != mode:
                st.update_state(project, mode=mode)
    elif tool.endswith("team__design_team"):
        run_id = (hook_input.get("tool_input") or {}).get("run_id")
        version = None
        if isinstance(payload, dict):
            team = payload.get("team") if isinstance(payload.get("team"), dict) else payload
            version = team.get("version") if isinstance(team, dict) else None
            run_id = run_id or (team.get("run_id") if isinstance(team, dict) else None)
        if run_id:
            state = st.activate(project, run_id, version=version if isinstance(version, int) else None,
                                session_id=session)
            state.pop("finished_version", None)
            state["mode"] = "team"  # a session that designs a team supervises one
            st.write_state(project, state)
    return None


# ---------------------------------------------------------------- PreToolUse (provenance, roles launched)

PROVENANCE_TOOLS = re.compile(r"^mcp__.*(knowledge__(add_learning|record_candidate|put_artifact)|bench__evaluate)$")


@not_in_own_sessions
def pre_tool_use(hook_input: dict[str, Any]) -> dict[str, Any] | None:
    """Two jobs, both from the session's own context:

    - an Agent (Task) call whose prompt opens with a role marker: the role is marked `running`
      at once (a background subagent's Agent call returns before the role has done anything);
    - an evoteam tool that records a candidate, learning or artifact, called by a subagent
      that plays a role: its `role` and `team_version` are set from the subagent's spawn prompt
      (its transcript), whatever the model passed or forgot."""
    tool = hook_input.get("tool_name") or ""
    tool_input = hook_input.get("tool_input") if isinstance(hook_input.get("tool_input"), dict) else {}
    if tool in ("Agent", "Task"):
        role = role_in_text(str(tool_input.get("prompt") or ""))
        if role is not None and not hook_input.get("agent_id"):
            _mark_running(st.project_dir(hook_input), role)
        return None
    if not PROVENANCE_TOOLS.search(tool) or not hook_input.get("agent_id"):
        return None
    role = role_of_call(hook_input)
    if role is None or not role.get("name"):
        if os.environ.get("EVOTEAM_HOOK_DEBUG"):
            from evoteam.plugin.hooklog import log

            log(f"pre-tool-use: {tool} by subagent {hook_input.get('agent_id')}: no role found in its transcript")
        return None
    if tool_input.get("role") == role["name"] and tool_input.get("team_version") == role["version"]:
        return None
    updated = {**tool_input, "role": role["name"], "team_version": role["version"]}
    return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow",
                                   "permissionDecisionReason": f"evoteam: provenance of {role['name']} "
                                                               f"(team v{role['version']}) set from its spawn prompt",
                                   "updatedInput": updated}}


def _mark_running(project: Path, role: dict[str, Any]) -> None:
    async def go():
        from evoteam.servers.knowledge.connect import component_store, open_store
        from evoteam.servers.team.core import TeamService

        settings = _settings(project)
        async with open_store(settings, _actor(settings, "hook")) as store:
            service = TeamService(component_store("team", store), kb=store, project_dir=project,
                                  write_agent_files=False)
            await service.mark_running(role["run_id"], role["slug"], role["version"])

    _run(go())


# ---------------------------------------------------------------- SubagentStop


def _mentions_marker(path: str, max_lines: int = 50) -> bool:
    """A cheap check before importing the team code: does the transcript's start hold a role marker?"""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for number, line in enumerate(fh):
                if number >= max_lines:
                    return False
                if "[evoteam role=" in line:
                    return True
    except OSError:
        return False
    return False


@not_in_own_sessions
def subagent_stop(hook_input: dict[str, Any]) -> dict[str, Any] | None:
    """Record an evoteam role's end: its status, final report and cost (priced from the
    subagent's transcript). The role is recognised by the marker line of its spawn prompt. When
    every role of the version has ended, note it in the state file (the Stop hook then tells
    the supervisor to reflect) and tell the user."""
    transcript = hook_input.get("agent_transcript_path")
    if not transcript or not Path(transcript).is_file() or not _mentions_marker(transcript):
        return None
    from evoteam.servers.team.materialise import role_from_transcript

    marker = role_from_transcript(transcript)
    if marker is None:
        return None  # not an evoteam role
    project = st.project_dir(hook_input)
    summary = hook_input.get("last_assistant_message") or ""
    if isinstance(summary, (list, dict)):
        summary = json.dumps(summary)
    elif summary:
        wait_for_last_message(transcript, str(summary))

    async def go():
        from evoteam.servers.knowledge.connect import component_store, open_store
        from evoteam.servers.team.core import TeamService
        from evoteam.servers.team.cost import load_price_table

        settings = _settings(project)
        async with open_store(settings, _actor(settings, "hook")) as store:
            service = TeamService(component_store("team", store), kb=store, project_dir=project,
                                  prices=load_price_table(settings, cwd=project), write_agent_files=False)
            session = await service.record_role_result(marker.run_id, marker.slug, marker.version, status="finished",
                                                       summary=_clip(str(summary), 4000), transcript_path=transcript,
                                                       turns=assistant_turns(transcript))
            status = await service.team_status(marker.run_id, marker.version)
            return session, status

    session, status = _run(go())
    message = f"evoteam: recorded {session.role} (team v{marker.version}) as {session.status}, cost ${session.cost_usd:.4f}"
    if status.finished:
        state = st.read_state(project, env={})
        if state and state.get("run_id") == marker.run_id:
            st.update_state(project, finished_version=marker.version)
        message += f"; every role of team v{marker.version} has ended, the supervisor should reflect now"
    return {"systemMessage": message}


# ---------------------------------------------------------------- Stop


def _fingerprint(run, spend) -> list:
    # the supervisor's own spend grows with every continuation: it is not progress
    others = sum(line.usd for line in spend.lines if line.role != "supervisor")
    return [run.candidates, run.learnings, run.current_version, run.best_score, round(others, 6)]


def _keeps_going(run, spend) -> bool:
    """Whether the Stop hook may keep the session going: an active run with budget left."""
    return run.status == "active" and spend.budget_usd is not None and (spend.left_usd or 0) > 0


@not_in_own_sessions
def stop(hook_input: dict[str, Any]) -> dict[str, Any] | None:
    """Keep an active supervisor going while the run's budget remains.

    It blocks the stop (asking the model to continue the loop) only when: a run is active in this
    project and was started or designed in *this* session; the off switch is not set; no
    background role is still running (Claude Code wakes the session when they end); the run has a
    budget with money left; and the loop guard allows it: at most `EVOTEAM_MAX_IDLE_CONTINUES`
    (default 3) consecutive continuations during which nothing in the store changed."""
    project = st.project_dir(hook_input)
    state = _active(project)
    if not state:
        return None
    if st.autocontinue_off(project):
        return None
    if state.get("session_id") and hook_input.get("session_id") and state["session_id"] != hook_input["session_id"]:
        return None  # another session in this project; only the supervisor is kept going
    running = [t for t in hook_input.get("background_tasks") or []
               if isinstance(t, dict) and t.get("status") in ("running", "pending", "started")]
    if running:
        return None

    own = not state.get("session_id") or state["session_id"] == hook_input.get("session_id")

    async def go():
        from evoteam.servers.knowledge.connect import open_store
        from evoteam.servers.knowledge.listing import newest_history
        from evoteam.servers.team.cost import load_price_table, record_session_cost

        settings = _settings(project)
        async with open_store(settings, _actor(settings, "hook")) as store:
            if own and hook_input.get("transcript_path") and Path(hook_input["transcript_path"]).is_file():
                # the supervisor's own spend counts against the run's budget
                await record_session_cost(store, state["run_id"], hook_input["transcript_path"],
                                          role="supervisor", team_version=state.get("version"),
                                          prices=load_price_table(settings, cwd=project))
            run = await store.get_run(state["run_id"])
            spend = await store.spend(state["run_id"])
            if run.status == "active" and spend.left_usd is not None and spend.left_usd <= 0:
                run = await store.update_run(run.id, status="budget_spent")
            history = await newest_history(store, state["run_id"])
            if _keeps_going(run, spend):
                # Only for the reason below: a hook that lets the session stop reads no paired rounds.
                from evoteam.servers.knowledge.pairedbest import with_paired_best

                run = await with_paired_best(store, run)
            return run, spend, history

    run, spend, history = _run(go())
    if run.status == "budget_spent" and not state.get("budget_told"):
        st.update_state(project, budget_told=True)
        return {"systemMessage": f"evoteam: run {run.id} has spent its budget (${spend.spent_usd:.2f} of "
                                 f"${spend.budget_usd:.2f}, the supervisor included); it is now budget_spent."}
    if not _keeps_going(run, spend):
        return None
    fingerprint = _fingerprint(run, spend)
    try:
        limit = int(os.environ.get("EVOTEAM_MAX_IDLE_CONTINUES", DEFAULT_MAX_IDLE_CONTINUES))
    except ValueError:
        limit = DEFAULT_MAX_IDLE_CONTINUES
    idle = state.get("idle_continues", 0) + 1 if state.get("last_fingerprint") == fingerprint else 1
    if idle > limit:
        st.update_state(project, idle_continues=0, last_fingerprint=None,
                        guard_tripped_at=fingerprint)
        return {"systemMessage": f"evoteam: stopped keeping the supervisor going after {limit} continuations "
                                 f"without progress in the store (run {run.id})."}
    st.update_state(project, idle_continues=idle, last_fingerprint=fingerprint)
    reflected = {h.team_version for h in history}
    finished = state.get("finished_version")
    if finished is not None and finished not in reflected:
        todo = (f"Every role of team v{finished} has ended. Read the state (team_status, trajectory, learnings), "
                f"record your reflection on v{finished} (team.reflect), then design and start v{finished + 1}.")
    elif state.get("mode") == "solo":
        todo = ("Continue the kernel loop by yourself (no team): state the next hypothesis, write the candidate, "
                "score it with bench.evaluate and record what you learned.")
    elif run.current_version is None:
        todo = "No team has been designed yet: diagnose the task and design team v1 (team.design_team), then start it."
    else:
        todo = (f"Check team v{run.current_version} (team.team_status): start any role that has not run, or, if "
                f"every role has ended, reflect and design the next version.")
    from evoteam.servers.knowledge.pairedbest import describe_best  # loaded by go's paired read already

    reason = (f"evoteam: run {run.id} is active with ${spend.left_usd:.2f} of ${spend.budget_usd:.2f} left, "
              f"best so far {describe_best(run)}. "
              f"{'Keep optimising.' if state.get('mode') == 'solo' else 'Continue the supervisor loop.'} {todo} "
              f"(To end the run: knowledge.get_run shows it; mark it finished, or the user can run "
              f"`evoteam hook pause` / set EVOTEAM_AUTOCONTINUE=0.)")
    return {"decision": "block", "reason": reason}


# ---------------------------------------------------------------- PreCompact


def _last_assistant_texts(transcript: str | None, n: int = 4, limit: int = 3000) -> str:
    if not transcript:
        return ""
    texts: list[str] = []
    try:
        with open(transcript, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(entry, dict) or entry.get("type") != "assistant" or entry.get("isSidechain"):
                    continue
                content = (entry.get("message") or {}).get("content")
                if isinstance(content, list):
                    for block in content:
                        if isinstance(block, dict) and block.get("type") == "text" and block.get("text", "").strip():
                            texts.append(block["text"].strip())
    except OSError:
        return ""
    picked = texts[-n:]
    return _clip("\n---\n".join(picked), limit)


@not_in_own_sessions
def pre_compact(hook_input: dict[str, Any]) -> dict[str, Any] | None:
    """Before the conversation is compacted, write a checkpoint learning (kind "checkpoint")
    with the run's state and the supervisor's latest reasoning, so it survives compaction."""
    project = st.project_dir(hook_input)
    state = _active(project)
    if not state:
        return None
    trigger = hook_input.get("trigger") or "auto"
    recent = _last_assistant_texts(hook_input.get("transcript_path"))
    instructions = (hook_input.get("custom_instructions") or "").strip()

    async def go():
        from evoteam.servers.knowledge.connect import open_store
        from evoteam.servers.knowledge.errors import Invalid
        from evoteam.servers.knowledge.models import LearningCreate

        settings = _settings(project)
        async with open_store(settings, _actor(settings, "hook", role="supervisor",
                                               version=state.get("version"))) as store:
            run, spend, text = await _summary(store, state["run_id"], learnings_chars=0)
            body = [f"Checkpoint before the supervisor's context was compacted ({trigger}).", text]
            if recent:
                body += ["", "The supervisor's latest notes:", recent]
            if instructions:
                body += ["", f"Compaction instructions: {_clip(instructions, 500)}"]
            key = (f"precompact:{hook_input.get('session_id')}:v{run.current_version}:{run.candidates}:"
                   f"{spend.spent_usd:.6f}")
            try:
                return await store.add_learning(LearningCreate(
                    run_id=run.id, text=_clip("\n".join(body), 7900), kind="checkpoint",
                    tags=["checkpoint", trigger], confidence=1.0, idempotency_key=key[:200]))
            except Invalid as exc:
                # This state's checkpoint exists; the summary now counts it, so the text differs.
                if "already used" not in str(exc):
                    raise
                return None

    learning = _run(go())
    if learning is None:
        return {"systemMessage": f"evoteam: run {state['run_id']} already has a checkpoint of this state"}
    return {"systemMessage": f"evoteam: checkpoint {learning.id} written to run {state['run_id']} before compaction"}


HOOKS = {
    "session-start": session_start,
    "post-tool-use": post_tool_use,
    "pre-tool-use": pre_tool_use,
    "subagent-stop": subagent_stop,
    "stop": stop,
    "pre-compact": pre_compact,
}
