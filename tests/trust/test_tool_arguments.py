"""Issue 23: tool arguments as sent, within bounds. JSON-looking strings stay strings, integers
fit in 64 bits, strings are capped, cursors are bounded, and no internal exception name reaches
a client. Real MCP client in memory against the knowledge server on a real store file."""

from __future__ import annotations

import base64
import json
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from mcp import Client

from evoteam.config import Settings
from evoteam.servers.arguments import MAX_STRING
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.server import build_server
from evoteam.servers.knowledge.store import Actor

SOLUTION = json.dumps({"name": "s1", "definition": "d", "spec": {"language": "python", "entry_point": "main.py::run"},
                       "sources": [{"path": "main.py", "content": "def run(x):\n    return x\n"}]})


@asynccontextmanager
async def connected(tmp_path: Path):
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="a", client="t")) as store:
        async with Client(build_server(Settings(db=tmp_path / "kb.db"), store)) as c:
            run = await c.call_tool("start_run", {"goal": "g"})
            yield c, run.structured_content["id"], store


@pytest.mark.parametrize("code", [SOLUTION, "[1, 2]", "null", "true", "12", '"quoted"'])
async def test_a_json_looking_string_is_stored_as_the_string_it_was(tmp_path, code):
    async with connected(tmp_path) as (c, run_id, _store):
        rec = await c.call_tool("record_candidate", {"run_id": run_id, "code": code})
        assert not rec.is_error, rec.content[0].text
        got = await c.call_tool("get_candidate", {"candidate_id": rec.structured_content["id"], "detail": True})
        assert got.structured_content["code"] == code


async def test_a_json_artifact_is_stored_as_text(tmp_path):
    async with connected(tmp_path) as (c, run_id, _store):
        art = await c.call_tool("put_artifact", {"run_id": run_id, "name": "result.json", "text": '{"k": [1, 2]}'})
        assert not art.is_error, art.content[0].text
        got = await c.call_tool("get_artifact", {"artifact_id": art.structured_content["id"]})
        assert got.structured_content["artifact"]["text"] == '{"k": [1, 2]}'


@pytest.mark.parametrize("args, words", [
    ({"score": 2**64}, "score: integer out of range"),
    ({"metrics": {"n": -(2**70)}}, "metrics.n: integer out of range"),
    ({"notes": "x" * (MAX_STRING + 1)}, "notes:"),
    ({"metrics": {"a": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}}, "nested"),
])
async def test_out_of_bounds_arguments_are_one_line(tmp_path, args, words):
    async with connected(tmp_path) as (c, run_id, _store):
        res = await c.call_tool("record_candidate", {"run_id": run_id, "code": "x", **args})
        assert res.is_error and words in res.content[0].text and "\n" not in res.content[0].text, res.content[0].text


async def test_a_huge_cursor_is_a_bad_cursor(tmp_path):
    async with connected(tmp_path) as (c, run_id, _store):
        cursor = base64.urlsafe_b64encode(b"o:" + b"9" * 40).decode().rstrip("=")
        res = await c.call_tool("list_artifacts", {"run_id": run_id, "cursor": cursor})
        assert res.is_error and "bad cursor" in res.content[0].text, res.content[0].text


async def test_no_internal_exception_name_reaches_the_client(tmp_path, monkeypatch):
    async with connected(tmp_path) as (c, run_id, store):

        async def boom(*a, **k):
            raise OverflowError("Python int too large to convert to SQLite INTEGER")

        monkeypatch.setattr(type(store), "list_artifacts", boom)
        res = await c.call_tool("list_artifacts", {"run_id": run_id})
        text = res.content[0].text
        assert res.is_error and "failed inside the server" in text
        assert "OverflowError" not in text and "SQLite" not in text, text
