"""The evaluation service: `evoteam bench serve --http`, the team's one bench whose scores rank.

Run beside the shared knowledge server, under its own account (or on its own host), with a
`--verifier` token in its own environment. Agents reach it through their `bench.evaluate` when
`EVOTEAM_BENCH_URL` is set (route.py), each with their own token. For every call the service:

1. checks the caller's token with the knowledge server (`identify` on `/store`; a short cache);
2. evaluates the candidate's source with its harness (sandboxed workers, its own device locks)
   and its held-out set — the secret lives in the service's state folder (or
   EVOTEAM_HELDOUT_KEY), so one service per store means one held-out set per store;
3. records the result through the knowledge server *for* the caller's token (as_token,
   knowledge/delegation.py): the candidate is the caller's, and verified.

The verifier token never leaves this process, and candidate workers get a scrubbed
environment (harness.py), so it never reaches candidate code either.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import AsyncIterator

from mcp.server import MCPServer
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import Context
from starlette.applications import Starlette
from starlette.middleware import Middleware

from evoteam.config import Settings
from evoteam.errors import DomainError
from evoteam.servers.bench.server import build_server
from evoteam.servers.guard import AnswerUnreadableHTTP
from evoteam.servers.knowledge.auth import TOKEN_PREFIX
from evoteam.servers.knowledge.delegation import SERVICE_CLIENT
from evoteam.servers.knowledge.errors import StoreError
from evoteam.servers.knowledge.hostcheck import ExactHostOrigin
from evoteam.servers.knowledge.remote import RemoteKnowledgeStore
from evoteam.servers.knowledge.store import Actor

DEFAULT_PORT = 8766
# How long a checked token is trusted without asking the knowledge server again: a revoked
# token stops working here within this time.
TOKEN_CACHE_S = 30.0


class CallerTokens:
    """The MCP SDK's TokenVerifier for the service: the knowledge server says who holds a token."""

    def __init__(self, store: RemoteKnowledgeStore, ttl_s: float = TOKEN_CACHE_S):
        self.store, self.ttl_s = store, ttl_s
        self._known: dict[str, tuple[float, AccessToken]] = {}

    async def verify_token(self, token: str) -> AccessToken | None:
        if not token.startswith(TOKEN_PREFIX) or len(token) > 200:
            return None
        key = hashlib.sha256(token.encode()).hexdigest()
        hit = self._known.get(key)
        if hit is not None and time.monotonic() - hit[0] < self.ttl_s:
            return hit[1]
        try:
            who = await self.store.identify(token)
        except StoreError:
            self._known.pop(key, None)
            return None
        access = AccessToken(token=token, client_id=who.user, scopes=[], subject=who.user,
                             claims={"project": who.project})
        self._known[key] = (time.monotonic(), access)
        return access


def build_service(settings: Settings, store: RemoteKnowledgeStore) -> MCPServer:
    """The bench MCP server whose every call records for the caller's token."""

    def caller_store(_ctx: Context) -> RemoteKnowledgeStore:
        access = get_access_token()
        if access is None:  # the auth middleware lets no request through without one
            raise DomainError("the evaluation service needs your token (EVOTEAM_TOKEN)")
        # The actor's user is the token's (checked by the knowledge server): it picks the
        # caller's own runs by default (route.py); the server takes identity from the token.
        return store.acting_for(access.token).with_actor(store.actor.model_copy(update={"user": access.client_id}))

    server = build_server(settings, store, caller_store=caller_store)
    server.settings.auth = AuthSettings(issuer_url="http://127.0.0.1", resource_server_url=None)
    server._token_verifier = CallerTokens(store)  # noqa: SLF001 - as the knowledge server's HTTP app does
    return server


def build_service_app(settings: Settings, store: RemoteKnowledgeStore, *, host: str = "127.0.0.1",
                      port: int = DEFAULT_PORT, allowed_hosts: list[str] | None = None,
                      allowed_origins: list[str] | None = None) -> Starlette:
    """The service's ASGI app: the bench tools at `/mcp`, behind the callers' own tokens."""
    from evoteam.servers.knowledge.http import security_settings

    server = build_service(settings, store)
    security = security_settings(host, port, allowed_hosts or [], allowed_origins or [])
    app = server.streamable_http_app(streamable_http_path="/mcp", host=host, transport_security=security,
                                     max_request_body_size=settings.max_request_bytes)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with server.session_manager.run():
            yield

    return Starlette(routes=list(app.routes),
                     middleware=[Middleware(ExactHostOrigin, hosts=security.allowed_hosts,
                                            origins=security.allowed_origins),
                                 *app.user_middleware,
                                 Middleware(AnswerUnreadableHTTP, max_body=settings.max_request_bytes)],
                     lifespan=lifespan)


NOT_A_VERIFIER = ("the evaluation service needs a verifier token of its own in EVOTEAM_TOKEN: on the knowledge "
                  "server's host run `evoteam token add bench --verifier [--project P]`, and keep it out of every "
                  "agent's environment")


async def serve_async(settings: Settings, host: str, port: int, allowed_hosts: list[str],
                      allowed_origins: list[str]) -> None:
    import click
    import uvicorn

    from evoteam.servers.knowledge.http import plain_http_warning

    if not settings.knowledge_url:
        raise click.ClickException("the evaluation service records in a shared knowledge server: pass "
                                   "--knowledge-url URL (or set EVOTEAM_KNOWLEDGE_URL)")
    if not settings.token:
        raise click.ClickException(NOT_A_VERIFIER)
    actor = Actor(user="bench-service", client=SERVICE_CLIENT, default_project=settings.project)
    try:
        async with RemoteKnowledgeStore.connect(settings.knowledge_url, settings.token, actor) as store:
            try:
                await store.identify(settings.token)  # only a verifier may identify tokens
            except StoreError:
                raise click.ClickException(NOT_A_VERIFIER) from None
            app = build_service_app(settings, store, host=host, port=port, allowed_hosts=allowed_hosts,
                                    allowed_origins=allowed_origins)
            if warning := plain_http_warning(host):
                click.echo(warning, err=True)
            click.echo(f"evoteam evaluation service on http://{host}:{port}/mcp, recording in "
                       f"{settings.knowledge_url}", err=True)
            config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
            await uvicorn.Server(config).serve()
    except StoreError as exc:
        raise click.ClickException(str(exc)) from None
