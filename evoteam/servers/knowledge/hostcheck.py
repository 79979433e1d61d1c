"""Exact Host and Origin allow-lists for the shared server.

The MCP SDK treats an entry `name:*` as a prefix (`name:` followed by anything), so
`localhost:8765.evil.example` passed for `localhost:*`. Here `name:*` means `name:` followed by
a port number and nothing else, and every other entry must match whole (case-insensitive).
This check runs before the SDK's own.
"""

from __future__ import annotations

import re

from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

_PORT = re.compile(r"\d{1,5}")


def matches(value: str, patterns: list[str]) -> bool:
    value = value.strip().lower()
    for pattern in patterns:
        pattern = pattern.strip().lower()
        if pattern.endswith(":*"):
            base = pattern[:-1]
            if value.startswith(base) and _PORT.fullmatch(value[len(base):]):
                return True
        elif value == pattern:
            return True
    return False


class ExactHostOrigin:
    """ASGI middleware: refuse a request whose Host (421) or Origin (403) is not allowed exactly."""

    def __init__(self, app: ASGIApp, hosts: list[str], origins: list[str]):
        self.app, self.hosts, self.origins = app, hosts, origins

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
            host, origin = headers.get("host"), headers.get("origin")
            if host is None or not matches(host, self.hosts):
                await PlainTextResponse("Invalid Host header", status_code=421)(scope, receive, send)
                return
            if origin is not None and not matches(origin, self.origins):
                await PlainTextResponse("Invalid Origin header", status_code=403)(scope, receive, send)
                return
        await self.app(scope, receive, send)
