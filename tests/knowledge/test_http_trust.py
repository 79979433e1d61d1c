"""The shared server's edges (issue 17): exact Host/Origin matching, TLS or a loud warning, and
no self-awarded score through /mcp."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from evoteam.servers.knowledge.hostcheck import matches
from tests.knowledge.conftest import KnowledgeServer, free_port, make_token
from tests.knowledge.test_server import http_client


def test_wildcard_entries_mean_a_port_and_nothing_else():
    patterns = ["localhost:*", "kb.example.org:8765", "http://localhost:*"]
    assert matches("localhost:8765", patterns) and matches("KB.example.org:8765", patterns)
    assert matches("http://localhost:3000", patterns)
    for forged in ("localhost:8765.evil.example", "localhost:", "localhost:80/x", "kb.example.org:87650",
                   "kb.example.org:8765.evil", "http://localhost:3000.evil.example", "localhost"):
        assert not matches(forged, patterns), forged


INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


def test_host_and_origin_prefix_forgeries_are_refused(knowledge_server: KnowledgeServer):
    token = make_token(knowledge_server.db, "dave", None)
    auth = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json"}
    port = knowledge_server.port
    assert httpx.post(knowledge_server.url, headers={**auth, "Host": f"localhost:{port}"}, json=INIT).status_code == 200
    host = httpx.post(knowledge_server.url, headers={**auth, "Host": f"localhost:{port}.evil.example"}, json=INIT)
    assert host.status_code == 421
    origin = httpx.post(knowledge_server.url, headers={**auth, "Origin": f"http://localhost:{port}.evil.example"},
                        json=INIT)
    assert origin.status_code == 403


async def test_an_agent_cannot_mark_its_own_score_verified_over_http(knowledge_server: KnowledgeServer):
    token = make_token(knowledge_server.db, "erin", "p-erin")
    async with http_client(knowledge_server.url, token) as c:
        run = (await c.call_tool("start_run", {"goal": "g"})).structured_content
        result = await c.call_tool("record_candidate", {"run_id": run["id"], "code": "x", "status": "PASSED",
                                                        "score": 1000, "verified": True})
        if not result.is_error:
            assert result.structured_content["verified"] is False
        best = (await c.call_tool("best_candidates", {"run_id": run["id"]})).structured_content
        assert best["items"] == []
        assert (await c.call_tool("get_run", {"run_id": run["id"]})).structured_content["best_score"] is None


def _serve(tmp_path: Path, *args: str) -> tuple[subprocess.Popen, int]:
    db = tmp_path / "kb.db"
    make_token(db, "ops", None)
    port = free_port()
    env = {**os.environ, "EVOTEAM_DB": str(db), "HOME": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-m", "evoteam.cli", "serve", "knowledge", "--http", "--port", str(port),
                             *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return proc, port


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    proc.wait(timeout=10)


def test_plain_http_off_loopback_warns_loudly(tmp_path: Path):
    proc, _ = _serve(tmp_path, "--host", "0.0.0.0")
    try:
        lines = [proc.stderr.readline() for _ in range(2)]
    finally:
        _stop(proc)
    assert any("WARNING" in line and "--tls-cert" in line for line in lines), lines


def test_tls_is_served_with_a_certificate(tmp_path: Path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                    "/CN=localhost", "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    proc, port = _serve(tmp_path, "--tls-cert", str(cert), "--tls-key", str(key))
    token = make_token(tmp_path / "kb.db", "alice", None)
    try:
        assert "https://" in proc.stderr.readline()
        deadline = time.monotonic() + 20
        while True:
            try:
                response = httpx.post(f"https://127.0.0.1:{port}/mcp", verify=False, json=INIT)  # noqa: S501
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        assert response.status_code == 401  # TLS answered; the token check is behind it
        with pytest.raises(httpx.HTTPError):
            httpx.post(f"http://127.0.0.1:{port}/mcp", json=INIT, timeout=3)  # no plain HTTP on a TLS port
        # the live pages' session cookie is Secure: a browser never sends it over plain HTTP
        login = httpx.post(f"https://127.0.0.1:{port}/login", data={"token": token}, verify=False)  # noqa: S501
        assert login.status_code == 303, login.text[:300]
        assert "secure" in [part.strip().lower() for part in login.headers["set-cookie"].split(";")]
    finally:
        _stop(proc)
