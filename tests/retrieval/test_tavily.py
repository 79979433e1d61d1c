"""The Tavily backend through an httpx MockTransport: normal results, 429 then success,
timeouts, bad and missing keys."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from evoteam.config import Settings
from evoteam.servers.retrieval.backends import BackendError, BackendSet, TavilyBackend, build_backends

RESULTS = {"query": "q", "results": [
    {"title": "Online softmax", "url": "https://example.org/online-softmax?utm_source=x", "content": "snippet",
     "raw_content": "The online softmax computes the max and the sum in one pass.", "score": 0.9},
    {"title": "Warp shuffles", "url": "https://example.org/warp", "content": "shuffle snippet", "score": 0.7},
    {"title": "no url"},
]}


class Recorder:
    def __init__(self, replies):
        self.replies = list(replies)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        reply = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        if isinstance(reply, Exception):
            raise reply
        return reply


def backend(recorder, key="tvly-test", retries=3):
    sleeps: list[float] = []

    async def sleep(s: float) -> None:
        sleeps.append(s)

    b = TavilyBackend(key, transport=httpx.MockTransport(recorder), retries=retries, backoff_s=0.5, sleep=sleep)
    return b, sleeps


async def test_normal_results_are_parsed_and_the_key_is_sent():
    rec = Recorder([httpx.Response(200, json=RESULTS)])
    b, sleeps = backend(rec)
    try:
        out = await b.search("online softmax", 5)
    finally:
        await b.aclose()
    assert [r.title for r in out] == ["Online softmax", "Warp shuffles"]
    assert out[0].content.startswith("The online softmax")  # raw content preferred over the snippet
    assert out[1].content == "shuffle snippet"
    assert all(r.backend == "tavily" for r in out)
    req = rec.requests[0]
    assert req.url.path == "/search" and req.headers["authorization"] == "Bearer tvly-test"
    body = json.loads(req.content)
    assert body["query"] == "online softmax" and body["max_results"] == 5
    assert sleeps == []


async def test_rate_limit_then_success_backs_off():
    rec = Recorder([httpx.Response(429, json={"detail": {"error": "slow down"}}),
                    httpx.Response(429, json={"detail": {"error": "slow down"}}),
                    httpx.Response(200, json=RESULTS)])
    b, sleeps = backend(rec)
    out = await b.search("q", 5)
    await b.aclose()
    assert len(out) == 2 and len(rec.requests) == 3
    assert len(sleeps) == 2 and sleeps[1] > sleeps[0] > 0  # exponential backoff


async def test_timeouts_are_retried_then_reported():
    rec = Recorder([httpx.ReadTimeout("slow"), httpx.Response(200, json=RESULTS)])
    b, sleeps = backend(rec)
    assert len(await b.search("q", 5)) == 2
    assert len(sleeps) == 1
    await b.aclose()

    always = Recorder([httpx.ReadTimeout("slow")])
    b, sleeps = backend(always, retries=2)
    with pytest.raises(BackendError, match="after 3 tries"):
        await b.search("q", 5)
    assert len(always.requests) == 3 and len(sleeps) == 2
    await b.aclose()


async def test_server_errors_are_retried():
    rec = Recorder([httpx.Response(503, text="busy"), httpx.Response(200, json=RESULTS)])
    b, _ = backend(rec)
    assert len(await b.search("q", 5)) == 2
    await b.aclose()


async def test_bad_key_fails_at_once_with_a_clear_message():
    rec = Recorder([httpx.Response(401, json={"detail": {"error": "Unauthorized"}})])
    b, sleeps = backend(rec)
    with pytest.raises(BackendError, match="rejected the API key.*TAVILY_API_KEY"):
        await b.search("q", 5)
    assert len(rec.requests) == 1 and sleeps == []
    await b.aclose()


async def test_missing_key_refuses_before_any_request():
    rec = Recorder([httpx.Response(200, json=RESULTS)])
    b, _ = backend(rec, key=None)
    with pytest.raises(BackendError, match="TAVILY_API_KEY"):
        await b.search("q", 5)
    assert rec.requests == []


async def test_settings_without_key_degrade_to_local_with_a_note(tmp_path: Path):
    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "a.md").write_text("# A\nonline softmax\n")
    found = build_backends(Settings(db=tmp_path / "k.db", corpus_dirs=[corpus], search_backends=["local", "tavily"]))
    assert found.names == ["local"]
    assert any("TAVILY_API_KEY" in n for n in found.notes)
    both = build_backends(Settings(db=tmp_path / "k.db", corpus_dirs=[corpus], tavily_api_key="tvly-x"),
                          tavily_transport=httpx.MockTransport(Recorder([httpx.Response(200, json=RESULTS)])))
    results, notes = await both.search("online softmax", 4)
    assert {r.backend for r in results} == {"local", "tavily"} and notes == []
    await both.aclose()
    await found.aclose()


async def test_a_failing_backend_becomes_a_note_when_another_answers(tmp_path: Path):
    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "a.md").write_text("# A\nonline softmax\n")
    from evoteam.servers.retrieval.backends import LocalBackend

    bad, _ = backend(Recorder([httpx.Response(401, json={})]))
    merged = BackendSet([LocalBackend([corpus]), bad])
    results, notes = await merged.search("softmax", 3)
    assert [r.backend for r in results] == ["local"]
    assert notes and "API key" in notes[0]
    await merged.aclose()
