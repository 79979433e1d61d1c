"""Pieces every MCP server shares: turning store and domain errors into tool errors, and the
actor a stdio server writes as."""

from __future__ import annotations

import functools
import os
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

from mcp.server.mcpserver.exceptions import ResourceError, ToolError

from pydantic import ValidationError

from evoteam.config import Settings
from evoteam.errors import DomainError
from evoteam.servers.knowledge.errors import StoreError
from evoteam.servers.knowledge.store import Actor

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


def describe_validation(exc: ValidationError) -> str:
    """One line per bad field, without pydantic's URLs: what was wrong and where."""
    lines = []
    for err in exc.errors():
        where = ".".join(str(part) for part in err["loc"]) or "arguments"
        lines.append(f"{where}: {err['msg']}")
    return "invalid arguments: " + "; ".join(lines)


def resource_errors(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Report anticipated failures of a resource read as resource errors with their message."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await fn(*args, **kwargs)
        except (StoreError, DomainError) as exc:
            raise ResourceError(str(exc)) from exc

    return wrapper


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
