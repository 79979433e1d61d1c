"""A local, scripted stand-in for an OpenAI-compatible chat-completions endpoint (loopback only).

Scaffolds such as OpenEvolve talk to ``POST {base_url}/chat/completions``. :class:`ScriptedChat`
answers each request with ``handler(body)`` — a string (the assistant's text) or a dict
``{"tool": name, "arguments": {...}}`` (a function call) — and records every request body in
:attr:`ScriptedChat.requests`. No streaming; any API key is accepted.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.support.scripted_api import BackgroundServer

Handler = Callable[[dict[str, Any]], "str | dict[str, Any]"]


def _completion(model: str, reply: str | dict[str, Any], prompt_chars: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": None}
    if isinstance(reply, dict):
        message["tool_calls"] = [{"id": f"call_{uuid.uuid4().hex[:12]}", "type": "function",
                                  "function": {"name": reply["tool"], "arguments": json.dumps(reply["arguments"])}}]
        finish = "tool_calls"
        out_chars = len(message["tool_calls"][0]["function"]["arguments"])
    else:
        message["content"] = reply
        finish = "stop"
        out_chars = len(reply)
    return {"id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion", "created": int(time.time()),
            "model": model, "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": max(1, prompt_chars // 4), "completion_tokens": max(1, out_chars // 4),
                      "total_tokens": max(1, prompt_chars // 4) + max(1, out_chars // 4)}}


class ScriptedChat:
    """Scripted chat completions on 127.0.0.1; ``base_url`` ends in ``/v1``."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._server = BackgroundServer(Starlette(routes=[
            Route("/v1/chat/completions", self._chat, methods=["POST"]),
            Route("/v1/models", self._models, methods=["GET"]),
        ]))

    @property
    def base_url(self) -> str:
        return self._server.url + "/v1"

    def __enter__(self) -> ScriptedChat:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop()

    async def _models(self, request: Request) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [{"id": "scripted-model", "object": "model"}]})

    async def _chat(self, request: Request) -> JSONResponse:
        body = await request.json()
        with self._lock:
            self.requests.append(body)
            try:
                reply = self.handler(body)
            except Exception as exc:  # a broken script is a test failure, reported as a 500
                return JSONResponse({"error": {"message": f"scripted handler failed: {exc!r}"}}, status_code=500)
        chars = sum(len(str(m.get("content") or "")) for m in body.get("messages", []))
        return JSONResponse(_completion(body.get("model", "scripted-model"), reply, chars))

    # -- helpers for assertions --
    def tool_requests(self, name: str) -> list[dict[str, Any]]:
        return [r for r in self.requests if (r.get("tool_choice") or {}).get("function", {}).get("name") == name]

    def plain_requests(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if not r.get("tools")]


def user_text(body: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content") or "") for m in body.get("messages", []) if m.get("role") == "user")
