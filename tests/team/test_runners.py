"""Headless runners: the Claude Agent SDK runner through the SDK's injectable transport (a
fake CLI speaking the stream-json control protocol), and the codex runner's visible skip."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from claude_agent_sdk import Transport

from evoteam.servers.team.runners import ClaudeRunner, CodexRunner, Progress, RoleJob


class FakeCLI(Transport):
    """Answers `initialize`, then, once the prompt arrives, plays back `messages`. `crash`
    ends the stream with an exception instead of a result."""

    def __init__(self, messages: list[dict], crash: bool = False):
        self.messages = messages
        self.crash = crash
        self.queue: asyncio.Queue = asyncio.Queue()
        self.written: list[dict] = []
        self.initialize: dict | None = None

    async def connect(self) -> None:
        pass

    async def write(self, data: str) -> None:
        for line in data.splitlines():
            msg = json.loads(line)
            self.written.append(msg)
            if msg.get("type") == "control_request":
                if msg["request"].get("subtype") == "initialize":
                    self.initialize = msg["request"]
                await self.queue.put({"type": "control_response", "response": {
                    "subtype": "success", "request_id": msg["request_id"], "response": {}}})
            elif msg.get("type") == "user":
                for m in self.messages:
                    await self.queue.put(m)
                await self.queue.put(RuntimeError("CLI died") if self.crash else None)

    async def read_messages(self):
        while True:
            item = await self.queue.get()
            if item is None:
                return
            if isinstance(item, Exception):
                raise item
            yield item

    async def close(self) -> None:
        pass

    def is_ready(self) -> bool:
        return True

    async def end_input(self) -> None:
        pass


def assistant(text: str, sid: str = "sess-1") -> dict:
    return {"type": "assistant", "session_id": sid, "message": {
        "id": "m", "type": "message", "role": "assistant", "model": "claude-x",
        "content": [{"type": "text", "text": text}], "usage": {"input_tokens": 1, "output_tokens": 1}}}


def result(subtype: str = "success", cost: float = 0.42, is_error: bool = False, **extra) -> dict:
    return {"type": "result", "subtype": subtype, "duration_ms": 5, "duration_api_ms": 4, "is_error": is_error,
            "num_turns": 3, "session_id": "sess-1", "total_cost_usd": cost, "usage": {"input_tokens": 10},
            "result": "final report", **extra}


def job(tmp_path: Path, **kw) -> RoleJob:
    return RoleJob(run_id="run_1", version=2, role="Probe", slug="probe", brief="BRIEF", kickoff="go",
                   cwd=tmp_path, cap_usd=1.5, tools=["Read", "mcp__knowledge__add_learning"],
                   mcp_servers=["knowledge"], env={"EVOTEAM_ROLE": "Probe", "EVOTEAM_DB": "/x.db"}, **kw)


async def drive(transport: FakeCLI, tmp_path: Path, report=None):
    seen: list[Progress] = []

    async def default_report(p: Progress) -> bool:
        seen.append(p.model_copy())
        return True

    runner = ClaudeRunner(transport_factory=lambda j: transport)
    return await runner.run(job(tmp_path), report or default_report), seen


async def test_finished_role_reports_progress_cost_and_agent(tmp_path):
    cli = FakeCLI([assistant("looking"), assistant("found it"), result()])
    outcome, seen = await drive(cli, tmp_path)
    assert outcome.status == "finished" and outcome.cost_usd == 0.42 and outcome.turns == 3
    assert outcome.last_message == "final report" and outcome.session_id == "sess-1"
    assert [p.last_message for p in seen] == ["looking", "found it"]
    # the role's definition went in through the SDK's agents option
    assert cli.initialize["agents"]["probe"]["prompt"] == "BRIEF"
    assert "mcp__knowledge__add_learning" in cli.initialize["agents"]["probe"]["tools"]


async def test_cap_error_and_crash_are_reported(tmp_path):
    over, _ = await drive(FakeCLI([assistant("spending"), result("error_max_budget_usd", 1.6, True)]), tmp_path)
    assert over.status == "over_budget" and over.cost_usd == 1.6 and "cap" in over.error
    failed, _ = await drive(FakeCLI([result("error_during_execution", 0.1, True, errors=["tool crashed"])]),
                            tmp_path)
    assert failed.status == "failed" and "tool crashed" in failed.error
    crashed, _ = await drive(FakeCLI([assistant("working")], crash=True), tmp_path)
    assert crashed.status == "failed" and "CLI died" in crashed.error and not crashed.cost_known
    empty, _ = await drive(FakeCLI([assistant("working")]), tmp_path)
    assert empty.status == "failed" and "without a result" in empty.error


async def test_a_stop_seen_in_report_ends_the_role(tmp_path):
    async def stop(_p: Progress) -> bool:
        return False

    outcome, _ = await drive(FakeCLI([assistant("a"), assistant("b"), result()]), tmp_path, stop)
    assert outcome.status == "stopped"


def test_options_carry_cap_env_servers_and_agent(tmp_path):
    options = ClaudeRunner(extra_env={"ANTHROPIC_BASE_URL": "http://x"}).options(job(tmp_path, model="haiku"))
    assert options.max_budget_usd == 1.5 and options.cwd == str(tmp_path)
    assert options.env["EVOTEAM_ROLE"] == "Probe" and options.env["ANTHROPIC_BASE_URL"] == "http://x"
    server = options.mcp_servers["knowledge"]
    assert server["args"][-2:] == ["serve", "knowledge"] and server["env"]["EVOTEAM_DB"] == "/x.db"
    assert options.extra_args == {"agent": "probe"} and options.agents["probe"].model == "haiku"
    assert "mcp__knowledge" in options.allowed_tools and options.strict_mcp_config


async def test_codex_is_skipped_visibly_when_missing(tmp_path):
    runner = CodexRunner(executable=None)
    runner.executable = None
    outcome = await runner.run(job(tmp_path), lambda p: asyncio.sleep(0, True))
    assert outcome.status == "skipped" and "codex is not installed" in outcome.error


async def test_codex_runner_parses_events_and_enforces_cap(tmp_path):
    fake = tmp_path / "codex"
    events = [{"type": "thread.started", "thread_id": "th-1"},
              {"type": "item.completed", "item": {"type": "agent_message", "text": "hello"}},
              {"type": "turn.completed", "usage": {"input_tokens": 1_000_000, "cached_input_tokens": 0,
                                                   "output_tokens": 100_000}},
              {"type": "turn.completed", "usage": {"input_tokens": 1_000_000, "output_tokens": 0}}]
    fake.write_text("#!/bin/sh\n" + "".join(f"echo '{json.dumps(e)}'\n" for e in events) + "sleep 30\n")
    fake.chmod(0o755)

    async def report(_p):
        return True

    outcome = await CodexRunner(executable=str(fake)).run(job(tmp_path), report)
    # 1M in at 1.25 + 100k out at 10 = 2.25 > cap 1.5: stopped over budget after the first turn
    assert outcome.status == "over_budget" and outcome.cost_usd == pytest.approx(2.25)
    assert outcome.last_message == "hello" and outcome.session_id == "th-1"
