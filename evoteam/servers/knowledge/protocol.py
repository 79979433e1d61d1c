"""The store protocol: the `KnowledgeStore` interface carried over MCP.

A shared knowledge server serves two MCP endpoints: `/mcp`, the agent-facing tools, and
`/store`, one tool (`call`) through which `RemoteKnowledgeStore` invokes any method of the
store interface. Arguments and results travel as the interface's own pydantic types, so the
remote store is the embedded one, method for method. Identity still comes from the token.
"""

from __future__ import annotations

import functools
import inspect
import typing
from typing import Annotated, Any

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, create_model

from evoteam.servers.knowledge import errors
from evoteam.servers.knowledge.store import Actor, KnowledgeStore

# The methods a remote caller may invoke: the abstract interface, nothing else (no import,
# no token administration).
STORE_METHODS = tuple(sorted(name for name in KnowledgeStore.__abstractmethods__ if name != "with_actor"))


TeamVersion = Annotated[int | None, Field(ge=0)]


class CallError(BaseModel):
    type: str
    message: str


class CallResult(BaseModel):
    """The outcome of one store call: `result` (JSON of the method's return type) or `error`."""

    result: Any = None
    error: CallError | None = None


@functools.cache
def method_signature(name: str) -> tuple[type[BaseModel], TypeAdapter]:
    """The argument model and return-type adapter of one interface method."""
    fn = getattr(KnowledgeStore, name)
    hints = typing.get_type_hints(fn)
    fields: dict[str, Any] = {}
    for param in list(inspect.signature(fn).parameters.values())[1:]:
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (hints[param.name], default)
    args_model = create_model(f"{name}_args", __config__=ConfigDict(extra="forbid"), **fields)
    return args_model, TypeAdapter(hints["return"])


def encode_args(name: str, args: tuple, kwargs: dict) -> dict[str, Any]:
    fn = getattr(KnowledgeStore, name)
    bound = inspect.signature(fn).bind(None, *args, **kwargs)
    bound.apply_defaults()
    values = dict(bound.arguments)
    values.pop("self")
    model, _ = method_signature(name)
    return model(**values).model_dump(mode="json")


_ERRORS = {cls.__name__: cls for cls in (errors.NotFound, errors.Invalid, errors.Forbidden, errors.TooLarge,
                                         errors.StoreError)}


def raise_call_error(error: CallError) -> typing.NoReturn:
    raise _ERRORS.get(error.type, errors.StoreError)(error.message)


def build_store_server(store: KnowledgeStore, actor_of: typing.Callable[[Context], Actor]) -> MCPServer:
    """The `/store` endpoint: one tool that runs an interface method as the token's actor."""
    server = MCPServer("knowledge-store", log_level="WARNING",
                       instructions="evoteam's store protocol, used by evoteam's own servers; agents use /mcp.")

    @server.tool()
    async def call(ctx: Context, method: str, args: dict[str, Any] | None = None,
                   role: str | None = None, team_version: TeamVersion = None) -> CallResult:
        """Invoke one method of the knowledge store interface (internal to evoteam)."""
        if method not in STORE_METHODS:
            return CallResult(error=CallError(type="Invalid", message=f"unknown store method {method!r}"))
        actor = actor_of(ctx).model_copy(update={"role": role, "team_version": team_version})
        model, returns = method_signature(method)
        try:
            parsed = model(**(args or {}))
        except ValidationError as exc:
            return CallResult(error=CallError(type="Invalid", message=f"bad arguments for {method}: {exc}"))
        try:
            value = await getattr(store.with_actor(actor), method)(**dict(parsed))
        except errors.StoreError as exc:
            return CallResult(error=CallError(type=type(exc).__name__, message=str(exc)))
        return CallResult(result=returns.dump_python(value, mode="json"))

    return server
