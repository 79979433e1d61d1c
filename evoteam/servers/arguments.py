"""Tool arguments as the caller sent them, within bounds, before a tool sees them.

Two things the MCP SDK does not do for us:

- It parses a string argument as JSON whenever the parameter is not exactly ``str`` (``str |
  None`` included), so ``record_candidate(code='{"name": ...}')`` (a FlashInfer-Bench Solution)
  or ``put_artifact(text='[1, 2]')`` arrived as a dict or a list and was refused, and ``'null'``
  became None. A parameter that accepts a string keeps the string it was given.
- Nothing bounds what reaches the store: an integer of 2**64 overflows SQLite (an internal
  error), a string of any size is accepted. Every integer must fit in 64 bits, every string is
  capped, and nesting is bounded, whatever the tool.
"""

from __future__ import annotations

import types
import typing
from typing import Any

from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata

MAX_STRING = 8 * 1024 * 1024  # characters in one string argument (a candidate's code, an artifact's text)
MAX_DEPTH = 32
INT_RANGE = (-(2**63), 2**63 - 1)


def accepts_str(annotation: Any) -> bool:
    """The parameter's type admits a plain string (``str``, ``str | None``, ``Annotated[str, ...]``)."""
    if annotation is str:
        return True
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return accepts_str(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return any(accepts_str(a) for a in typing.get_args(annotation))
    return False


class KeepStrings(FuncMetadata):
    """``FuncMetadata`` that leaves a string alone where the parameter accepts a string."""

    def pre_parse_json(self, data: dict[str, Any]) -> dict[str, Any]:
        keep = {}
        for name, field in self.arg_model.model_fields.items():
            for key in {name, field.alias} - {None}:
                if isinstance(data.get(key), str) and accepts_str(field.annotation):
                    keep[key] = data[key]
        out = super().pre_parse_json(data)
        out.update(keep)
        return out


def keep_strings(tool: Any) -> None:
    """Give a registered tool the string-keeping pre-parse (once)."""
    meta = tool.fn_metadata
    if type(meta) is FuncMetadata:
        tool.fn_metadata = KeepStrings.model_construct(**{k: getattr(meta, k) for k in type(meta).model_fields})


def out_of_bounds(arguments: dict[str, Any]) -> str | None:
    """Why the arguments are out of bounds (one line naming the field), or None."""
    stack: list[tuple[Any, str, int]] = [(v, str(k), 1) for k, v in arguments.items()]
    while stack:
        value, where, depth = stack.pop()
        if depth > MAX_DEPTH:
            return f"{where}: nested more than {MAX_DEPTH} levels deep"
        if isinstance(value, bool):
            continue
        if isinstance(value, int) and not INT_RANGE[0] <= value <= INT_RANGE[1]:
            return f"{where}: integer out of range (it must fit in 64 bits)"
        if isinstance(value, str) and len(value) > MAX_STRING:
            return f"{where}: {len(value)} characters; the limit is {MAX_STRING}"
        if isinstance(value, dict):
            stack.extend((v, f"{where}.{k}", depth + 1) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value))
    return None
