"""Issue 23: one token cannot lock everyone out of /mcp. A real `evoteam serve knowledge --http`
on 127.0.0.1; one token opens sessions until it is refused; another token still gets in."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import httpx

from evoteam.servers.knowledge import mcp_sessions as sessions
from evoteam.servers.knowledge.models import RunCreate
from evoteam.servers.knowledge.remote import RemoteKnowledgeStore
from evoteam.servers.knowledge.store import Actor
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



def _server_with_idle(db: Path, home: Path, port: int, idle_s: float) -> KnowledgeServer:
    """The real server, with the /store idle period shortened so a test can outwait it."""
    server = KnowledgeServer(db=db, port=port, home=home)
    probe = (f"import evoteam.servers.knowledge.mcp_sessions as m; m.STORE_IDLE_S = {idle_s}\n"
             f"from evoteam.cli import main; main(['serve', 'knowledge', '--http', '--port', '{port}'])")
    server.process = subprocess.Popen([sys.executable, "-c", probe], env=server.env(),
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(server.process.stderr.read().decode())
        try:
            httpx.get(server.url, timeout=0.5)
            return server
        except httpx.HTTPError:
            time.sleep(0.1)
    server.kill()
    raise RuntimeError("server did not start")


def test_store_sessions_idle_well_before_half_an_hour():
    # evoteam's own /store clients never idle while they live (next test); what idles is a
    # session whose client is gone, and it should not hold a slot for 30 minutes.
    assert sessions.STORE_IDLE_S <= 5 * 60 < 30 * 60


def test_an_abandoned_store_session_is_reclaimed_while_evoteams_own_client_lives_on(tmp_path: Path):
    """A short /store idle period costs evoteam's clients nothing: a RemoteKnowledgeStore left
    idle far longer than the period still answers, while a session nobody holds is gone (404)."""
    idle = 1.0
    db = tmp_path / "kb.db"
    token = make_token(db, "alice", None)
    server = _server_with_idle(db, tmp_path, free_port(), idle)
    store_url = server.url.replace("/mcp", "/store")
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}

    def abandoned_session_gone(wait: float) -> bool:
        with httpx.Client(timeout=30) as client:
            opened = client.post(store_url, json=INIT, headers=headers)
            assert opened.status_code == 200, opened.text
            sid = opened.headers["mcp-session-id"]
            time.sleep(wait)  # not a timed assert: a later try waits longer
            ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
            return client.post(store_url, json=ping, headers={**headers, "mcp-session-id": sid,
                                                              "mcp-protocol-version": "2025-06-18"}).status_code == 404

    async def scenario() -> None:
        async with RemoteKnowledgeStore.connect(server.url, token, Actor(user="alice", client="t")) as kb:
            run = await kb.start_run(RunCreate(goal="outlive the idle period"))
            gone = False
            for attempt in range(1, 6):  # the evoteam client sits idle all this while
                gone = await asyncio.to_thread(abandoned_session_gone, idle * 3 * attempt)
                if gone:
                    break
            assert gone, "a /store session nobody held was never reclaimed"
            assert (await kb.get_run(run.id)).goal == "outlive the idle period"

    try:
        asyncio.run(scenario())
    finally:
        server.kill()
