"""Fixtures for the retrieval tests: a copy of the clean-room corpus fixture, a real store
file with a run in it, and a scripted Messages API served through httpx2.MockTransport."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import httpx2
import pytest

from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.models import RunCreate
from evoteam.servers.knowledge.store import Actor

CORPUS = Path(__file__).parent / "corpus"
PARENT_SCORE = 1.0


@pytest.fixture
def corpus_dir(tmp_path: Path) -> Path:
    target = tmp_path / "corpus"
    shutil.copytree(CORPUS, target)
    return target


@pytest.fixture
async def store(request, tmp_path: Path):
    """A store file; or, where a test module asks for it (`indirect` parametrisation with
    "postgres"), a fresh PostgreSQL database."""
    actor = Actor(user="tester", client="pytest", role="Retrieval Scout", team_version=1)
    backend = getattr(request, "param", "sqlite")
    where = request.getfixturevalue("postgres_url") if backend == "postgres" else tmp_path / "knowledge.db"
    async with LocalKnowledgeStore.open(where, actor) as s:
        yield s


@pytest.fixture
async def run(store):
    return await store.start_run(RunCreate(goal="Make the row softmax kernel faster (speedup over baseline)",
                                           direction="maximize", x0=1.0, best_known=4.0))


# ---------------------------------------------------------------- scripted Messages API


def message(tool: str, payload: dict, *, text: str | None = None) -> dict:
    content = []
    if text:
        content.append({"type": "text", "text": text})
    content.append({"type": "tool_use", "id": "toolu_01", "name": tool, "input": payload})
    return {"id": "msg_01", "type": "message", "role": "assistant", "model": "claude-test", "content": content,
            "stop_reason": "tool_use", "stop_sequence": None, "usage": {"input_tokens": 100, "output_tokens": 20}}


_DOC = re.compile(r'<untrusted-(?P<nonce>[0-9a-f]+) id="(?P<id>[^"]+)">\ntitle: (?P<title>[^\n]*)\n'
                  r'url: (?P<url>[^\n]*)\n---\n(?P<body>.*?)\n</untrusted-(?P=nonce)>', re.S)


def documents_in(request_json: dict) -> list[dict]:
    """The fenced documents of a scoring request, as the scripted model sees them."""
    user = request_json["messages"][0]["content"]
    return [m.groupdict() for m in _DOC.finditer(user)]


def keyword_forecaster(doc: dict) -> float:
    """A scripted forecast: the online-softmax page is the one that helps."""
    text = (doc["title"] + " " + doc["body"]).lower()
    if "online softmax" in text:
        return 2.6
    if "shuffle" in text or "float4" in text:
        return 1.4
    if "softmax" in text:
        return 1.1
    return 0.9


class ScriptedModel:
    """Answers the predictor's three tools; records every request."""

    def __init__(self, forecaster: Callable[[dict], float] = keyword_forecaster,
                 gate_decision: str = "retrieve", garbage: bool = False,
                 scoring_reply: Callable[[dict, list[dict]], dict] | None = None):
        self.forecaster = forecaster
        self.gate_decision = gate_decision
        self.garbage = garbage
        self.scoring_reply = scoring_reply
        self.requests: list[dict] = []
        self.rounds = 0

    def handler(self, request: httpx2.Request) -> httpx2.Response:
        assert request.url.path.endswith("/v1/messages"), request.url
        body = json.loads(request.content)
        self.requests.append(body)
        tool = body["tool_choice"]["name"]
        if tool == "propose_queries":
            return httpx2.Response(200, json=message(tool, {"queries": [
                "single pass softmax running maximum", "warp shuffle reduction softmax",
                "vectorised float4 loads memory bound"], "rationale": "open questions"}))
        if tool == "choose_gate":
            return httpx2.Response(200, json=message(tool, {"decision": self.gate_decision, "reason": "scripted"}))
        assert tool == "submit_forecasts"
        self.rounds += 1
        docs = documents_in(body)
        if self.scoring_reply is not None:
            return httpx2.Response(200, json=self.scoring_reply(body, docs))
        rows: list = [{"document_id": d["id"], "predicted_score": self.forecaster(d), "why": "scripted"} for d in docs]
        if self.garbage:
            rows = [
                {"document_id": docs[0]["id"], "predicted_score": "very high", "why": "string"},
                {"document_id": "doc_does_not_exist", "predicted_score": 2.0, "why": "unknown"},
                {"document_id": docs[-1]["id"], "predicted_score": 1e30, "why": "out of range"},
                "not even an object",
                {"document_id": docs[1]["id"] if len(docs) > 1 else docs[0]["id"], "predicted_score": float("nan")},
                {"predicted_score": 2.0},
                *rows[1:],
            ]
        return httpx2.Response(200, content=json.dumps(message(tool, {
            "forecasts": rows,
            "knowledge_state": {"known": ["softmax is memory bound"],
                                "learned": [f"round {self.rounds}: single-pass softmax looks best"],
                                "open_questions": ["how to combine per-warp maxima"]},
            "next_queries": [f"combine per-warp maxima rescaling round {self.rounds}",
                             f"fused normalisation softmax kernel round {self.rounds}",
                             f"expf fast math accuracy softmax round {self.rounds}"],
        }), allow_nan=True).encode(), headers={"content-type": "application/json"})

    @property
    def transport(self) -> httpx2.MockTransport:
        return httpx2.MockTransport(self.handler)
