"""A local, scripted stand-in for the OpenAI Responses API, for the real Codex CLI.

Codex talks to a custom provider (`model_providers.<id>.base_url`, `wire_api = "responses"`)
with `POST <base_url>/responses`, streaming server-sent events. Point it at
:class:`ScriptedResponses` and the "model" becomes a script: each request is matched against
the rules in order (first match wins) by the text of its first user message, and the rule
replies by *turn*, the number of tool calls already in the request's `input` (0 for the first
call, 1 after one tool round trip, ...). A reply is text or one or more function calls.

Replies may be callables `(request) -> reply`, so a step can use what an earlier tool
returned (a run id, a version). Every request is recorded for assertions.
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.support.scripted_api import BackgroundServer


@dataclass
class Call:
    """One function call the model makes (an MCP tool, `shell`, ...)."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    namespace: str | None = None


ReplyLike = str | Call | list[Call] | Callable[["Recorded"], "str | Call | list[Call]"]


@dataclass
class Rule:
    first_user: str                 # a substring of the conversation's first user message
    replies: Sequence[ReplyLike]    # by turn; the last one repeats


@dataclass
class Recorded:
    body: dict[str, Any]

    @property
    def input(self) -> list[dict[str, Any]]:
        return [i for i in self.body.get("input") or [] if isinstance(i, dict)]

    def user_texts(self) -> list[str]:
        out = []
        for item in self.input:
            if item.get("type", "message") == "message" and item.get("role") == "user":
                for part in item.get("content") or []:
                    if isinstance(part, dict) and part.get("type") in ("input_text", "text"):
                        out.append(part.get("text", ""))
        return out

    def turn(self) -> int:
        return sum(1 for i in self.input if i.get("type") in ("function_call", "custom_tool_call"))

    def outputs(self) -> list[str]:
        """The outputs of the tool calls so far, oldest first."""
        outs = []
        for i in self.input:
            if i.get("type") in ("function_call_output", "custom_tool_call_output"):
                out = i.get("output")
                if isinstance(out, list):
                    out = "".join(p.get("text", "") for p in out if isinstance(p, dict))
                elif isinstance(out, dict):
                    out = out.get("content") if isinstance(out.get("content"), str) else json.dumps(out)
                outs.append(str(out))
        return outs

    def tool_names(self) -> list[str]:
        names = []
        for t in self.body.get("tools") or []:
            names.append(t.get("name") or (t.get("function") or {}).get("name") or t.get("type", ""))
            names += [f"{t.get('name')}.{s.get('name')}" for s in t.get("tools") or [] if isinstance(s, dict)]
        return names


class ScriptedResponses:
    """Scripted Responses API on 127.0.0.1 (any API key). Unmatched requests get `default`."""

    def __init__(self, rules: Sequence[Rule] = (), default: str = "OK.") -> None:
        self.rules = list(rules)
        self.default = default
        self.requests: list[Recorded] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self.app = Starlette(routes=[
            Route("/v1/responses", self._responses, methods=["POST"]),
            Route("/v1/models", self._models, methods=["GET"]),
            Route("/v1/{rest:path}", self._other, methods=["GET", "POST"]),
        ])
        self._server = BackgroundServer(self.app)

    @property
    def base_url(self) -> str:
        return f"{self._server.url}/v1"

    def __enter__(self) -> ScriptedResponses:
        self._server.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.stop()

    def conversation(self, first_user: str) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests if any(first_user in t for t in r.user_texts())]

    def _pick(self, rec: Recorded) -> str | list[Call]:
        texts = rec.user_texts()
        for rule in self.rules:
            if any(rule.first_user in t for t in texts):
                reply = rule.replies[min(rec.turn(), len(rule.replies) - 1)]
                if callable(reply) and not isinstance(reply, Call):
                    reply = reply(rec)
                return [reply] if isinstance(reply, Call) else reply
        return self.default

    async def _models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [], "models": []})

    async def _other(self, request: Request) -> Response:
        with self._lock:
            self.errors.append(f"unscripted {request.method} {request.url.path}")
        return JSONResponse({"error": {"message": "not scripted"}}, status_code=404)

    async def _responses(self, request: Request) -> Response:
        raw = await request.body()
        try:
            body = json.loads(raw)
        except ValueError:  # codex may compress bodies; a test that needs them sets no compression
            body = {}
        rec = Recorded(body)
        with self._lock:
            self.requests.append(rec)
        try:
            reply = await asyncio.to_thread(self._pick, rec)  # a script may block (to stall a session)
        except Exception as exc:  # noqa: BLE001 - a broken script shows up as the model's text
            with self._lock:
                self.errors.append(repr(exc))
            reply = f"[scripted_responses error: {exc!r}]"
        return StreamingResponse(_events(reply, rec), media_type="text/event-stream",
                                 headers={"cache-control": "no-cache"})


def _sse(data: dict[str, Any]) -> bytes:
    return f"event: {data['type']}\ndata: {json.dumps(data)}\n\n".encode()


def _items(reply: str | list[Call]) -> list[dict[str, Any]]:
    if isinstance(reply, str):
        return [{"type": "message", "id": f"msg_{uuid.uuid4().hex[:16]}", "role": "assistant", "status": "completed",
                 "content": [{"type": "output_text", "text": reply, "annotations": []}]}]
    items = []
    for call in reply:
        item = {"type": "function_call", "id": f"fc_{uuid.uuid4().hex[:16]}", "call_id": f"call_{uuid.uuid4().hex[:16]}",
                "name": call.name, "arguments": json.dumps(call.arguments), "status": "completed"}
        if call.namespace:
            item["namespace"] = call.namespace
        items.append(item)
    return items


async def _events(reply: str | list[Call], rec: Recorded):
    response_id = f"resp_{uuid.uuid4().hex[:16]}"
    yield _sse({"type": "response.created", "response": {"id": response_id, "status": "in_progress"}})
    items = _items(reply)
    for index, item in enumerate(items):
        yield _sse({"type": "response.output_item.added", "output_index": index, "item": item})
        if item["type"] == "message":
            text = item["content"][0]["text"]
            yield _sse({"type": "response.output_text.delta", "output_index": index, "item_id": item["id"],
                        "content_index": 0, "delta": text})
        yield _sse({"type": "response.output_item.done", "output_index": index, "item": item})
    tokens_in = max(1, len(json.dumps(rec.body.get("input") or [])) // 4)
    tokens_out = max(1, len(json.dumps(items)) // 4)
    yield _sse({"type": "response.completed", "response": {
        "id": response_id, "status": "completed", "output": items,
        "usage": {"input_tokens": tokens_in, "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens": tokens_out, "output_tokens_details": {"reasoning_tokens": 0},
                  "total_tokens": tokens_in + tokens_out}}})
