"""How the evoteam servers' MCP tools are named in the client, and which of them a role gets:
one source for the agent files, the briefs and the design check that reads tool names in texts."""

from __future__ import annotations

import os

from pydantic import BaseModel

DIRECT_PREFIX, PLUGIN_PREFIX = "mcp__", "mcp__plugin_evoteam_"

# Tools of each evoteam server that a role may need. Kept here (not discovered) so that the
# agent files are deterministic; a server's newer tools can be added by a role's `tools`.
SERVER_TOOLS: dict[str, list[str]] = {
    "knowledge": ["get_run", "list_runs", "add_learning", "learnings", "history", "put_artifact", "get_artifact",
                  "list_artifacts", "record_candidate", "get_candidate", "best_candidates", "trajectory", "search"],
    "bench": ["list_kits", "describe_kit", "evaluate", "evaluation_result", "compare", "remeasure"],
    "retrieval": ["gate", "search", "lookup", "score_documents", "record_outcome", "retrieval_stats"],
    "team": ["team_status", "budget"],
}


class ToolNaming(BaseModel):
    """How MCP tools are named in the client: `mcp__<server>__<tool>` when the servers are
    registered directly, `mcp__plugin_evoteam_<server>__<tool>` when installed as a plugin."""

    prefix: str = DIRECT_PREFIX

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> ToolNaming:
        env = dict(os.environ if env is None else env)
        if env.get("EVOTEAM_TOOL_PREFIX"):
            return cls(prefix=env["EVOTEAM_TOOL_PREFIX"])
        if env.get("EVOTEAM_PLUGIN") in ("1", "true", "yes"):
            return cls(prefix=PLUGIN_PREFIX)
        return cls()

    @classmethod
    def prefixes(cls, env: dict[str, str] | None = None) -> set[str]:
        """Every prefix a text may name our tools with: registered directly, as a plugin, and the
        one this environment chooses (a user's EVOTEAM_TOOL_PREFIX)."""
        return {DIRECT_PREFIX, PLUGIN_PREFIX, cls.from_env(env).prefix}

    def tool(self, server: str, tool: str) -> str:
        return f"{self.prefix}{server}__{tool}"

    def server_tools(self, server: str) -> list[str]:
        return [self.tool(server, t) for t in SERVER_TOOLS.get(server, [])]
