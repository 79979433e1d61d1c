"""The store protocol: evoteam's store services (services.py) carried over MCP.

A shared knowledge server serves two MCP endpoints: `/mcp`, the agent-facing tools, and
`/store`, one tool (`call`) through which the remote store invokes any method of a store
service. Identity still comes from the token.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import Field, ValidationError

from evoteam.servers.guard import EvoServer
from evoteam.errors import DomainError
from evoteam.servers.knowledge import errors
from evoteam.servers.knowledge.delegation import Identity
from evoteam.servers.knowledge.services import (
    CallError,
    CallResult,
    error_type,
    guard,
    method_signature,
    service_class,
    service_methods,
)
from evoteam.servers.knowledge.store import Actor, KnowledgeStore

TeamVersion = Annotated[int | None, Field(ge=0)]


Delegate = Callable[[Actor, str], Awaitable[Actor]]


def build_store_server(store: KnowledgeStore, actor_of: Callable[[Context], Actor],
                       delegate: Delegate | None = None) -> MCPServer:
    """The `/store` endpoint: one tool that runs a service method as the token's actor (or, for
    the evaluation service, as the holder of the token it forwards: delegation.py)."""
    server = EvoServer("knowledge-store", log_level="WARNING",
                       instructions="evoteam's store protocol, used by evoteam's own servers; agents use /mcp.")

    async def actor_for(ctx: Context, as_token: str | None) -> Actor:
        actor = actor_of(ctx)
        if as_token is None:
            return actor
        if delegate is None:
            raise errors.Forbidden("this server does not accept calls made for another token")
        return await delegate(actor, as_token)

    @server.tool()
    async def call(ctx: Context, method: str, args: dict[str, Any] | None = None, service: str = "knowledge",
                   role: str | None = None, team_version: TeamVersion = None,
                   as_token: str | None = None) -> CallResult:
        """Invoke one method of an evoteam store service (internal to evoteam)."""
        try:
            allowed = service_methods(service)
        except errors.StoreError as exc:
            return CallResult(error=CallError(type="Invalid", message=str(exc)))
        if method not in allowed:
            return CallResult(error=CallError(type="Invalid", message=f"unknown {service} method {method!r}"))
        try:
            actor = await actor_for(ctx, as_token)
        except errors.StoreError as exc:
            return CallResult(error=CallError(type=error_type(exc), message=str(exc)))
        actor = actor.model_copy(update={"role": role, "team_version": team_version})
        model, returns = method_signature(service, method)
        try:
            parsed = model(**(args or {}))
        except ValidationError as exc:
            return CallResult(error=CallError(type="Invalid", message=f"bad arguments for {method}: {exc}"))
        scoped = store.with_actor(actor)
        target = guard(scoped if service == "knowledge" else service_class(service)(scoped), service)
        try:
            value = await getattr(target, method)(**dict(parsed))
        except (errors.StoreError, DomainError) as exc:
            return CallResult(error=CallError(type=error_type(exc), message=str(exc)))
        return CallResult(result=returns.dump_python(value, mode="json"))

    @server.tool()
    async def identify(ctx: Context, token: str) -> CallResult:
        """Who holds `token` (user, project): for the evaluation service's own token check."""
        try:
            actor = await actor_for(ctx, token)
        except errors.StoreError as exc:
            return CallResult(error=CallError(type=error_type(exc), message=str(exc)))
        return CallResult(result=Identity(user=actor.user, project=actor.project).model_dump())

    return server
