"""The fast-start front of `evoteam serve <server>` over stdio (evoteam/servers/front.py), driven
as a client drives it: a real process, a real `mcp` client or raw JSON-RPC lines.

A first start records the manifest; a second answers `initialize`/`server/discover` and
`tools/list` from it while the real server imports, then forwards everything to that server;
`EVOTEAM_FAST_START=0` is the plain path. The three give the same tools and the same answers."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from evoteam.servers import front
from evoteam.servers import manifest as manifest_cache
from tests.support.raw_stdio import RawStdio

# A call per server whose answer depends only on a fresh store (an error is an answer too).
CALLS = {
    "knowledge": ("list_runs", {}),
    "team": ("get_team", {"run_id": "run_missing"}),
    "retrieval": ("retrieval_stats", {}),
    "bench": ("list_kits", {}),
}
ANSWER_WITHIN_S = 30


def server_env(home: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "EVOTEAM_DB": str(home / "kb.db"), "HOME": str(home), **extra}
    for var in ("EVOTEAM_KNOWLEDGE_URL", "ANTHROPIC_API_KEY", "EVOTEAM_HOME", "EVOTEAM_FAST_START"):
        if var not in extra:
            env.pop(var, None)
    return env


def manifests(home: Path, server: str) -> list[Path]:
    return sorted((home / ".evoteam" / "fast-start").glob(f"{server}-*.json"))


async def session(server: str, env: dict[str, str], cwd: Path, mode: str = "auto",
                  call: tuple[str, dict] | None = None) -> tuple[list[dict], dict]:
    """One client session: the tools listed and the answer to `call` (default: CALLS[server])."""
    name, arguments = call or CALLS[server]
    params = StdioServerParameters(command=sys.executable, args=["-m", "evoteam.cli", "serve", server],
                                   env=env, cwd=str(cwd))
    with anyio.fail_after(ANSWER_WITHIN_S):
        async with Client(params, mode=mode) as client:
            tools = [t.model_dump(mode="json") for t in (await client.list_tools()).tools]
            result = await client.call_tool(name, arguments)
    return tools, {"is_error": result.is_error, "content": [c.model_dump(mode="json") for c in result.content],
                   "structured": result.structured_content}


@pytest.mark.parametrize("server", sorted(CALLS))
async def test_a_warm_start_lists_and_answers_as_the_plain_server(server: str, tmp_path: Path):
    env = server_env(tmp_path)
    cold = await session(server, env, tmp_path)
    [manifest] = manifests(tmp_path, server)
    assert stat.S_IMODE(manifest.stat().st_mode) == 0o600
    assert stat.S_IMODE(manifest.parent.stat().st_mode) == 0o700
    written = json.loads(manifest.read_text())["written"]

    warm = await session(server, env, tmp_path)
    plain = await session(server, {**env, "EVOTEAM_FAST_START": "0"}, tmp_path)
    assert warm == cold == plain
    assert {t["name"] for t in warm[0]} >= {CALLS[server][0]}
    # The warm start was a hit: the manifest was served and verified, not written again.
    assert manifests(tmp_path, server) == [manifest]
    assert json.loads(manifest.read_text())["written"] == written


async def test_the_initialize_handshake_is_served_too(tmp_path: Path):
    env = server_env(tmp_path)
    cold = await session("knowledge", env, tmp_path, mode="legacy")
    warm = await session("knowledge", env, tmp_path, mode="legacy")
    assert warm == cold
    # The handshake and the stateless protocol are cached apart (their answers differ).
    await session("knowledge", env, tmp_path)
    assert len(manifests(tmp_path, "knowledge")) == 2


async def test_a_change_of_environment_is_a_miss(tmp_path: Path):
    await session("bench", server_env(tmp_path), tmp_path)
    await session("bench", server_env(tmp_path, EVOTEAM_PROJECT="another"), tmp_path)
    (tmp_path / "evoteam.toml").write_text('project = "third"\n')
    await session("bench", server_env(tmp_path), tmp_path)
    assert len(manifests(tmp_path, "bench")) == 3


async def test_a_stale_manifest_is_served_then_found_and_rewritten(tmp_path: Path):
    env = server_env(tmp_path)
    tools, _ = await session("bench", env, tmp_path)
    [path] = manifests(tmp_path, "bench")
    data = json.loads(path.read_text())
    data["tools"]["result"]["tools"].append({"name": "ghost_tool", "inputSchema": {"type": "object"}})
    path.write_text(json.dumps(data))

    stale, ghost = await session("bench", env, tmp_path, call=("ghost_tool", {}))
    assert [t["name"] for t in stale] == [t["name"] for t in tools] + ["ghost_tool"]  # served from the file
    assert ghost["is_error"] and "ghost_tool" in json.dumps(ghost["content"])  # the real server's error

    # The verification rewrote the manifest: the next start lists the real tools.
    assert "ghost_tool" not in path.read_text()
    assert (await session("bench", env, tmp_path))[0] == tools


def test_a_manifest_of_the_wrong_shape_is_a_miss(tmp_path: Path):
    key = "k" * 64
    good = {"method": "initialize", "result": {"capabilities": {}, "protocolVersion": "x", "serverInfo": {}}}
    tools = {"params": None, "result": {"tools": [{"name": "a"}]}}
    manifest_cache.save_manifest(tmp_path, "bench", key, good, tools)
    assert manifest_cache.load_manifest(tmp_path, "bench", key)["tools"] == tools
    assert manifest_cache.load_manifest(tmp_path, "bench", "other" + key) is None
    path = next(tmp_path.glob("bench-*.json"))
    for bad in ("not json", "[]", json.dumps({"format": 1, "key": key, "first": good, "tools": {"params": None}}),
                json.dumps({"format": 1, "key": key, "first": {**good, "method": "tools/call"}, "tools": tools}),
                json.dumps({"format": 1, "key": key, "first": good,
                            "tools": {"params": None, "result": {"tools": [{"name": 3}]}}})):
        path.write_text(bad)
        assert manifest_cache.load_manifest(tmp_path, "bench", key) is None, bad


def test_old_manifests_are_pruned(tmp_path: Path):
    first = {"method": "initialize", "result": {"capabilities": {}}}
    tools = {"params": None, "result": {"tools": []}}
    for i in range(manifest_cache.KEEP_PER_SERVER + 3):
        path = manifest_cache.save_manifest(tmp_path, "bench", f"{i:040d}" + "x" * 24, first, tools)
        os.utime(path, (1_000_000 + i, 1_000_000 + i))
    manifest_cache.save_manifest(tmp_path, "team", "t" * 64, first, tools)
    kept = sorted(tmp_path.glob("bench-*.json"))
    assert len(kept) == manifest_cache.KEEP_PER_SERVER and kept[0].name == f"bench-{3:040d}.json"
    assert len(list(tmp_path.glob("team-*.json"))) == 1


def test_the_front_imports_neither_mcp_nor_pydantic(tmp_path: Path):
    probe = ("import sys; import evoteam.cli; from evoteam.servers import front, manifest\n"
             "manifest.base_key('knowledge', {}); manifest.manifest_key({}, None)\n"
             "print(sorted({m.split('.')[0] for m in sys.modules} & {'mcp', 'mcp_types', 'pydantic', 'anyio'}))")
    out = subprocess.run([sys.executable, "-c", probe], env=server_env(tmp_path), capture_output=True,
                         text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


# ---------------------------------------------------------------- raw lines


class Raw(RawStdio):
    """`evoteam serve` driven line by line: what a client sends, unprocessed."""

    def __init__(self, server: str, home: Path, **env: str):
        super().__init__(server, server_env(home, **env), cwd=home, stderr=subprocess.PIPE,
                         answer_within_s=ANSWER_WITHIN_S)

    def handshake(self) -> list[dict]:
        self.send({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                   "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                              "clientInfo": {"name": "raw", "version": "1"}}})
        init = self.receive()
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        self.send({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        return [init, self.receive()]

    def close(self, within_s: float = 10) -> int:
        self.process.stdin.close()
        try:
            return self.process.wait(within_s)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait(5)


def test_early_requests_wait_for_the_real_server_in_order(tmp_path: Path):
    cold = Raw("knowledge", tmp_path)
    recorded = cold.handshake()
    assert cold.close() == 0

    warm = Raw("knowledge", tmp_path)
    started = time.monotonic()
    assert warm.handshake() == recorded
    # Sent at once, before the real server has finished importing: a call, a frame the server
    # cannot read, a frame too deep for a parser, a ping and a second list.
    warm.send({"jsonrpc": "2.0", "id": "call-1", "method": "tools/call",
               "params": {"name": "start_run", "arguments": {"goal": "early"}}})
    warm.send("this is not json at all")
    warm.send('{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"x","arguments":{"x":'
              + "[" * 10_000 + "]" * 10_000 + "}}}")
    warm.send({"jsonrpc": "2.0", "id": 7, "method": "ping"})
    warm.send({"jsonrpc": "2.0", "id": "call-2", "method": "tools/call",
               "params": {"name": "get_run", "arguments": {"run_id": "run_missing"}}})
    answers = [warm.receive() for _ in range(5)]
    assert time.monotonic() - started < ANSWER_WITHIN_S
    by_id = {a.get("id"): a for a in answers}
    assert set(by_id) == {"call-1", None, 13, 7, "call-2"}
    assert by_id[7]["result"] == {}
    run = by_id["call-1"]["result"]["structuredContent"]
    assert run["goal"] == "early" and not by_id["call-1"]["result"].get("isError")
    assert by_id[None]["error"]["code"] == -32700 and "not valid JSON" in by_id[None]["error"]["message"]
    assert "nests deeper" in by_id[13]["error"]["message"]
    assert by_id["call-2"]["result"]["isError"]
    # (The real server runs requests concurrently: the order of these answers is its own.)
    # And after the real server is up, everything is its own answer.
    warm.send({"jsonrpc": "2.0", "id": 8, "method": "tools/list"})
    assert warm.receive() == {**recorded[1], "id": 8}
    assert warm.close() == 0
    assert warm.process.stderr.read() == b""


@pytest.mark.parametrize("fast", ["1", "0"])
def test_stdin_closed_ends_the_process_cleanly(tmp_path: Path, fast: str):
    Raw("bench", tmp_path).close(30)  # record the manifest
    for _ in range(2):
        raw = Raw("bench", tmp_path, EVOTEAM_FAST_START=fast)
        raw.handshake()
        started = time.monotonic()
        assert raw.close() == 0
        assert time.monotonic() - started < 8
        assert raw.process.stderr.read() == b""
    silent = Raw("bench", tmp_path, EVOTEAM_FAST_START=fast)
    assert silent.close() == 0  # closed before saying anything


@pytest.mark.parametrize("fast", ["1", "0"])
def test_a_bad_config_file_is_one_line_and_exit_1(tmp_path: Path, fast: str):
    (tmp_path / "evoteam.toml").write_text("project = [\n")
    raw = Raw("bench", tmp_path, EVOTEAM_FAST_START=fast)
    assert raw.process.wait(30) == 1  # before the client says anything, as before
    err = raw.process.stderr.read().decode()
    assert err.startswith("Error: cannot read") and err.count("\n") == 1 and "Traceback" not in err
    raw.close()


def test_sigterm_ends_a_fronted_session(tmp_path: Path):
    Raw("bench", tmp_path).close(30)
    raw = Raw("bench", tmp_path)
    raw.handshake()
    raw.process.send_signal(signal.SIGTERM)
    assert raw.process.wait(10) == -signal.SIGTERM


# ---------------------------------------------------------------- the front alone


class FakeServer:
    """Stands in for the real server inside a `front.Front`: answers the opening request and
    tools/list (with a list far longer than a line the front parses from the client)."""

    TOOLS = {"tools": [{"name": f"tool_{i}", "description": "d" * 1000, "inputSchema": {"type": "object"}}
                       for i in range(200)]}

    def __init__(self, session: front.Front):
        self.session = session

    def run(self) -> None:
        s = self.session
        try:
            for line in front._lines(s.to_server_r):
                msg = json.loads(line)
                if msg.get("method") == "initialize":
                    result = {"protocolVersion": "2025-06-18", "capabilities": {}, "serverInfo": {"name": "fake"}}
                elif msg.get("method") == "tools/list":
                    result = self.TOOLS
                elif "id" in msg:
                    result = {"echo": msg["method"]}
                else:
                    continue
                front._write_all(s.from_server_w, json.dumps({"jsonrpc": "2.0", "id": msg["id"],
                                                              "result": result}).encode() + b"\n")
        finally:
            os.close(s.from_server_w)
            os.close(s.to_server_r)


def fake_session(home: Path, monkeypatch: pytest.MonkeyPatch, requests: list[dict]) -> list[dict]:
    """Run one session of the front against FakeServer; the client's answers."""
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("EVOTEAM_HOME", raising=False)
    client_in_r, client_in_w = os.pipe()
    client_out_r, client_out_w = os.pipe()
    session = front.Front("fake", {}, client_in_r, client_out_w)
    received: list[bytes] = []
    threads = [threading.Thread(target=target, daemon=True)
               for target in (session.read_client, session.write_server, session.pump_server, FakeServer(session).run)]
    client = threading.Thread(target=lambda: received.extend(front._lines(client_out_r)), daemon=True)
    for thread in (*threads, client):
        thread.start()
    front._write_all(client_in_w, b"".join(json.dumps(r).encode() + b"\n" for r in requests))
    os.close(client_in_w)
    for thread in threads:
        thread.join(10)
        assert not thread.is_alive()
    os.close(client_out_w)
    client.join(10)
    os.close(client_out_r)
    os.close(client_in_r)
    return [json.loads(line) for line in received]


def test_a_long_tool_list_is_recorded_and_the_fronts_own_reply_never_reaches_the_client(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    requests = [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}},
                {"jsonrpc": "2.0", "method": "notifications/initialized"},
                {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "tool_1"}}]
    assert len(json.dumps(FakeServer.TOOLS)) > front.MAX_PARSED_LINE
    cold = fake_session(tmp_path, monkeypatch, requests)
    assert [a["id"] for a in cold] == [1, 2, 3] and cold[1]["result"] == FakeServer.TOOLS
    warm = fake_session(tmp_path, monkeypatch, requests)
    assert sorted(warm, key=lambda a: a["id"]) == cold  # nothing under the front's own id
    [path] = (tmp_path / ".evoteam" / "fast-start").glob("fake-*.json")
    assert json.loads(path.read_text())["tools"]["result"] == FakeServer.TOOLS


def test_the_key_follows_what_can_change_the_answers(tmp_path: Path):
    env = server_env(tmp_path)
    base = manifest_cache.base_key("bench", {}, env, tmp_path)

    def key(b=base, params=None) -> str:
        return manifest_cache.manifest_key(b, ["initialize", params or {"protocolVersion": "2025-06-18"}])

    changed = [
        manifest_cache.base_key("team", {}, env, tmp_path),
        manifest_cache.base_key("bench", {"knowledge_url": "https://kb"}, env, tmp_path),
        manifest_cache.base_key("bench", {}, {**env, "EVOTEAM_ROLE": "x"}, tmp_path),
        manifest_cache.base_key("bench", {}, {**env, "SOME_OTHER_VAR": "1"}, tmp_path),
        manifest_cache.base_key("bench", {}, env, tmp_path / "sub"),
    ]
    (tmp_path / "evoteam.toml").write_text('project = "p"\n')
    changed.append(manifest_cache.base_key("bench", {}, env, tmp_path))
    (tmp_path / "evoteam.toml").unlink()
    keys = {key(), *(key(b) for b in changed), key(params={"protocolVersion": "2025-11-25"})}
    assert len(keys) == len(changed) + 2
    # Per-terminal and per-session variables no server reads leave it alone.
    assert key(manifest_cache.base_key("bench", {}, {**env, "SHLVL": "9", "CLAUDE_CODE_SESSION_ID": "s"}, tmp_path)) == key()
    # (An edited source file changes the code fingerprint: tests/plugin/test_warm_hooks.py.)
