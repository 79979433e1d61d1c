"""A tiny MCP server (mcp 2.x) for harness tests.

stdio:  ``python -m tests.support.demo_mcp_server`` (or by file path)
HTTP:   :func:`start_http_demo` runs it over streamable HTTP on 127.0.0.1 in a thread,
        optionally behind a bearer token checked by a ``TokenVerifier``.

Tool ``touch(path, text)`` writes ``text`` to ``path`` and says so, so a test can see it ran.
"""

from __future__ import annotations

import pathlib
import sys

from mcp.server import MCPServer


def make_server(token: str | None = None, resource_url: str | None = None) -> MCPServer:
    kwargs = {}
    if token is not None:
        from mcp.server.auth.provider import AccessToken
        from mcp.server.auth.settings import AuthSettings

        class StaticTokenVerifier:
            async def verify_token(self, t: str) -> AccessToken | None:
                if t == token:
                    return AccessToken(token=t, client_id="test", scopes=[])
                return None

        kwargs = dict(
            token_verifier=StaticTokenVerifier(),
            auth=AuthSettings(
                issuer_url="http://127.0.0.1", resource_server_url=resource_url, validate_token_resource=False
            ),
        )
    server = MCPServer("demo", log_level="WARNING", **kwargs)

    @server.tool()
    def touch(path: str, text: str = "hello") -> str:
        """Write text to a file and return a confirmation."""
        pathlib.Path(path).write_text(text)
        return f"wrote {len(text)} chars to {path}"

    return server


def start_http_demo(token: str | None = None):
    """Start the demo server over streamable HTTP; returns ``(BackgroundServer, url)``
    with url ``http://127.0.0.1:PORT/mcp``. Call ``.stop()`` on the first when done."""
    from tests.support.scripted_api import BackgroundServer

    # bind first so the resource URL can carry the real port
    holder = BackgroundServer(app=None)
    url = f"{holder.url}/mcp"
    server = make_server(token=token, resource_url=url if token else None)
    holder.app = server.streamable_http_app()
    holder.start()
    return holder, url


if __name__ == "__main__":
    make_server().run() if len(sys.argv) < 2 else make_server().run(sys.argv[1])
