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

import anyio
import anyio.abc
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


class _Link:
    """The MCP session with the shared server's `/store` endpoint, held in a task of its own and
    opened again on the next call after the server went away: a server restarted mid-session
    ended the stdio server that held the session, for good (its transport's ConnectError left the
    session's task group and took the process with it; model-play 2026-12-04)."""

    def __init__(self, endpoint: str, http: httpx2.AsyncClient, tasks: anyio.abc.TaskGroup,
                 refused: str | None = None):
        self.endpoint, self.http, self.tasks = endpoint, http, tasks
        self.refused = refused  # a set-up mistake said on every call (a token no header can carry)
        self._client: Client | None = None
        self._stop: anyio.Event | None = None
        self._lock = anyio.Lock()

    async def client(self) -> Client:
        async with self._lock:
            if self._client is None:
                await self._open()
            assert self._client is not None
            return self._client

    async def _open(self) -> None:
        if self.refused:
            raise Unavailable(self.refused)
        await _preflight(self.http, self.endpoint)  # a plain reason (a refused token) on every (re)open
        ready, stop, held = anyio.Event(), anyio.Event(), {}

        async def hold() -> None:
            try:
                async with Client(_transport(self.endpoint, self.http)) as client:
                    held["client"] = client
                    ready.set()
                    await stop.wait()
            except Exception as exc:  # the transport's failure ends this session, not the process
                held.setdefault("error", exc)
            finally:
                if held.get("client") is not None and self._client is held["client"]:
                    self._client = None
                ready.set()

        self.tasks.start_soon(hold)
        await ready.wait()
        if "client" not in held or "error" in held:
            raise Unavailable(f"cannot open an MCP session with {self.endpoint}: {first_leaf(held.get('error'))}")
        self._client, self._stop = held["client"], stop

    def lost(self, client: Client) -> None:
        """The session a call was made on is gone: the next call opens another."""
        if self._client is client:
            self._client = None
            if self._stop is not None:
                self._stop.set()

    def close(self) -> None:
        if self._stop is not None:
            self._stop.set()


class RemoteKnowledgeStore(KnowledgeStore):
    def __init__(self, link: _Link, actor: Actor, as_token: str | None = None):
        self._link = link
        self.actor = actor
        # Set on the evaluation service's store: every call is made for this token's holder
        # (knowledge/delegation.py); the connection itself holds the service's verifier token.
        self._as_token = as_token

    @classmethod
    @asynccontextmanager
    async def connect(cls, url: str, token: str | None, actor: Actor, timeout: float = 60.0,
                      at_first_call: bool = False) -> AsyncIterator[RemoteKnowledgeStore]:
        """A store on the shared server at `url`. A command connects now and fails at once;
        ``at_first_call`` (an MCP server) connects at its first call instead, so a server that is
        down, or a token it refuses, is said to the agent by each tool (an MCP server that exited
        at start left the agent with no tools and no reason; review 2026-12-04), and one that comes
        up later is used without a restart."""
        token = (token or "").strip()
        refused = _token_problem(token)
        if refused and not at_first_call:
            raise Unavailable(refused)
        endpoint = store_endpoint(url)
        http = httpx2.AsyncClient(headers={} if refused else {"Authorization": f"Bearer {token}"},
                                  timeout=httpx2.Timeout(timeout, read=timeout * 5))
        try:
            async with AsyncExitStack() as stack:
                await stack.enter_async_context(http)
                tasks = await stack.enter_async_context(anyio.create_task_group())
                link = _Link(endpoint, http, tasks, refused)
                stack.callback(link.close)  # runs first: the session's task ends, the group closes
                if not at_first_call:
                    await link.client()  # opened now: a server that cannot be reached is said at the start
                yield cls(link, actor)
        except BaseExceptionGroup as group:
            # The task group wraps what the caller's code raised (a NotFound, say); hand back
            # that one error, so callers catch it as they would from a local store.
            if len(group.exceptions) == 1 and not isinstance(sole := first_leaf(group), BaseExceptionGroup):
                raise sole from None
            raise

    def with_actor(self, actor: Actor) -> RemoteKnowledgeStore:
        return RemoteKnowledgeStore(self._link, actor, self._as_token)

    def acting_for(self, token: str) -> RemoteKnowledgeStore:
        """This store, every call made for the holder of `token` (needs a verifier token)."""
        return RemoteKnowledgeStore(self._link, self.actor, token)

    async def identify(self, token: str) -> Identity:
        """Who holds `token`; refused unless this store's own token is a verifier."""
        return Identity.model_validate(await self._outcome("identify", "identify", {"token": token}))

    async def _outcome(self, tool: str, method: str, arguments: dict) -> Any:
        client = await self._link.client()
        try:
            result = await client.call_tool(tool, arguments)
        except Exception as exc:  # the session broke under the call: said, and opened again next time
            self._link.lost(client)
            raise Unavailable(f"lost the knowledge server at {self._link.endpoint} during {method}: "
                              f"{first_leaf(exc)}; the next call connects again") from None
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


def _token_problem(token: str) -> str | None:
    """Why `token` cannot be sent, or None: missing, or holding what no HTTP header may carry (a
    blank or pasted-with-a-line-break token gave the HTTP library's "Illegal header value")."""
    if not token:
        return ("a shared knowledge server needs a token: set EVOTEAM_TOKEN (made with `evoteam token add USER` "
                "on the server host)")
    if any(ch.isspace() or not ch.isprintable() or not ch.isascii() for ch in token):
        return ("EVOTEAM_TOKEN holds a space, a line break or another character no token has: set it to the "
                "token alone, as `evoteam token add` printed it")
    return None


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
                          "(`evoteam token list` on the server host shows active tokens; an MCP server reads it "
                          "when it starts: restart it after a change)")
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
