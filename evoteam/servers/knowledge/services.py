"""Store services: the interfaces a shared knowledge server carries for evoteam's servers.

A shared knowledge server serves two MCP endpoints: `/mcp`, the agent-facing tools, and
`/store`, one tool (`call`) through which the remote store invokes any method of a store
*service*: the `KnowledgeStore` interface itself, and the component stores other servers keep
in the same database (retrieval's documents and forecasts, team versions and role sessions).
Arguments and results travel as the services' own pydantic types, so the remote store behaves
as the embedded one, method for method. Identity still comes from the token.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import typing
from typing import Any

from pydantic import BaseModel, ConfigDict, TypeAdapter, create_model

from evoteam.servers.knowledge import errors
from evoteam.servers.knowledge.scope import Guarded, declaration
from evoteam.servers.knowledge.store import KnowledgeStore

# service name -> "module:Class". A component class is built as Class(knowledge_store) and
# every public coroutine method it defines is callable remotely.
COMPONENT_SERVICES = {
    "retrieval": "evoteam.servers.retrieval.store:RetrievalStore",
    "team": "evoteam.servers.team.store:TeamStore",
}

@functools.cache
def service_class(service: str) -> type:
    if service == "knowledge":
        return KnowledgeStore
    target = COMPONENT_SERVICES.get(service)
    if target is None:
        raise errors.Invalid(f"unknown store service {service!r}")
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def _own_attributes(cls: type) -> dict[str, Any]:
    """The attributes a component class and its bases (a store split by concept) define."""
    out: dict[str, Any] = {}
    for klass in reversed(cls.__mro__[:-1]):  # object's are nobody's methods
        out.update(vars(klass))
    return out


@functools.cache
def service_methods(service: str) -> tuple[str, ...]:
    """The methods a remote caller may invoke: those declared with their scope (scope.py), and
    nothing else (no import, no token administration, no private helpers)."""
    cls = service_class(service)
    names = KnowledgeStore.__abstractmethods__ if cls is KnowledgeStore else _own_attributes(cls)
    return tuple(sorted(name for name in names if not name.startswith("_") and declaration(cls, name) is not None))


def undeclared_methods(service: str) -> list[str]:
    """Public coroutine methods of a service without a scope declaration (should be none)."""
    cls = service_class(service)
    names = KnowledgeStore.__abstractmethods__ - {"with_actor"} if cls is KnowledgeStore else [
        name for name, fn in _own_attributes(cls).items()
        if not name.startswith("_") and inspect.iscoroutinefunction(fn)]
    return sorted(name for name in names if declaration(cls, name) is None)


class CallError(BaseModel):
    type: str
    message: str


class CallResult(BaseModel):
    """The outcome of one store call: `result` (JSON of the method's return type) or `error`."""

    result: Any = None
    error: CallError | None = None


@functools.cache
def method_signature(service: str, name: str) -> tuple[type[BaseModel], TypeAdapter]:
    """The argument model and return-type adapter of one service method."""
    fn = getattr(service_class(service), name)
    hints = typing.get_type_hints(fn)
    fields: dict[str, Any] = {}
    for param in list(inspect.signature(fn).parameters.values())[1:]:
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (hints.get(param.name, Any), default)
    args_model = create_model(f"{service}_{name}_args", __config__=ConfigDict(extra="forbid"), **fields)
    return args_model, TypeAdapter(hints.get("return", Any))


def encode_args(service: str, name: str, args: tuple, kwargs: dict) -> dict[str, Any]:
    fn = getattr(service_class(service), name)
    bound = inspect.signature(fn).bind(None, *args, **kwargs)
    bound.apply_defaults()
    values = dict(bound.arguments)
    values.pop("self")
    model, _ = method_signature(service, name)
    return model(**values).model_dump(mode="json")


_ERRORS = {cls.__name__: cls for cls in (errors.NotFound, errors.Invalid, errors.Forbidden, errors.TooLarge,
                                         errors.StoreError)}


def raise_call_error(error: CallError) -> typing.NoReturn:
    raise _ERRORS.get(error.type, errors.StoreError)(error.message)


def error_type(exc: Exception) -> str:
    for cls in type(exc).__mro__:
        if cls.__name__ in _ERRORS:
            return cls.__name__
    return "StoreError"


def local_component(service: str, store: KnowledgeStore):
    """The component store `service` built directly on a local store."""
    return service_class(service)(store)


def guard(target: Any, service: str) -> Any:
    """`target` (a store service, as the caller's actor) as the caller may use it: unchanged for
    an unscoped caller (a local store is all its owner's), `Guarded` for a project-scoped one."""
    project, db = target.actor.project, getattr(target, "db", None)
    if project is None or db is None:  # unscoped, or a remote store: its server guards
        return target
    return Guarded(target, service_class(service), db, project)
