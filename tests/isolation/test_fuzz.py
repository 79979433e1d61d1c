"""Property: every call of every tool of the four servers gets an answer, in time, as a result
or as a one-line error (never a traceback or a library's dump), whatever its arguments.

Arguments are drawn from each tool's own input schema (so calls reach the tools' bodies, with
a real run id half of the time) mixed with hostile values: nulls, huge strings, deep nesting,
wrong types, unknown keys. Runs on a real store file; team roles run on a fake runner, the
retrieval server has no search backend and no model (nothing leaves the machine)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client

from evoteam.config import Settings
from evoteam.servers.bench.server import build_server as bench_server
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.models import RunCreate
from evoteam.servers.knowledge.server import build_server as knowledge_server
from evoteam.servers.knowledge.store import Actor
from evoteam.servers.retrieval.backends import BackendSet
from evoteam.servers.retrieval.server import build_server as retrieval_server
from evoteam.servers.team.server import build_server as team_server
from tests.knowledge.conftest import held
from tests.team.conftest import FakeRunner, git_project

ANSWER_WITHIN_S = 30

def nested(depth: int) -> Any:
    value: Any = "deep"
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


HOSTILE = st.one_of(
    st.none(),
    st.just("x" * 300_000),
    st.just(nested(150)),  # the client refuses deeper; raw frames nest deeper in test_transport
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=10),
                 lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                 max_leaves=10),
)


def from_schema(schema: dict, defs: dict, name: str, run_id: str) -> st.SearchStrategy:
    if "$ref" in schema:
        return from_schema(defs.get(schema["$ref"].rsplit("/", 1)[-1], {}), defs, name, run_id)
    if "anyOf" in schema:
        return st.one_of([from_schema(s, defs, name, run_id) for s in schema["anyOf"]])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if kind == "string":
        text = st.text(max_size=60)
        return st.one_of(st.just(run_id), text) if name.endswith("run_id") else text
    if kind == "integer":
        return st.integers(min_value=-5, max_value=300)
    if kind == "number":
        return st.floats(min_value=-1e6, max_value=1e6)
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        return st.lists(from_schema(schema.get("items", {}), defs, name, run_id), max_size=3)
    if kind == "object":
        props = schema.get("properties", {})
        if not props:
            return st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=3)
        return st.fixed_dictionaries({k: from_schema(v, defs, k, run_id) for k, v in props.items()})
    return HOSTILE


@st.composite
def calls(draw, tools: dict[str, dict], run_id: str) -> tuple[str, dict]:
    name = draw(st.sampled_from(sorted(tools)))
    schema = tools[name]
    defs = schema.get("$defs", {})
    args = {}
    for key, prop in schema.get("properties", {}).items():
        required = key in schema.get("required", [])
        choice = draw(st.sampled_from(["valid", "valid", "hostile", "omit"] if not required else
                                      ["valid", "valid", "valid", "hostile"]))
        if choice == "valid":
            args[key] = draw(from_schema(prop, defs, key, run_id))
        elif choice == "hostile":
            args[key] = draw(HOSTILE)
    if draw(st.integers(0, 9)) == 0:
        args[draw(st.text(min_size=1, max_size=10))] = draw(HOSTILE)
    return name, args


@pytest.fixture(params=["knowledge", "team", "retrieval", "bench"])
async def server(request, tmp_path: Path, monkeypatch):
    """(name, client, tools by name with their input schemas, a real run id)."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("TAVILY_API_KEY", raising=False)
    async with held(LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="fuzz", client="pytest"))) as store:
        run = await store.start_run(RunCreate(goal="fuzzed", budget_usd=5))
        conf = Settings(db=tmp_path / "kb.db")
        build = {
            "knowledge": lambda: knowledge_server(conf, store),
            "team": lambda: team_server(conf, store, runner_factory=lambda kind: FakeRunner(store),
                                        project_dir=git_project(tmp_path / "project")),
            "retrieval": lambda: retrieval_server(conf, store, backends=BackendSet([], ["none in this test"])),
            "bench": lambda: bench_server(conf, store),
        }[request.param]
        async with held(Client(build())) as client:
            tools = {t.name: t.input_schema for t in (await client.list_tools()).tools}
            yield request.param, client, tools, run.id


def assert_answer_is_clear(server: str, tool: str, result) -> None:
    if not result.is_error:
        return
    text = " ".join(getattr(c, "text", "") for c in result.content)
    where = f"{server}.{tool}"
    assert text.strip(), f"{where}: an empty error"
    assert "\n" not in text.strip(), f"{where}: a multi-line error: {text[:500]!r}"
    for dump in ("Traceback", "errors.pydantic.dev", "validation error for", "input_value="):
        assert dump not in text, f"{where}: a library dump: {text[:500]!r}"
    assert len(text) <= 2_000, f"{where}: an error of {len(text)} characters"


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True,
          print_blob=False)
@given(data=st.data())
async def test_every_call_gets_a_clear_answer_in_time(server, data):
    name, client, tools, run_id = server
    tool, args = data.draw(calls(tools, run_id), label="call")
    with anyio.fail_after(ANSWER_WITHIN_S):
        result = await client.call_tool(tool, args)
    assert_answer_is_clear(name, tool, result)
