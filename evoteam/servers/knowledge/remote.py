"""`RemoteKnowledgeStore`: the store interface, served by a shared knowledge server.

Every method is forwarded through the server's `/store` endpoint (see protocol.py), so code
written against `KnowledgeStore` runs unchanged against a store on another host.
"""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import httpx2
from mcp import Client

from evoteam.errors import first_leaf
from evoteam.servers.knowledge.delegation import Identity
from evoteam.servers.knowledge.errors import StoreError, Unavailable
from evoteam.servers.knowledge.services import (
    CallResult,
    encode_args,
    method_signature,
    raise_call_error,
    service_class,
    service_methods,
)
from evoteam.servers.knowledge.store import Actor, KnowledgeStore


def store_endpoint(url: str) -> str:
    """The `/store` endpoint beside the agent endpoint a user configures (`.../mcp`)."""
    base = url.rstrip("/")
    if base.endswith("/mcp"):
        base = base[: -len("/mcp")]
    if base.endswith("/store"):
        return base
    return base + "/store"


class RemoteKnowledgeStore(KnowledgeStore):
    def __init__(self, client: Client, actor: Actor, as_token: str | None = None):
        self._client = client
        self.actor = actor
        # Set on the evaluation service's store: every call is made for this token's holder
        # (knowledge/delegation.py); the connection itself holds the service's verifier token.
        self._as_token = as_token

    @classmethod
    @asynccontextmanager
    async def connect(cls, url: str, token: str | None, actor: Actor,
                      timeout: float = 60.0) -> AsyncIterator[RemoteKnowledgeStore]:
        if not token:
            raise Unavailable("a shared knowledge server needs a token: set EVOTEAM_TOKEN "
                              "(made with `evoteam token add USER` on the server host)")
        endpoint = store_endpoint(url)
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                                  timeout=httpx2.Timeout(timeout, read=timeout * 5))
        try:
            async with AsyncExitStack() as stack:
                await stack.enter_async_context(http)
                await _preflight(http, endpoint)
                try:
                    client = await stack.enter_async_context(Client(_transport(endpoint, http)))
                except Exception as exc:  # the SDK raises exception groups around transport errors
                    raise Unavailable(f"cannot open an MCP session with {endpoint}: {first_leaf(exc)}") from None
                yield cls(client, actor)
        except BaseExceptionGroup as group:
            # The client's task group wraps what the caller's code raised (a NotFound, say);
            # hand back that one error, so callers catch it as they would from a local store.
            if len(group.exceptions) == 1 and not isinstance(sole := first_leaf(group), BaseExceptionGroup):
                raise sole from None
            raise

    def with_actor(self, actor: Actor) -> RemoteKnowledgeStore:
        return RemoteKnowledgeStore(self._client, actor, self._as_token)

    def acting_for(self, token: str) -> RemoteKnowledgeStore:
        """This store, every call made for the holder of `token` (needs a verifier token)."""
        return RemoteKnowledgeStore(self._client, self.actor, token)

    async def identify(self, token: str) -> Identity:
        """Who holds `token`; refused unless this store's own token is a verifier."""
        return Identity.model_validate(await self._outcome("identify", "identify", {"token": token}))

    async def _outcome(self, tool: str, method: str, arguments: dict) -> Any:
        result = await self._client.call_tool(tool, arguments)
        if result.is_error:
            text = " ".join(getattr(c, "text", "") for c in result.content)
            raise StoreError(f"knowledge server refused {method}: {text}")
        data = result.structured_content
        if data is None:  # older servers answer in text only
            data = json.loads(result.content[0].text)
        outcome = CallResult.model_validate(data)
        if outcome.error:
            raise_call_error(outcome.error)
        return outcome.result

    async def _call(self, method: str, args: tuple, kwargs: dict, service: str = "knowledge") -> Any:
        payload = encode_args(service, method, args, kwargs)
        arguments = {"service": service, "method": method, "args": payload, "role": self.actor.role,
                     "team_version": self.actor.team_version}
        if self._as_token is not None:
            arguments["as_token"] = self._as_token
        result = await self._outcome("call", method, arguments)
        _, returns = method_signature(service, method)
        return returns.validate_python(result)


async def _preflight(http: httpx2.AsyncClient, endpoint: str) -> None:
    """Turn the common set-up mistakes into plain messages before the MCP handshake."""
    try:
        # Only the status is read: a stateless server (replicas on PostgreSQL) answers this GET
        # with an event stream that stays open.
        async with http.stream("GET", endpoint, headers={"Accept": "text/event-stream"}) as response:
            pass
    except httpx2.HTTPError as exc:
        raise Unavailable(f"cannot reach the knowledge server at {endpoint}: {exc}") from None
    if response.status_code == 401:
        raise Unavailable(f"the knowledge server at {endpoint} refused the token: check EVOTEAM_TOKEN "
                          "(`evoteam token list` on the server host shows active tokens)")
    if response.status_code in (403, 421):
        raise Unavailable(f"the knowledge server at {endpoint} refused this host name: start it with "
                          "--allowed-host HOST:PORT for the name you connect with")
    if response.status_code == 404:
        raise Unavailable(f"no evoteam knowledge server at {endpoint}: check EVOTEAM_KNOWLEDGE_URL")



def _transport(url: str, http: httpx2.AsyncClient):
    from mcp.client.streamable_http import streamable_http_client

    return streamable_http_client(url, http_client=http)


def _forwarder(service: str, name: str, kb: Callable[[Any], RemoteKnowledgeStore]):
    async def method(self, *args, **kwargs):
        return await kb(self)._call(name, args, kwargs, service=service)

    method.__name__ = name
    method.__doc__ = getattr(service_class(service), name).__doc__
    return method


for _name in service_methods("knowledge"):
    setattr(RemoteKnowledgeStore, _name, _forwarder("knowledge", _name, lambda self: self))
RemoteKnowledgeStore.__abstractmethods__ = frozenset()


class RemoteComponent:
    """A component store (retrieval, team) whose methods run on the shared server."""

    def __init__(self, store: RemoteKnowledgeStore):
        self.store = store

    @property
    def actor(self) -> Actor:
        return self.store.actor


@functools.cache
def remote_component_class(service: str) -> type[RemoteComponent]:
    methods = {name: _forwarder(service, name, lambda self: self.store) for name in service_methods(service)}
    return type(f"Remote{service_class(service).__name__}", (RemoteComponent,), methods)
