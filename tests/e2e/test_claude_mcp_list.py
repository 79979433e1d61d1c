"""The real Claude Code CLI sees evoteam's servers: all four over stdio, knowledge over HTTP."""

from __future__ import annotations

import sys

import pytest

from tests.knowledge.conftest import KnowledgeServer, knowledge_server, make_token  # noqa: F401 (fixture)
from tests.support.claude_cli import claude_mcp_add, claude_mcp_list

SERVERS = ("knowledge", "team", "retrieval", "bench")


@pytest.mark.claude_cli
def test_claude_mcp_list_shows_every_server_connected_over_stdio(claude_home, claude_cwd, tmp_path):
    for name in SERVERS:
        claude_mcp_add(claude_home, name, sys.executable, "-m", "evoteam.cli", "serve", name,
                       env={"EVOTEAM_DB": str(tmp_path / "kb.db"), "EVOTEAM_PREDICTOR": "agent"})
    listing = claude_mcp_list(claude_home, cwd=claude_cwd, timeout=90)
    for name in SERVERS:
        assert listing.is_connected(name), listing.raw


@pytest.mark.claude_cli
def test_claude_mcp_list_connects_to_the_shared_server_with_a_bearer_token(
        claude_home, claude_cwd, knowledge_server: KnowledgeServer):
    token = make_token(knowledge_server.db, "claude-user", None)
    claude_mcp_add(claude_home, "knowledge", knowledge_server.url, transport="http",
                   headers={"Authorization": f"Bearer {token}"})
    claude_mcp_add(claude_home, "knowledge-wrong", knowledge_server.url, transport="http",
                   headers={"Authorization": "Bearer evt_not_a_token"})
    listing = claude_mcp_list(claude_home, cwd=claude_cwd, timeout=60)
    assert listing.is_connected("knowledge"), listing.raw
    assert not listing.is_connected("knowledge-wrong"), listing.raw
