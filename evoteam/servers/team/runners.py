"""Headless role runners: a Claude Agent SDK session (default) or `codex exec`, each in the
role's own working directory, with a USD cap, reporting progress as it goes.

A runner never raises for a failed role: it returns a `RoleOutcome` whose status says what
happened (finished, failed, over_budget, stopped, skipped), so that one role's failure never
blocks another's.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from evoteam import python_module_args
from evoteam.servers.team.cost import PriceTable, price_usage
from evoteam.servers.team.launch import ORIGIN_VAR, guarded_cli, session_env
from evoteam.servers.team.models import SessionStatus

EVOTEAM_SERVERS = ("knowledge", "team", "retrieval", "bench")


class RoleJob(BaseModel):
    """Everything a runner needs to run one role once."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    run_id: str
    version: int
    role: str
    slug: str
    brief: str                      # the role's system prompt
    kickoff: str                    # the first user message
    cwd: Path
    cap_usd: float | None = None
    model: str | None = None
    tools: list[str] = Field(default_factory=list)
    mcp_servers: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    description: str = ""
    proc_file: Path | None = None   # where the process guard records the session's process group


class Progress(BaseModel):
    turns: int = 0
    cost_usd: float | None = None
    last_message: str = ""
    session_id: str | None = None


class RoleOutcome(BaseModel):
    status: SessionStatus
    cost_usd: float = 0.0
    cost_known: bool = True
    turns: int = 0
    last_message: str = ""
    error: str | None = None
    session_id: str | None = None
    detail: dict[str, Any] = Field(default_factory=dict)


# `report` returns False when the role has been stopped from elsewhere: the runner then ends.
Report = Callable[[Progress], Awaitable[bool]]


class RoleRunner(Protocol):
    kind: str

    async def run(self, job: RoleJob, report: Report) -> RoleOutcome: ...


def mcp_server_config(server: str, env: dict[str, str]) -> dict[str, Any]:
    """The stdio config of one evoteam server, started with this Python."""
    return {"type": "stdio", "command": sys.executable, "args": python_module_args("evoteam.cli", "serve", server),
            "env": env}


class ClaudeRunner:
    """A role as a headless Claude Code session through the Claude Agent SDK. The role's
    definition goes in through the SDK's `agents` option and becomes the session's main agent
    (`--agent`), so nothing depends on agent files on disk."""

    kind = "claude"

    def __init__(self, *, cli_path: str | Path | None = None, transport_factory: Callable[[RoleJob], Any] | None = None,
                 permission_mode: str | None = None, extra_env: dict[str, str] | None = None,
                 mcp_env: dict[str, str] | None = None, max_turns: int | None = None,
                 setting_sources: list[str] | None = None, stderr: Callable[[str], None] | None = None):
        self.cli_path = cli_path
        self.transport_factory = transport_factory
        self.permission_mode = permission_mode or os.environ.get("EVOTEAM_PERMISSION_MODE", "acceptEdits")
        self.extra_env = extra_env or {}
        self.mcp_env = mcp_env or {}
        self.max_turns = max_turns
        self.setting_sources = setting_sources
        self.stderr = stderr

    def options(self, job: RoleJob):
        from claude_agent_sdk import AgentDefinition, ClaudeAgentOptions

        env = {**session_env("role"), **self.extra_env, **job.env}
        if job.proc_file is not None:
            env["EVOTEAM_PROC_FILE"] = str(job.proc_file)
        server_env = {**self.mcp_env, **{k: v for k, v in env.items() if k.startswith("EVOTEAM_")
                                         and k not in ("EVOTEAM_PROC_FILE", ORIGIN_VAR)}}
        servers = {name: mcp_server_config(name, server_env) for name in job.mcp_servers}
        agent = AgentDefinition(description=job.description or job.role, prompt=job.brief,
                                tools=job.tools or None,
                                model=job.model if job.model and job.model != "inherit" else None)
        allowed = list(job.tools) + [f"mcp__{name}" for name in job.mcp_servers]
        return ClaudeAgentOptions(
            cwd=str(job.cwd), env=env, max_budget_usd=job.cap_usd, mcp_servers=servers,
            strict_mcp_config=True, agents={job.slug: agent}, extra_args={"agent": job.slug},
            allowed_tools=allowed, permission_mode=self.permission_mode, max_turns=self.max_turns,
            cli_path=guarded_cli(self.cli_path), setting_sources=self.setting_sources,
            model=job.model if job.model and job.model != "inherit" else None,
            stderr=self.stderr,
        )

    async def run(self, job: RoleJob, report: Report) -> RoleOutcome:
        from claude_agent_sdk import AssistantMessage, ResultMessage, SystemMessage, TextBlock, query

        progress = Progress()
        result: Any = None
        transport = self.transport_factory(job) if self.transport_factory else None
        try:
            stream = query(prompt=job.kickoff, options=self.options(job), transport=transport)
            try:
                async for message in stream:
                    if isinstance(message, SystemMessage) and message.subtype == "init":
                        # recorded at once: a cut-off role's spend is priced from its transcript
                        progress.session_id = message.data.get("session_id") or progress.session_id
                        await report(progress)
                    elif isinstance(message, AssistantMessage):
                        if message.parent_tool_use_id is None:
                            progress.turns += 1
                        texts = [b.text for b in message.content if isinstance(b, TextBlock) and b.text.strip()]
                        if texts:
                            progress.last_message = texts[-1]
                        progress.session_id = message.session_id or progress.session_id
                        if not await report(progress):
                            return RoleOutcome(status="stopped", turns=progress.turns, cost_known=False,
                                               last_message=progress.last_message, session_id=progress.session_id,
                                               error="stopped on request")
                    elif isinstance(message, ResultMessage):
                        # keep reading: a session whose background work finishes later sends another
                        # result (cumulative cost); the stream ends when the CLI exits
                        result = message
                        progress.cost_usd = message.total_cost_usd
                        progress.session_id = message.session_id or progress.session_id
            finally:
                await _aclose(stream)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - any failure of one role is reported, never raised
            if result is None:
                return RoleOutcome(status="failed", turns=progress.turns, cost_known=False,
                                   last_message=progress.last_message, session_id=progress.session_id,
                                   error=f"{type(exc).__name__}: {exc}"[:2000])
        if result is None:
            return RoleOutcome(status="failed", turns=progress.turns, cost_known=False,
                               last_message=progress.last_message, session_id=progress.session_id,
                               error="the session ended without a result")
        return outcome_from_result(result, progress)


def outcome_from_result(result: Any, progress: Progress) -> RoleOutcome:
    """Map an SDK ResultMessage to a role outcome."""
    cost = float(result.total_cost_usd or 0.0)
    text = result.result if isinstance(result.result, str) and result.result else progress.last_message
    base = dict(cost_usd=cost, cost_known=result.total_cost_usd is not None, turns=result.num_turns or progress.turns,
                last_message=text or "", session_id=result.session_id,
                detail={"subtype": result.subtype, "usage": result.usage or {}, "duration_ms": result.duration_ms})
    if result.subtype == "error_max_budget_usd":
        return RoleOutcome(status="over_budget", error="the role reached its USD cap", **base)
    if result.is_error or result.subtype != "success":
        errors = "; ".join(getattr(result, "errors", None) or []) or (result.result or result.subtype)
        return RoleOutcome(status="failed", error=f"{result.subtype}: {errors}"[:2000], **base)
    return RoleOutcome(status="finished", **base)


async def _aclose(stream: Any) -> None:
    close = getattr(stream, "aclose", None)
    if close is not None:
        try:
            await close()
        except Exception:  # noqa: BLE001
            pass


class CodexRunner:
    """A role as `codex exec --json` in its worktree. Codex has no USD cap of its own, so the
    runner prices the token usage it reports and ends the process when the cap is reached."""

    kind = "codex"

    def __init__(self, *, executable: str | None = None, prices: PriceTable | None = None,
                 model: str | None = None, extra_args: list[str] | None = None,
                 mcp_env: dict[str, str] | None = None):
        self.executable = executable or shutil.which("codex")
        self.prices = prices or PriceTable()
        self.model = model
        self.extra_args = extra_args or []
        self.mcp_env = mcp_env or {}

    def command(self, job: RoleJob) -> list[str]:
        # `--full-auto` is gone from codex exec (0.171); the sandbox lets the role write its worktree
        cmd = [self.executable or "codex", "exec", "--json", "--skip-git-repo-check", "--sandbox", "workspace-write",
               "-C", str(job.cwd)]
        if self.model:
            cmd += ["-m", self.model]
        from evoteam.plugin.codex import exec_overrides

        server_env = {**self.mcp_env, **{k: v for k, v in job.env.items() if k.startswith("EVOTEAM_")}}
        for name in job.mcp_servers:  # waited for, tools approved, the store passed on (see plugin/codex.py)
            cmd += exec_overrides(name, sys.executable, python_module_args("evoteam.cli", "serve", name), server_env)
        return cmd + self.extra_args + [f"{job.brief}\n\n---\n\n{job.kickoff}"]

    async def run(self, job: RoleJob, report: Report) -> RoleOutcome:
        if not self.executable:
            return RoleOutcome(status="skipped", cost_known=False,
                               error="codex is not installed here (npm i -g @openai/codex); use runner=claude")
        env = {**os.environ, **self.mcp_env, **job.env}
        proc = await asyncio.create_subprocess_exec(*self.command(job), cwd=str(job.cwd), env=env,
                                                    stdin=asyncio.subprocess.DEVNULL,
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                                                    start_new_session=True)
        progress = Progress(cost_usd=0.0)
        usage: list[tuple[str | None, dict[str, Any]]] = []
        status: SessionStatus = "finished"
        error = None
        try:
            assert proc.stdout is not None
            async for raw in proc.stdout:
                try:
                    event = json.loads(raw)
                except json.JSONDecodeError:
                    continue
                kind = event.get("type", "")
                if kind == "thread.started":
                    progress.session_id = event.get("thread_id")
                elif kind == "item.completed" and (event.get("item") or {}).get("type") == "agent_message":
                    progress.last_message = event["item"].get("text", "")
                elif kind == "turn.completed":
                    u = event.get("usage") or {}
                    usage.append((self.model or "codex", {
                        "input_tokens": max(0, int(u.get("input_tokens", 0)) - int(u.get("cached_input_tokens", 0))),
                        "cache_read_input_tokens": int(u.get("cached_input_tokens", 0)),
                        "output_tokens": int(u.get("output_tokens", 0))}))
                    progress.turns += 1
                    progress.cost_usd = price_usage(usage, self.prices).usd
                elif kind in ("turn.failed", "error"):
                    status, error = "failed", json.dumps(event)[:2000]
                if not await report(progress):
                    status, error = "stopped", "stopped on request"
                    break
                if job.cap_usd is not None and (progress.cost_usd or 0) >= job.cap_usd:
                    status, error = "over_budget", f"the role reached its USD cap (${job.cap_usd:.2f})"
                    break
        finally:
            if proc.returncode is None and status in ("stopped", "over_budget"):
                _kill(proc)
            rc = await proc.wait()
        if status == "finished" and rc != 0:
            stderr = (await proc.stderr.read()).decode(errors="replace")[-1500:] if proc.stderr else ""
            status, error = "failed", f"codex exited with {rc}: {stderr}"
        return RoleOutcome(status=status, cost_usd=progress.cost_usd or 0.0, turns=progress.turns,
                           last_message=progress.last_message, error=error, session_id=progress.session_id,
                           detail={"usage": [u for _, u in usage]})


def _kill(proc: asyncio.subprocess.Process) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass


RunnerFactory = Callable[[str], RoleRunner]


def default_runner_factory(**claude_kwargs: Any) -> RunnerFactory:
    def make(kind: str) -> RoleRunner:
        if kind == "codex":
            return CodexRunner()
        return ClaudeRunner(**claude_kwargs)

    return make
