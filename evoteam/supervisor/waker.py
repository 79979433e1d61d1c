"""One wake of the headless supervisor: a fresh Claude Agent SDK session with the supervisor
prompt and the evoteam servers, started by the driver. Its team server runs in queue mode, so
the roles it designs are started by the driver, not inside the short-lived session."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from evoteam.servers.team.launch import guarded_cli, session_env
from evoteam.servers.team.toolnaming import ToolNaming
from evoteam.servers.team.runners import EVOTEAM_SERVERS, Progress, _aclose, mcp_server_config


class WakeRequest(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    run_id: str
    seq: int
    trigger: str
    system_prompt: str
    message: str
    cwd: Path
    cap_usd: float | None = None
    env: dict[str, str] = Field(default_factory=dict)


class WakeOutcome(BaseModel):
    status: str  # done | failed | over_budget
    cost_usd: float = 0.0
    session_id: str | None = None
    last_message: str = ""
    error: str | None = None
    turns: int = 0


class Waker(Protocol):
    async def wake(self, request: WakeRequest) -> WakeOutcome: ...


class ClaudeWaker:
    """Runs the supervisor as a headless Claude Code session."""

    def __init__(self, *, model: str | None = None, cli_path: str | Path | None = None,
                 transport_factory: Callable[[WakeRequest], Any] | None = None,
                 permission_mode: str | None = None, servers: tuple[str, ...] = EVOTEAM_SERVERS,
                 naming: ToolNaming | None = None, max_turns: int | None = None,
                 stderr: Callable[[str], None] | None = None, extra_env: dict[str, str] | None = None):
        self.model = model
        self.cli_path = cli_path
        self.transport_factory = transport_factory
        self.permission_mode = permission_mode or os.environ.get("EVOTEAM_PERMISSION_MODE", "acceptEdits")
        self.servers = servers
        self.naming = naming or ToolNaming()
        self.max_turns = max_turns
        self.stderr = stderr
        self.extra_env = extra_env or {}

    def options(self, request: WakeRequest):
        from claude_agent_sdk import ClaudeAgentOptions

        server_env = {**{k: v for k, v in request.env.items() if k.startswith("EVOTEAM_")},
                      "EVOTEAM_SPAWN_MODE": "queue", "EVOTEAM_PROJECT_DIR": str(request.cwd)}
        return ClaudeAgentOptions(
            cwd=str(request.cwd), env={**session_env("wake"), **self.extra_env, **request.env},
            max_budget_usd=request.cap_usd,
            mcp_servers={name: mcp_server_config(name, server_env) for name in self.servers},
            strict_mcp_config=True,
            system_prompt={"type": "preset", "preset": "claude_code", "append": request.system_prompt},
            allowed_tools=["Read", "Bash"] + [f"mcp__{name}" for name in self.servers],
            permission_mode=self.permission_mode, model=self.model, cli_path=guarded_cli(self.cli_path),
            max_turns=self.max_turns, stderr=self.stderr)

    async def wake(self, request: WakeRequest) -> WakeOutcome:
        from claude_agent_sdk import AssistantMessage, ResultMessage, TextBlock, query

        from evoteam.servers.team.runners import outcome_from_result

        progress = Progress()
        result = None
        transport = self.transport_factory(request) if self.transport_factory else None
        try:
            stream = query(prompt=request.message, options=self.options(request), transport=transport)
            try:
                async for message in stream:
                    if isinstance(message, AssistantMessage):
                        texts = [b.text for b in message.content if isinstance(b, TextBlock) and b.text.strip()]
                        if texts:
                            progress.last_message = texts[-1]
                        if message.parent_tool_use_id is None:
                            progress.turns += 1
                    elif isinstance(message, ResultMessage):
                        result = message  # the last result wins (its cost is the session's total)
            finally:
                await _aclose(stream)
        except Exception as exc:  # noqa: BLE001 - reported to the driver, which decides
            if result is None:
                return WakeOutcome(status="failed", error=f"{type(exc).__name__}: {exc}"[:2000],
                                   last_message=progress.last_message, turns=progress.turns)
        if result is None:
            return WakeOutcome(status="failed", error="the supervisor session ended without a result",
                               last_message=progress.last_message, turns=progress.turns)
        outcome = outcome_from_result(result, progress)
        status = {"finished": "done", "over_budget": "over_budget"}.get(outcome.status, "failed")
        return WakeOutcome(status=status, cost_usd=outcome.cost_usd, session_id=outcome.session_id,
                           last_message=outcome.last_message, error=outcome.error, turns=outcome.turns)
