"""The shared knowledge server over streamable HTTP, with bearer-token auth.

Two MCP endpoints share one app, one store and one token check: `/mcp` (agent tools) and
`/store` (the store protocol used by evoteam's other servers on remote hosts).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ipaddress
import json
import socket
import sys
from collections.abc import AsyncIterator

import click
import uvicorn
from mcp.server.auth.settings import AuthSettings
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.middleware import Middleware

from evoteam.config import Settings
from evoteam.servers.guard import AnswerUnreadableHTTP
from evoteam.servers.knowledge import mcp_sessions
from evoteam.servers.knowledge.auth import StoreTokenVerifier, count_active_tokens
from evoteam.servers.knowledge.delegation import acting_for
from evoteam.servers.knowledge.errors import StoreFailure
from evoteam.servers.knowledge.hostcheck import ExactHostOrigin
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.protocol import build_store_server
from evoteam.servers.knowledge.server import build_server, token_actor
from evoteam.servers.knowledge.store import Actor


def is_loopback(host: str) -> bool:
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        try:
            return all(ipaddress.ip_address(info[4][0]).is_loopback
                       for info in socket.getaddrinfo(host, None))
        except OSError:
            return False


def security_settings(host: str, port: int, allowed_hosts: list[str],
                      allowed_origins: list[str]) -> TransportSecuritySettings:
    """Host/Origin allow-lists: loopback always, the bound address, and what the operator adds."""
    hosts = ["127.0.0.1:*", "localhost:*", "[::1]:*", *allowed_hosts]
    # A browser's Origin must be this server's own page, not another local web app on another
    # port (port 0 means "any free port", unknown here: then any loopback port).
    any_port = "*" if port == 0 else str(port)
    origins = [f"{scheme}://{name}:{any_port}" for scheme in ("http", "https")
               for name in ("127.0.0.1", "localhost", "[::1]")] + list(allowed_origins)
    if not is_loopback(host) and host not in ("0.0.0.0", "::"):
        hosts.append(f"{host}:{port}")
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts,
                                     allowed_origins=origins)


class AnswerStoreFailure:
    """ASGI middleware: a store failure raised before any tool runs (the token check reads the
    database) is answered with status 503 and a JSON-RPC error that names the store and says to
    retry. Without it the caller gets a bare 500 and cannot tell a store that is restarting from a
    bug in the server.

    The caller has not been authenticated yet (its token is what could not be checked), so the
    answer names only the kind of store; the failure's own line, with the store's path or host
    and what to run, goes to the server's log for its operator."""

    def __init__(self, app, kind: str = "SQLite"):
        self.app = app
        self.public = (f"the knowledge server's {kind} store is unavailable right now, so your token could not "
                       f"be checked: retry shortly (the server's log says why)")

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = False

        async def tracked(message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except Exception as exc:  # noqa: BLE001 - only a store failure is answered; the rest re-raised
            failure = _store_failure(exc)
            if failure is None or started:
                raise
            print(f"evoteam: a request was answered 503: {failure}", file=sys.stderr, flush=True)
            body = json.dumps({"jsonrpc": "2.0", "id": None,
                               "error": {"code": -32603, "message": self.public}}).encode()
            await send({"type": "http.response.start", "status": 503,
                        "headers": [(b"content-type", b"application/json"), (b"retry-after", b"1"),
                                    (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})


def _store_failure(exc: BaseException) -> StoreFailure | None:
    """The StoreFailure in `exc`, also when a task group wrapped it."""
    if isinstance(exc, StoreFailure):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            if (found := _store_failure(inner)) is not None:
                return found
    return None


def live_pages(store: LocalKnowledgeStore, verifier: StoreTokenVerifier, default_project: str,
               secure_cookie: bool = False) -> list:
    """`/runs` and `/runs/{id}` (the live run reports) behind the same tokens; the app-wide exact
    Host/Origin check covers them like every other route. Served over TLS, the session cookie is
    marked Secure (never sent over plain HTTP)."""
    from evoteam.report.live import SESSION_SECONDS, dashboard_routes
    from evoteam.servers.knowledge.sessions import StoreSessions

    def to_actor(access) -> Actor:
        project = (access.claims or {}).get("project")
        return Actor(user=access.client_id, project=project, client="browser",
                     default_project=project or default_project)

    async def verify(token: str) -> Actor | None:
        access = await verifier.verify_token(token)
        return None if access is None else to_actor(access)

    # Sessions live in the store, so every replica of the server knows every browser's session.
    sessions = StoreSessions(store.db, verifier, to_actor, SESSION_SECONDS)
    return dashboard_routes(store, verify, secure_cookie=secure_cookie, sessions=sessions)


def build_http_app(settings: Settings, store: LocalKnowledgeStore, *, host: str = "127.0.0.1", port: int = 8765,
                   allowed_hosts: list[str] | None = None, allowed_origins: list[str] | None = None,
                   tls: bool = False) -> Starlette:
    """The ASGI app: both endpoints behind the same bearer-token check (``tls``: it is served
    over TLS, so its cookies are Secure)."""
    verifier = StoreTokenVerifier(store.db)
    default = Actor(user="anonymous", client="http", default_project=settings.project)
    resolve = token_actor(default)
    agent = build_server(settings, store, actor_resolver=resolve)
    protocol = build_store_server(store, resolve, delegate=functools.partial(acting_for, verifier))
    # Register auth on both servers; the SDK wires the bearer check and the auth context.
    auth = AuthSettings(issuer_url="http://127.0.0.1", resource_server_url=None)
    for server in (agent, protocol):
        server.settings.auth = auth
        server._token_verifier = verifier  # noqa: SLF001 - the constructor path needs a provider we do not have
    security = security_settings(host, port, allowed_hosts or [], allowed_origins or [])
    # On a database several servers share (PostgreSQL), no MCP session lives in one server's
    # memory: each request stands alone, so any replica behind a load balancer can answer it.
    # Elsewhere sessions are kept, bounded per token and reclaimed when idle (mcp_sessions.py).
    stateless = getattr(store.db, "dialect", "sqlite") == "postgres"
    common = dict(max_request_body_size=settings.max_request_bytes, transport_security=security, host=host,
                  stateless_http=stateless)
    if stateless:
        agent_app = agent.streamable_http_app(streamable_http_path="/mcp", **common)
        protocol_app = protocol.streamable_http_app(streamable_http_path="/store", **common)
    else:
        common["max_sessions"] = mcp_sessions.TOTAL
        agent_app = agent.streamable_http_app(streamable_http_path="/mcp",
                                              session_idle_timeout=mcp_sessions.AGENT_IDLE_S, **common)
        protocol_app = protocol.streamable_http_app(streamable_http_path="/store",
                                                    session_idle_timeout=mcp_sessions.STORE_IDLE_S, **common)
        for server in (agent, protocol):  # one token cannot fill an endpoint's sessions for everyone
            mcp_sessions.limit_per_token(server.session_manager)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with agent.session_manager.run(), protocol.session_manager.run():
            yield

    exact = Middleware(ExactHostOrigin, hosts=security.allowed_hosts, origins=security.allowed_origins)
    return Starlette(routes=[*agent_app.routes, *protocol_app.routes,
                             *live_pages(store, verifier, settings.project, secure_cookie=tls)],
                     middleware=[Middleware(AnswerStoreFailure, kind="PostgreSQL" if stateless else "SQLite"),
                                 exact, *agent_app.user_middleware,
                                 Middleware(AnswerUnreadableHTTP, max_body=settings.max_request_bytes)],
                     lifespan=lifespan)


def plain_http_warning(host: str) -> str | None:
    """The start-up warning for plain HTTP off loopback (tokens would cross the network in clear)."""
    if is_loopback(host):
        return None
    return (f"WARNING: serving plain HTTP on {host}: bearer tokens and the team's work cross the network "
            f"unencrypted. Pass --tls-cert/--tls-key, or put a TLS-terminating proxy in front and bind "
            f"127.0.0.1.")


async def serve_http_async(settings: Settings, host: str, port: int, allowed_hosts: list[str],
                           allowed_origins: list[str], ready: asyncio.Event | None = None,
                           tls_cert: str | None = None, tls_key: str | None = None) -> None:
    async with LocalKnowledgeStore.open(settings.db, Actor(user="server", client="http"),
                                        max_artifact_bytes=settings.max_artifact_bytes) as store:
        if await count_active_tokens(store.db) == 0:
            where = "off loopback" if not is_loopback(host) else "even on loopback"
            raise click.ClickException(
                f"refusing to serve HTTP {where} without tokens: make one with "
                f"`evoteam token add USER [--project P]`, then start the server again")
        if bool(tls_cert) != bool(tls_key):
            raise click.ClickException("TLS needs both --tls-cert and --tls-key")
        app = build_http_app(settings, store, host=host, port=port, allowed_hosts=allowed_hosts,
                             allowed_origins=allowed_origins, tls=bool(tls_cert))
        config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on",
                                ssl_certfile=tls_cert, ssl_keyfile=tls_key)
        server = uvicorn.Server(config)
        if not tls_cert and (warning := plain_http_warning(host)):
            click.echo(warning, err=True)
        scheme = "https" if tls_cert else "http"
        click.echo(f"evoteam knowledge server on {scheme}://{host}:{port}/mcp (store: {store.db.path}); "
                   f"live run pages at {scheme}://{host}:{port}/runs", err=True)
        await server.serve()


def run_http(settings: Settings, host: str, port: int, allowed_hosts: list[str], allowed_origins: list[str],
             tls_cert: str | None = None, tls_key: str | None = None) -> None:
    asyncio.run(serve_http_async(settings, host, port, allowed_hosts, allowed_origins, tls_cert=tls_cert,
                                 tls_key=tls_key))
