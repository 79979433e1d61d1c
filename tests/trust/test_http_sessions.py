"""Issue 23: one token cannot lock everyone out of /mcp. A real `evoteam serve knowledge --http`
on 127.0.0.1; one token opens sessions until it is refused; another token still gets in."""

from __future__ import annotations

from pathlib import Path

import httpx

from evoteam.servers.knowledge import mcp_sessions as sessions
from tests.knowledge.conftest import KnowledgeServer, free_port, make_token

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


def _open(client: httpx.Client, url: str, token: str) -> int:
    r = client.post(url, json=INIT, headers={"Authorization": f"Bearer {token}",
                                             "Accept": "application/json, text/event-stream"})
    return r.status_code


def test_one_token_cannot_fill_the_sessions_of_everyone(tmp_path: Path):
    db = tmp_path / "kb.db"
    flood, other = make_token(db, "mallory", None), make_token(db, "alice", None)
    server = KnowledgeServer(db=db, port=free_port(), home=tmp_path).start()
    try:
        with httpx.Client(timeout=30) as client:
            codes = [_open(client, server.url, flood) for _ in range(sessions.PER_TOKEN + 5)]
            assert codes[:sessions.PER_TOKEN] == [200] * sessions.PER_TOKEN, codes
            assert set(codes[sessions.PER_TOKEN:]) == {503}, codes
            assert _open(client, server.url, other) == 200  # another token is not locked out
            store = server.url.replace("/mcp", "/store")
            assert _open(client, store, other) == 200
    finally:
        server.kill()

