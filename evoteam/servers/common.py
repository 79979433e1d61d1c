"""Pieces every MCP server shares: turning store and domain errors into tool errors, and the
actor a stdio server writes as."""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import ParamSpec, TypeVar

from mcp.server.mcpserver.exceptions import ResourceError, ToolError

from pydantic import ValidationError

from evoteam.config import Settings
from evoteam.errors import DomainError
from evoteam.servers.guard import describe_validation
from evoteam.servers.knowledge.errors import StoreError
from evoteam.servers.knowledge.store import Actor, KnowledgeStore

P = ParamSpec("P")
R = TypeVar("R")


def tool_errors(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Report anticipated failures as tool errors (isError) carrying their own message."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await fn(*args, **kwargs)
        except (StoreError, DomainError) as exc:
            raise ToolError(str(exc)) from exc
        except ValidationError as exc:
            raise ToolError(describe_validation(exc)) from exc

    return wrapper


def resource_errors(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Report anticipated failures of a resource read as resource errors with their message."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await fn(*args, **kwargs)
        except (StoreError, DomainError) as exc:
            raise ResourceError(str(exc)) from exc

    return wrapper


class ServerStore:
    """The store an MCP server works on: the one it was given (tests, the HTTP app), or the
    configured one, opened for the server's lifetime by `lifespan`."""

    def __init__(self, settings: Settings, store: KnowledgeStore | None, client: str):
        self._settings, self._store, self._client = settings, store, client

    @contextlib.asynccontextmanager
    async def lifespan(self, _server) -> AsyncIterator[dict]:
        if self._store is not None:
            yield {}
            return
        from evoteam.servers.knowledge.connect import open_store

        async with open_store(self._settings, session_actor(self._settings, self._client), at_first_call=True) as opened:
            self._store = opened
            try:
                yield {}
            finally:
                self._store = None

    @property
    def store(self) -> KnowledgeStore:
        if self._store is None:
            raise DomainError("the server's knowledge store is not open yet")
        return self._store

    def scoped(self, role: str | None = None, team_version: int | None = None,
               actor: Actor | None = None) -> KnowledgeStore:
        """The store as `actor` (default: the store's own), with this call's role and team
        version when the caller gives them (provenance only, never identity)."""
        base = self.store
        actor = actor or base.actor
        update = {k: v for k, v in (("role", role), ("team_version", team_version)) if v is not None}
        if update:
            actor = actor.model_copy(update=update)
        return base if actor is base.actor else base.with_actor(actor)


def session_actor(settings: Settings, client: str) -> Actor:
    """The actor of a local (stdio) server: the OS account, plus the role and team version
    that a headless role session is started with (EVOTEAM_ROLE, EVOTEAM_TEAM_VERSION)."""
    version = os.environ.get("EVOTEAM_TEAM_VERSION")
    return Actor.local(
        client=client,
        default_project=settings.project,
        role=os.environ.get("EVOTEAM_ROLE") or None,
        team_version=int(version) if version and version.isdigit() else None,
    )
