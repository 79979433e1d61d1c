"""A local, scripted stand-in for the Anthropic Messages API.

Claude Code honours ``ANTHROPIC_BASE_URL``; point it at :class:`ScriptedAPI` and the "model"
becomes a rule-based script. Each request is matched against the rules in order (first match
wins); the rule replies by *turn*: the number of assistant messages already in the request's
``messages`` (0 for the first call of a conversation, 1 after the first tool round trip, ...).

Requests that match no rule (Claude Code's side requests: title generation, quota probes,
haiku-model helpers) get a short default text reply, so they never break a run. Every request
is recorded in :attr:`ScriptedAPI.requests` for assertions.

Example::

    rules = [
        Rule(first_user="make a file", replies=[
            tool_use("Write", {"file_path": "/tmp/x", "content": "hi"}),
            "Done.",
        ]),
    ]
    with ScriptedAPI(rules) as api:
        run_print_session("make a file", base_url=api.base_url, home=tmp_path)
        assert api.conversation("make a file")[1].tool_results()[0]["is_error"] is False
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

log = logging.getLogger("tests.scripted_api")

DEFAULT_TEXT = "OK."

# --------------------------------------------------------------------------------------------
# Reply construction
# --------------------------------------------------------------------------------------------


def text(s: str) -> dict[str, Any]:
    """A text content block."""
    return {"type": "text", "text": s}


def tool_use(name: str, input: dict[str, Any] | None = None, id: str | None = None) -> dict[str, Any]:
    """A ``tool_use`` content block (id generated when not given)."""
    return {
        "type": "tool_use",
        "id": id or f"toolu_{uuid.uuid4().hex[:24]}",
        "name": name,
        "input": dict(input or {}),
    }


@dataclass
class Reply:
    """One assistant message. ``stop_reason`` defaults to ``tool_use`` when the reply has a
    tool_use block and ``end_turn`` otherwise. ``usage`` overrides the computed token counts."""

    content: list[dict[str, Any]]
    stop_reason: str | None = None
    usage: dict[str, int] | None = None

    def resolved_stop_reason(self) -> str:
        if self.stop_reason:
            return self.stop_reason
        return "tool_use" if any(b.get("type") == "tool_use" for b in self.content) else "end_turn"


# What a rule may give for one turn: a string (text), one block, a list of blocks/strings,
# a Reply, or a callable taking the RecordedRequest and returning any of those.
ReplySpec = Any


def to_reply(spec: ReplySpec, req: RecordedRequest | None = None) -> Reply:
    if callable(spec) and not isinstance(spec, (Reply, dict, str, list, tuple)):
        spec = spec(req)
    if isinstance(spec, Reply):
        # fresh tool_use ids each time a Reply object is served twice
        return Reply([_fresh(b) for b in spec.content], spec.stop_reason, spec.usage)
    if isinstance(spec, str):
        return Reply([text(spec)])
    if isinstance(spec, dict):
        return Reply([_fresh(spec)])
    if isinstance(spec, (list, tuple)):
        return Reply([text(b) if isinstance(b, str) else _fresh(b) for b in spec])
    raise TypeError(f"cannot turn {spec!r} into a reply")


def _fresh(block: dict[str, Any]) -> dict[str, Any]:
    block = dict(block)
    if block.get("type") == "tool_use" and not block.get("id"):
        block["id"] = f"toolu_{uuid.uuid4().hex[:24]}"
    return block


# --------------------------------------------------------------------------------------------
# Requests
# --------------------------------------------------------------------------------------------


def _block_text(content: Any) -> str:
    """Flatten a message ``content`` (string or list of blocks) to text (tool_result included)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for b in content:
        if isinstance(b, str):
            parts.append(b)
        elif b.get("type") == "text":
            parts.append(b.get("text", ""))
        elif b.get("type") == "tool_result":
            parts.append(_block_text(b.get("content")))
        elif b.get("type") == "tool_use":
            parts.append(json.dumps(b.get("input", {})))
    return "\n".join(parts)


@dataclass
class RecordedRequest:
    """One request the server received. ``body`` is the parsed JSON (``{}`` when not JSON)."""

    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    time: float = field(default_factory=time.time)
    rule: str | None = None  # name of the matched rule (None: default reply / not a message)
    turn: int = 0
    reply: Reply | None = None

    # -- views over a /v1/messages body --
    @property
    def is_message(self) -> bool:
        return self.path.rstrip("/").endswith("/v1/messages")

    @property
    def model(self) -> str:
        return self.body.get("model", "")

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.body.get("messages") or []

    @property
    def system_text(self) -> str:
        return _block_text(self.body.get("system"))

    @property
    def system_messages_text(self) -> str:
        """Text of ``role: "system"`` entries inside ``messages``. Claude Code 2.1.x puts the
        environment block, the agent list and SessionStart hook context there, not in ``system``."""
        return "\n".join(_block_text(m.get("content")) for m in self.messages if m.get("role") == "system")

    @property
    def first_user_text(self) -> str:
        for m in self.messages:
            if m.get("role") == "user":
                return _block_text(m.get("content"))
        return ""

    @property
    def last_user_text(self) -> str:
        for m in reversed(self.messages):
            if m.get("role") == "user":
                return _block_text(m.get("content"))
        return ""

    @property
    def all_text(self) -> str:
        """System prompt and every message flattened (handy for ``in`` assertions)."""
        return "\n".join([self.system_text] + [_block_text(m.get("content")) for m in self.messages])

    @property
    def tool_names(self) -> list[str]:
        return [t.get("name", "") for t in self.body.get("tools") or []]

    def tool(self, name: str) -> dict[str, Any] | None:
        """The tool definition (name, description, input_schema) offered under ``name``."""
        for t in self.body.get("tools") or []:
            if t.get("name") == name:
                return t
        return None

    @property
    def assistant_turns(self) -> int:
        return sum(1 for m in self.messages if m.get("role") == "assistant")

    def tool_results(self) -> list[dict[str, Any]]:
        """Every tool_result block in the request, as ``{tool_use_id, is_error, text}``."""
        out = []
        for m in self.messages:
            if m.get("role") != "user" or isinstance(m.get("content"), str):
                continue
            for b in m.get("content") or []:
                if isinstance(b, dict) and b.get("type") == "tool_result":
                    out.append(
                        {
                            "tool_use_id": b.get("tool_use_id"),
                            "is_error": bool(b.get("is_error", False)),
                            "text": _block_text(b.get("content")),
                        }
                    )
        return out


# --------------------------------------------------------------------------------------------
# Rules
# --------------------------------------------------------------------------------------------


@dataclass
class Rule:
    """Match a conversation and script its assistant turns.

    All given criteria must hold: ``system`` (substring of the system prompt), ``first_user``
    (substring of the first user message, system-reminders included), ``match`` (predicate over
    the :class:`RecordedRequest`). ``replies[turn]`` answers; past the end, ``after`` answers
    (default: a short text, which ends the agent loop).

    ``needs_tools`` (default True) only matches requests that offer tools: Claude Code's side
    requests (title/summary generation, quota probes) carry none, while the main loop and
    subagents do. Set it to False to script tool-less requests.
    """

    replies: Sequence[ReplySpec] = ()
    system: str | None = None
    first_user: str | None = None
    match: Callable[[RecordedRequest], bool] | None = None
    name: str | None = None
    after: ReplySpec = DEFAULT_TEXT
    needs_tools: bool = True

    def __post_init__(self) -> None:
        if self.name is None:
            self.name = self.first_user or self.system or "rule"

    def matches(self, req: RecordedRequest) -> bool:
        if self.needs_tools and not req.body.get("tools"):
            return False
        if self.system is not None and self.system not in req.system_text:
            return False
        if self.first_user is not None and self.first_user not in req.first_user_text:
            return False
        if self.match is not None and not self.match(req):
            return False
        return True

    def reply_for(self, req: RecordedRequest) -> Reply:
        turn = req.assistant_turns
        spec = self.replies[turn] if turn < len(self.replies) else self.after
        return to_reply(spec, req)


# --------------------------------------------------------------------------------------------
# Server
# --------------------------------------------------------------------------------------------


def _estimate_tokens(obj: Any) -> int:
    return max(1, len(json.dumps(obj, ensure_ascii=False)) // 4)


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


class BackgroundServer:
    """Run an ASGI app with uvicorn on 127.0.0.1 (free port) in a daemon thread."""

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0) -> None:
        self.app = app
        self.host = host
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, port))
        self.port: int = self._sock.getsockname()[1]
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> str:
        config = uvicorn.Config(self.app, log_level="warning", lifespan="auto", access_log=False)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )
        self._thread.start()
        deadline = time.time() + 10
        while not self._server.started:
            if time.time() > deadline or not self._thread.is_alive():
                raise RuntimeError("background uvicorn server did not start")
            time.sleep(0.01)
        return self.url

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._sock.close()


class ScriptedAPI:
    """Scripted Anthropic Messages API on 127.0.0.1. Accepts any API key.

    ``rules``: list of :class:`Rule` (first match wins). ``default``: the reply for unmatched
    message requests. ``stream_delay``: seconds between SSE events (0 = as fast as possible).
    """

    def __init__(
        self,
        rules: Iterable[Rule] = (),
        default: ReplySpec = DEFAULT_TEXT,
        stream_delay: float = 0.0,
    ) -> None:
        self.rules: list[Rule] = list(rules)
        self.default = default
        self.stream_delay = stream_delay
        self.requests: list[RecordedRequest] = []
        self.unknown_paths: list[str] = []
        self._lock = threading.Lock()
        self._server = BackgroundServer(self._app())

    # -- lifecycle --
    @property
    def base_url(self) -> str:
        return self._server.url

    def start(self) -> str:
        return self._server.start()

    def stop(self) -> None:
        self._server.stop()

    def __enter__(self) -> ScriptedAPI:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def add(self, *rules: Rule) -> None:
        """Append rules (may be called while the server runs)."""
        with self._lock:
            self.rules.extend(rules)

    # -- views over the recorded requests --
    @property
    def message_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.is_message and r.method == "POST"]

    def matched(self, rule_name: str) -> list[RecordedRequest]:
        """Requests answered by the rule called ``rule_name``, in order (turn 0, 1, ...)."""
        return [r for r in self.message_requests if r.rule == rule_name]

    def conversation(self, first_user: str) -> list[RecordedRequest]:
        """Tool-bearing message requests whose first user message contains ``first_user``."""
        return [
            r
            for r in self.message_requests
            if r.body.get("tools") and first_user in r.first_user_text
        ]

    def dump(self) -> str:
        """A readable summary of every request (for failure messages)."""
        lines = []
        for i, r in enumerate(self.requests):
            if r.is_message:
                lines.append(
                    f"#{i} {r.method} {r.path} model={r.model} tools={len(r.body.get('tools') or [])} "
                    f"turn={r.turn} rule={r.rule} first_user={r.first_user_text[:80]!r} "
                    f"reply={[b.get('name') or b.get('text', '')[:40] for b in (r.reply.content if r.reply else [])]}"
                )
            else:
                lines.append(f"#{i} {r.method} {r.path}")
        return "\n".join(lines)

    # -- app --
    def _app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/messages", self._messages, methods=["POST"]),
                Route("/v1/messages/count_tokens", self._count_tokens, methods=["POST"]),
                Route("/{path:path}", self._other, methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"]),
            ]
        )

    async def _record(self, request: Request) -> RecordedRequest:
        raw = await request.body()
        try:
            body = json.loads(raw) if raw else {}
            if not isinstance(body, dict):
                body = {"_": body}
        except ValueError:
            body = {}
        rec = RecordedRequest(request.method, request.url.path, dict(request.headers), body)
        with self._lock:
            self.requests.append(rec)
        return rec

    def _choose(self, rec: RecordedRequest) -> Reply:
        with self._lock:
            rules = list(self.rules)
        rec.turn = rec.assistant_turns
        for rule in rules:
            try:
                hit = rule.matches(rec)
            except Exception:  # a broken predicate must not break the server
                log.exception("rule %s predicate failed", rule.name)
                hit = False
            if hit:
                rec.rule = rule.name
                return rule.reply_for(rec)
        return to_reply(self.default, rec)

    async def _messages(self, request: Request) -> Response:
        rec = await self._record(request)
        try:
            reply = self._choose(rec)
        except Exception as e:  # script error: answer with the error text so the run ends
            log.exception("script failed")
            reply = Reply([text(f"[scripted_api error: {e!r}]")])
        rec.reply = reply
        model = rec.model or "claude-sonnet-4-5"
        msg_id = f"msg_{uuid.uuid4().hex[:24]}"
        usage_in = _estimate_tokens(rec.body.get("messages")) + _estimate_tokens(rec.body.get("system"))
        usage_out = _estimate_tokens(reply.content)
        usage = {
            "input_tokens": usage_in,
            "output_tokens": usage_out,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        }
        if reply.usage:
            usage.update(reply.usage)
        stop_reason = reply.resolved_stop_reason()

        if not rec.body.get("stream"):
            return JSONResponse(
                {
                    "id": msg_id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": reply.content,
                    "stop_reason": stop_reason,
                    "stop_sequence": None,
                    "usage": usage,
                },
                headers={"request-id": f"req_{uuid.uuid4().hex[:16]}"},
            )

        delay = self.stream_delay

        async def events():
            import asyncio

            async def pause():
                if delay:
                    await asyncio.sleep(delay)

            start_usage = dict(usage, output_tokens=1)
            yield _sse(
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": msg_id,
                        "type": "message",
                        "role": "assistant",
                        "model": model,
                        "content": [],
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": start_usage,
                    },
                },
            )
            for i, block in enumerate(reply.content):
                await pause()
                if block.get("type") == "tool_use":
                    start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
                    yield _sse("content_block_start", {"type": "content_block_start", "index": i, "content_block": start})
                    yield _sse(
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": i,
                            "delta": {"type": "input_json_delta", "partial_json": json.dumps(block.get("input", {}))},
                        },
                    )
                elif block.get("type") == "text":
                    yield _sse(
                        "content_block_start",
                        {"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}},
                    )
                    yield _sse(
                        "content_block_delta",
                        {"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": block.get("text", "")}},
                    )
                else:  # anything else: send whole
                    yield _sse("content_block_start", {"type": "content_block_start", "index": i, "content_block": block})
                yield _sse("content_block_stop", {"type": "content_block_stop", "index": i})
            await pause()
            yield _sse(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                    "usage": {"output_tokens": usage["output_tokens"]},
                },
            )
            yield _sse("message_stop", {"type": "message_stop"})

        return StreamingResponse(
            events(),
            media_type="text/event-stream",
            headers={"cache-control": "no-cache", "request-id": f"req_{uuid.uuid4().hex[:16]}"},
        )

    async def _count_tokens(self, request: Request) -> Response:
        rec = await self._record(request)
        n = _estimate_tokens(rec.body.get("messages")) + _estimate_tokens(rec.body.get("system")) + _estimate_tokens(
            rec.body.get("tools")
        )
        return JSONResponse({"input_tokens": n})

    async def _other(self, request: Request) -> Response:
        rec = await self._record(request)
        log.warning("scripted_api: unhandled %s %s", rec.method, rec.path)
        with self._lock:
            self.unknown_paths.append(f"{rec.method} {rec.path}")
        return JSONResponse({"type": "error", "error": {"type": "not_found_error", "message": "not scripted"}}, status_code=404)
