"""The `knowledge` MCP server through real MCP clients: in memory, over stdio, over HTTP."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from evoteam.config import load_settings
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.server import build_server
from evoteam.servers.knowledge.store import Actor
from tests.knowledge.conftest import KnowledgeServer, free_port, held, make_token

ROOT = Path(__file__).resolve().parents[2]

REQUIRED_TOOLS = {"start_run", "get_run", "list_runs", "add_learning", "learnings", "history", "put_artifact",
                  "get_artifact", "record_candidate", "best_candidates", "trajectory", "search"}


@pytest.fixture
async def client(tmp_path):
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="me", client="pytest")) as store:
        async with held(Client(build_server(load_settings(), store))) as c:
            yield c


async def test_tools_are_listed_with_docs_and_output_schemas(client):
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert REQUIRED_TOOLS <= set(tools)
    for tool in tools.values():
        assert tool.description and len(tool.description) > 30, tool.name
        assert tool.output_schema, tool.name
    assert len(tools) <= 16


async def test_a_session_through_the_tools(client):
    run = (await client.call_tool("start_run", {"goal": "pack circles", "x0": 1, "best_known": 2.635983})
           ).structured_content
    rid = run["id"]
    cand = (await client.call_tool("record_candidate", {
        "run_id": rid, "code": "print(1)", "status": "PASSED", "score": 2.0, "role": "Geometer", "team_version": 1,
    })).structured_content
    assert cand["provenance"]["role"] == "Geometer"
    await client.call_tool("add_learning", {"run_id": rid, "text": "hex start gives 2.0", "kind": "technique",
                                            "evidence": [cand["id"]]})
    doc = (await client.call_tool("learnings", {"run_id": rid})).structured_content
    assert "hex start gives 2.0" in doc["document"]
    listed = (await client.call_tool("learnings", {"run_id": rid, "view": "list", "limit": 1})).structured_content
    assert listed["total"] == 1 and listed["items"][0]["evidence"] == [cand["id"]]
    # A score an agent reports itself is kept as a claim, never ranked: only the bench verifies.
    assert cand["verified"] is False
    best = (await client.call_tool("best_candidates", {"run_id": rid})).structured_content
    assert best["items"] == []
    short = (await client.call_tool("get_candidate", {"candidate_id": cand["id"]})).structured_content
    assert short["code"] is None
    full = (await client.call_tool("get_candidate", {"candidate_id": cand["id"], "detail": True})).structured_content
    assert full["code"] == "print(1)"
    hits = (await client.call_tool("search", {"query": "hex", "run_id": rid})).structured_content
    assert hits["total"] == 1
    art = (await client.call_tool("put_artifact", {"run_id": rid, "name": "k.py", "text": "x=1"})).structured_content
    meta = (await client.call_tool("get_artifact", {"artifact_id": art["id"], "detail": False})).structured_content
    assert "text" not in meta["artifact"] and meta["artifact"]["size"] == 3
    resource = await client.read_resource(f"evoteam://runs/{rid}/learnings.md")
    assert "hex start gives 2.0" in resource.contents[0].text
    templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
    assert templates == {"evoteam://runs/{run_id}/learnings.md", "evoteam://runs/{run_id}/history.md"}


@pytest.mark.parametrize("tool,args,expected", [
    ("get_run", {"run_id": "run_nope"}, "list_runs"),
    ("get_run", {}, "run_id"),
    ("start_run", {"goal": "g", "direction": "sideways"}, "direction"),
    ("put_artifact", {"run_id": "RUN", "name": "../../x", "text": "t"}, "plain file name"),
    ("put_artifact", {"run_id": "RUN", "name": "a.txt"}, "exactly one of text or content_base64"),
    ("put_artifact", {"run_id": "RUN", "name": "a.bin", "content_base64": "%%%"}, "not valid base64"),
    ("put_artifact", {"run_id": "RUN", "name": "big.txt", "text": "x" * (4 * 1024 * 1024 + 10)}, "limit"),
    ("record_candidate", {"run_id": "RUN", "code": "x", "score": "NaN"}, "finite"),
    ("add_learning", {"run_id": "RUN", "text": "t", "confidence": 7}, "confidence"),
    ("list_runs", {"limit": 100000}, "limit"),
    ("learnings", {"run_id": "RUN", "view": "list", "cursor": "bogus"}, "cursor"),
    ("get_candidate", {"candidate_id": "cand_missing"}, "no candidate"),
])
async def test_bad_input_gets_a_clear_tool_error(client, tool, args, expected):
    rid = (await client.call_tool("start_run", {"goal": "g"})).structured_content["id"]
    args = {k: (rid if v == "RUN" else v) for k, v in args.items()}
    result = await client.call_tool(tool, args)
    assert result.is_error
    text = result.content[0].text
    assert expected in text and "Traceback" not in text
    # Nothing half-written: the run still has no artifacts, candidates or learnings.
    run = (await client.call_tool("get_run", {"run_id": rid})).structured_content
    assert run["candidates"] == 0 and run["learnings"] == 0
    assert (await client.call_tool("list_artifacts", {"run_id": rid})).structured_content["total"] == 0


async def test_fts_syntax_never_reaches_the_user(client):
    rid = (await client.call_tool("start_run", {"goal": "g"})).structured_content["id"]
    await client.call_tool("add_learning", {"run_id": rid, "text": "use the L2 flush buffer"})
    for query in ['"unbalanced', "AND OR NOT", "flush*", "x:y", "NEAR(", "'; DROP TABLE learnings; --"]:
        result = await client.call_tool("search", {"query": query})
        assert not result.is_error, (query, result.content)


async def test_stdio_subprocess(tmp_path: Path):
    env = {**os.environ, "EVOTEAM_DB": str(tmp_path / "kb.db"), "HOME": str(tmp_path),
           "EVOTEAM_ROLE": "Kernel Smith", "EVOTEAM_TEAM_VERSION": "4"}
    env.pop("EVOTEAM_KNOWLEDGE_URL", None)
    params = StdioServerParameters(command=sys.executable, args=["-m", "evoteam.cli", "serve", "knowledge"], env=env)
    async with held(Client(params)) as c:
        assert REQUIRED_TOOLS <= {t.name for t in (await c.list_tools()).tools}
        run = (await c.call_tool("start_run", {"goal": "stdio run"})).structured_content
        lrn = (await c.call_tool("add_learning", {"run_id": run["id"], "text": "via stdio"})).structured_content
    # A headless role's identity comes from its environment.
    assert (lrn["provenance"]["role"], lrn["provenance"]["team_version"]) == ("Kernel Smith", 4)
    async with LocalKnowledgeStore.open(tmp_path / "kb.db") as store:
        assert (await store.list_learnings(run["id"])).items[0].text == "via stdio"



async def test_stdio_start_run_takes_a_local_kits_direction(tmp_path: Path):
    """Over stdio on the engineer's machine the kits are at hand (evoteam/servers/stdio.py): a run
    of a kit takes the kit's direction, the other one is refused before anything is built on it,
    and a kit not found here is taken at its word."""
    env = {**os.environ, "EVOTEAM_DB": str(tmp_path / "kb.db"), "HOME": str(tmp_path)}
    env.pop("EVOTEAM_KNOWLEDGE_URL", None)
    params = StdioServerParameters(command=sys.executable, args=["-m", "evoteam.cli", "serve", "knowledge"], env=env)
    async with held(Client(params)) as c:
        wrong = await c.call_tool("start_run", {"goal": "faster", "kit": "rmsnorm_cpu", "direction": "minimize"})
        assert wrong.is_error and "kit 'rmsnorm_cpu' scores to be maximized" in wrong.content[0].text, wrong.content
        assert "omit direction" in wrong.content[0].text
        speed = (await c.call_tool("start_run", {"goal": "faster", "kit": "rmsnorm_cpu"})).structured_content
        overlap = (await c.call_tool("start_run", {"goal": "smaller", "kit": "erdos_min_overlap"})).structured_content
        folder = (await c.call_tool("start_run", {"goal": "faster", "kit": str(ROOT / "task_kits" / "rmsnorm_cpu"),
                                                  "x0": 2.0})).structured_content
        elsewhere = (await c.call_tool("start_run", {"goal": "g", "kit": "a_kit_on_another_machine",
                                                     "direction": "minimize"})).structured_content
        # x0 and best-known copied from describe_kit's output, which shows five significant digits.
        copied = (await c.call_tool("start_run", {"goal": "g", "kit": "circle_packing_26", "x0": 2.1667,
                                                  "best_known": 2.636})).structured_content
    assert (speed["direction"], overlap["direction"], elsewhere["direction"]) == ("maximize", "minimize", "minimize")
    # The kit's x0 and best-known unless given; a folder named for a kit becomes the kit's name.
    assert (overlap["x0"], overlap["best_known"]) == (0.5, 0.380859)
    assert (folder["kit"], folder["x0"], folder["direction"]) == ("rmsnorm_cpu", 2.0, "maximize")
    # ... are the kit's own, to all their digits (else every NDG of the run is a little off the bench's).
    assert (copied["x0"], copied["best_known"]) == (2.1666666666666665, 2.635983)
    async with LocalKnowledgeStore.open(tmp_path / "kb.db") as store:
        assert (await store.list_runs()).total == 5  # the refused one was never made


# ---------------------------------------------------------------- HTTP


def http_client(url: str, token: str | None, host: str | None = None):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if host:
        headers["Host"] = host
    return held(Client(streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers))))


async def test_http_refuses_missing_and_wrong_tokens(knowledge_server: KnowledgeServer):
    for headers in ({}, {"Authorization": "Bearer evt_wrong"}, {"Authorization": "Basic abc"}):
        response = httpx.post(knowledge_server.url, headers={**headers, "Accept": "application/json"},
                              json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert response.status_code == 401, headers
    for path in ("/store",):
        response = httpx.post(f"http://127.0.0.1:{knowledge_server.port}{path}", json={})
        assert response.status_code == 401
    with pytest.raises(Exception):
        async with http_client(knowledge_server.url, "evt_wrong") as c:
            await c.list_tools()


async def test_http_identity_and_project_scope_come_from_the_token(knowledge_server: KnowledgeServer):
    alice = make_token(knowledge_server.db, "alice", f"pa-{uuid.uuid4().hex[:6]}")
    bob = make_token(knowledge_server.db, "bob", f"pb-{uuid.uuid4().hex[:6]}")
    async with http_client(knowledge_server.url, alice) as a:
        run = (await a.call_tool("start_run", {"goal": "alice's kernel"})).structured_content
        assert run["provenance"]["user"] == "alice"
        lrn = (await a.call_tool("add_learning", {"run_id": run["id"], "text": "secret trick"})).structured_content
        assert lrn["provenance"]["user"] == "alice"
        refused = await a.call_tool("start_run", {"goal": "elsewhere", "project": "someone-else"})
        assert refused.is_error and "limited to project" in refused.content[0].text
    async with http_client(knowledge_server.url, bob) as b:
        assert (await b.call_tool("list_runs", {})).structured_content["total"] == 0
        for tool, args in (("get_run", {"run_id": run["id"]}),
                           ("learnings", {"run_id": run["id"]}),
                           ("add_learning", {"run_id": run["id"], "text": "planted"}),
                           ("record_candidate", {"run_id": run["id"], "code": "x"})):
            result = await b.call_tool(tool, args)
            assert result.is_error and "no run" in result.content[0].text, tool
        assert (await b.call_tool("search", {"query": "secret trick"})).structured_content["total"] == 0
        with pytest.raises(Exception):
            await b.read_resource(f"evoteam://runs/{run['id']}/learnings.md")


async def test_http_host_allow_list_and_body_limit(knowledge_server: KnowledgeServer):
    token = make_token(knowledge_server.db, "carol", None)
    auth = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    ok = httpx.post(knowledge_server.url, headers=auth, json=init)
    assert ok.status_code == 200
    evil = httpx.post(knowledge_server.url, headers={**auth, "Host": "evil.example:80"}, json=init)
    assert evil.status_code in (403, 421)
    origin = httpx.post(knowledge_server.url, headers={**auth, "Origin": "http://evil.example"}, json=init)
    assert origin.status_code == 403
    huge = httpx.post(knowledge_server.url, headers=auth, content=b"{" + b" " * (9 * 1024 * 1024) + b"}")
    assert huge.status_code == 413


def run_cli(args, env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evoteam.cli", *args], env=env, capture_output=True,
                          text=True, timeout=30)


def test_http_refuses_to_start_without_tokens(tmp_path: Path):
    env = {**os.environ, "EVOTEAM_DB": str(tmp_path / "kb.db"), "HOME": str(tmp_path)}
    for host in ("0.0.0.0", "127.0.0.1"):
        result = run_cli(["serve", "knowledge", "--http", "--host", host, "--port", str(free_port())], env)
        assert result.returncode != 0
        assert "without tokens" in result.stderr and "evoteam token add" in result.stderr
        assert "Traceback" not in result.stderr


def test_token_cli_stores_only_a_hash(tmp_path: Path):
    env = {**os.environ, "EVOTEAM_DB": str(tmp_path / "kb.db"), "HOME": str(tmp_path)}
    made = run_cli(["token", "add", "dora", "--project", "kernels"], env)
    token = made.stdout.strip()
    assert made.returncode == 0 and token.startswith("evt_")
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("kb.db*"))
    assert stored and token.encode() not in stored
    listed = run_cli(["token", "list"], env).stdout
    assert "dora" in listed and "kernels" in listed and token not in listed
    tok_id = listed.split()[0]
    assert run_cli(["token", "revoke", tok_id], env).returncode == 0
    again = run_cli(["token", "revoke", tok_id], env)
    assert again.returncode == 3 and "no active token" in again.stderr  # exit 3: not found (evoteam --help)
