"""Frames no well-behaved client sends, written raw to the four servers over stdio (as
`evoteam serve NAME` runs them) and to the shared knowledge server over HTTP: each gets a
JSON-RPC answer with its id, in time, and the server keeps answering afterwards."""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import pytest

from evoteam.servers.guard import find_request_id
from tests.knowledge.conftest import KnowledgeServer, free_port, make_token
from tests.support.raw_stdio import RawStdio

ANSWER_WITHIN_S = 20
DEEP = 10_000


def call(request_id: int, arguments_json: str, tool: str = "no_such_tool") -> str:
    return ('{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"%s","arguments":%s}}'
            % (request_id, tool, arguments_json))


# (what, raw frame, the id the answer must carry, what the error must say)
FRAMES = [
    ("lone surrogate", call(11, '{"run_id":"\\ud800"}'), 11, "surrogate"),
    ("lone low surrogate in a key", call(12, '{"\\udfff":1}'), 12, "surrogate"),
    ("deep nesting", call(13, '{"x":' + "[" * DEEP + "]" * DEEP + "}"), 13, "nests deeper"),
    ("deep nesting, id last", '{"jsonrpc":"2.0","method":"tools/call","params":{"name":"x","arguments":{"a":'
     + "{\"a\":" * DEEP + "1" + "}" * DEEP + '}},"id":"last"}', "last", "nests deeper"),
    ("truncated JSON", '{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{"name":', 14, "not valid JSON"),
    ("not JSON-RPC", '{"jsonrpc":"2.0","id":15}', 15, "Invalid request"),
    ("garbage", "this is not json at all", None, "not valid JSON"),
    ("huge string", call(16, '{"run_id":"' + "x" * 2_000_000 + '"}'), 16, ""),
]


def test_the_request_id_is_found_without_a_recursive_parser():
    assert find_request_id('{"a":' + "[" * DEEP + "]" * DEEP + ',"id":7}') == 7
    assert find_request_id('{"params":{"id":1},"id":"x\\"y"}') == 'x"y'
    assert find_request_id('{"params":{"id":1}}') is None
    assert find_request_id('{"id":') is None


class StdioServer(RawStdio):
    def __init__(self, name: str, tmp_path: Path):
        env = {**os.environ, "EVOTEAM_DB": str(tmp_path / "kb.db"), "HOME": str(tmp_path)}
        env.pop("EVOTEAM_KNOWLEDGE_URL", None)
        env.pop("ANTHROPIC_API_KEY", None)
        super().__init__(name, env, answer_within_s=ANSWER_WITHIN_S)

    def close(self) -> None:
        self.process.kill()
        self.process.wait(10)


def check_answer(answer: dict, request_id, says: str) -> None:
    assert answer.get("id") == request_id, answer
    error = answer.get("error") or {}
    if error:
        assert says in error["message"] and "\n" not in error["message"], error
    else:  # a frame that was readable reaches the tool layer: a tool error
        result = answer["result"]
        assert result.get("isError") and "\n" not in result["content"][0]["text"], result


@pytest.mark.parametrize("name", ["knowledge", "team", "retrieval", "bench"])
def test_stdio_answers_every_frame(name: str, tmp_path: Path):
    server = StdioServer(name, tmp_path)
    try:
        server.send(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}))
        assert server.receive(60)["id"] == 0
        server.send('{"jsonrpc":"2.0","method":"notifications/initialized"}')
        for what, frame, request_id, says in FRAMES:
            server.send(frame)
            check_answer(server.receive(), request_id, says)
        server.send('{"jsonrpc":"2.0","id":99,"method":"tools/list"}')
        assert server.receive()["result"]["tools"], "the server stopped answering"
    finally:
        server.close()


def test_http_answers_every_frame(tmp_path: Path):
    db = tmp_path / "kb.db"
    token = make_token(db, "alice", "p1")
    server = KnowledgeServer(db=db, port=free_port(), home=tmp_path).start()
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream",
               "Content-Type": "application/json"}
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{server.port}", headers=headers, timeout=ANSWER_WITHIN_S) as http:
            init = http.post("/mcp", content=json.dumps({
                "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}))
            assert init.status_code == 200
            session = {"mcp-session-id": init.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
            http.post("/mcp", headers=session, content='{"jsonrpc":"2.0","method":"notifications/initialized"}')
            for what, frame, request_id, says in FRAMES:
                response = http.post("/mcp", headers=session, content=frame.encode("utf-8", "surrogatepass"))
                assert response.status_code in (200, 400, 413), (what, response.status_code)
                if response.status_code == 413:
                    continue  # over the configured body limit: refused before parsing, with a status
                body = response.text
                if body.startswith("event:") or "data:" in body[:20]:
                    body = next(line[5:] for line in body.splitlines() if line.startswith("data:"))
                answer = json.loads(body)
                assert "error" in answer or answer.get("result", {}).get("isError"), (what, answer)
                message = answer.get("error", {}).get("message") or answer["result"]["content"][0]["text"]
                assert "\n" not in message.strip() and "Traceback" not in message, (what, message)
                if "error" in answer:
                    assert answer["id"] == request_id and says in message, (what, answer)
            alive = http.post("/mcp", headers=session, content='{"jsonrpc":"2.0","id":99,"method":"tools/list"}')
            assert alive.status_code == 200 and "start_run" in alive.text
    finally:
        server.kill()
