"""What an agent reads from evoteam's MCP servers, without the parts that tell it nothing.

Every character of a tool schema or a tool result is read by the model on every turn it stays
in context. Two sources of waste are removed here, once, for all four servers:

- Input schemas as pydantic writes them: a generated `title` on every property ("Run Id" for
  `run_id`) and, for each optional argument, `anyOf: [{type: X}, {type: null}]` plus
  `default: null`. An argument that may be left out says so by not being `required`; the schema
  keeps its type (unless an enum of strings already says it), description, value ranges and
  enums; size limits (maxLength, maxItems) are
  left to the server's refusal, and so is `additionalProperties: false`: the server refuses an
  argument a tool does not have, naming the ones it has (guard.py).
- Tool descriptions keep their docstring's source indentation; it is removed.
- Result text: pretty-printed JSON with every null and empty field, floats to 17 digits, and
  fields only programs use (a sandbox description, a kit's hash). The text block is written
  again as compact JSON without null, empty-string, empty-list and empty-object fields, floats
  to 7 significant digits, less the fields an output model lists in `TEXT_OMIT` and the range of a
  score from too few runs for a 95% interval (FEW_RUNS_RANGES);
  `structuredContent` keeps the whole object, as the output schema describes it, for programs.
"""

from __future__ import annotations

import inspect
import json
import math
from typing import Any

from evoteam.stats import EXACT_MIN_RUNS

# Size limits guard the server against oversized input; a caller never needs them to write a
# good call, and a refusal names the limit it broke. Value ranges (minimum/maximum) stay.
_LENGTH_LIMITS = ("maxLength", "minLength", "maxItems", "minItems")
# A model reads 1.106507 as well as 1.1065070918246214; programs read structuredContent. Seven,
# not five: a leaderboard's best known moves in the sixth (circle packing's 2.635983 read 2.636,
# above itself, and two erdos candidates 2.3e-7 apart both read 0.38122; model-play 2026-12-04).
SIGNIFICANT_DIGITS = 7
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUBSCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties")
_SUBSCHEMA_ONE = ("items", "additionalProperties", "not", "contains")


def compact_input_schema(schema: dict[str, Any] | None) -> dict[str, Any] | None:
    """The schema without generated titles, null alternatives and limits the server enforces."""
    if not isinstance(schema, dict):
        return schema
    return _compact_node(schema)


def _compact_node(node: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title" and isinstance(value, str):
            continue  # generated from the name; the name is already there
        if key in _LENGTH_LIMITS and isinstance(value, int):
            continue  # checked by the server, whose refusal names the limit
        if key == "additionalProperties" and value is False:
            continue  # the server refuses unknown arguments itself, naming the valid ones
        if key == "default" and value in ("", [], {}):
            continue  # "empty when left out" is what leaving an argument out means
        if key in _SUBSCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: _compact_node(sub) if isinstance(sub, dict) else sub for name, sub in value.items()}
        elif key in _SUBSCHEMA_LISTS and isinstance(value, list):
            out[key] = [_compact_node(sub) if isinstance(sub, dict) else sub for sub in value]
        elif key in _SUBSCHEMA_ONE and isinstance(value, dict):
            out[key] = _compact_node(value)
        else:
            out[key] = value
    enum = out.get("enum")
    if out.get("type") == "string" and isinstance(enum, list) and enum and all(isinstance(v, str) for v in enum):
        del out["type"]  # a list of strings to choose from says the type already
    return _drop_null_alternative(out)


def _drop_null_alternative(node: dict[str, Any]) -> dict[str, Any]:
    """`{anyOf: [X, {type: null}], default: null}` → X (with the node's description and limits):
    leaving the argument out is how a caller says null."""
    alternatives = node.get("anyOf")
    if not isinstance(alternatives, list) or "default" not in node or node["default"] is not None:
        return node
    rest = [a for a in alternatives if a != {"type": "null"}]
    if len(rest) == len(alternatives) or len(rest) != 1:
        return node
    merged = {k: v for k, v in node.items() if k not in ("anyOf", "default")}
    return {**rest[0], **merged}


def compact_description(text: str | None) -> str | None:
    """A docstring without the indentation and line wrapping of the source it was written in
    (paragraph breaks stay)."""
    if not text:
        return text
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(" ".join(p.split()) for p in paragraphs)


def pruned(value: Any) -> Any:
    """`value` without null, empty-string, empty-list or empty-object fields (at any depth);
    list items are kept where they are, so positions still mean something."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            item = pruned(item)
            if item is None or item == "" or item == [] or item == {}:
                continue
            out[key] = item
        return out
    if isinstance(value, list):
        return [pruned(item) for item in value]
    return value


def rounded(value: Any, digits: int = SIGNIFICANT_DIGITS) -> Any:
    """Floats at any depth to `digits` significant digits."""
    if isinstance(value, float):
        return float(f"{value:.{digits}g}") if math.isfinite(value) else value
    if isinstance(value, dict):
        return {key: rounded(item, digits) for key, item in value.items()}
    if isinstance(value, list):
        return [rounded(item, digits) for item in value]
    return value


def without(value: Any, paths: frozenset[str] | set[str]) -> Any:
    """`value` less the dotted paths ("sandbox", "metrics.kit_hash") a model marks as not for the text."""
    if not paths or not isinstance(value, dict):
        return value
    out = {}
    for key, item in value.items():
        if key in paths:
            continue
        inner = {p[len(key) + 1:] for p in paths if p.startswith(key + ".")}
        if inner and isinstance(item, list):  # "items.x": x of every entry
            out[key] = [without(entry, inner) for entry in item]
        else:
            out[key] = without(item, inner) if inner else item
    return out


# A score from too few runs for a 95% interval carries how many (`runs`, `best_runs`,
# `recorded_runs`); the range of those runs beside it, under an interval's name, read as a measured
# interval, and a single run's [x, x] as exact (model-plays 2026-12-04). The text leaves that range
# out; structuredContent keeps it.
FEW_RUNS_RANGES = {"runs": "score_interval", "best_runs": "best_interval", "recorded_runs": "recorded_interval",
                   "pooled_runs": "pooled_interval", "best_dev_runs": "best_dev_interval",
                   "best_heldout_runs": "best_heldout_interval"}


def without_few_runs_ranges(value: Any) -> Any:
    """`value` less each interval that sits beside a count of too few runs (FEW_RUNS_RANGES)."""
    if isinstance(value, dict):
        drop = {interval for runs, interval in FEW_RUNS_RANGES.items()
                if isinstance(value.get(runs), int) and not isinstance(value.get(runs), bool)
                and value[runs] < EXACT_MIN_RUNS}
        return {key: without_few_runs_ranges(item) for key, item in value.items() if key not in drop}
    if isinstance(value, list):
        return [without_few_runs_ranges(item) for item in value]
    return value


def compact_text(structured: Any, omit: frozenset[str] | set[str] = frozenset()) -> str:
    """The text block of a tool result: compact JSON of the structured content, pruned, floats
    rounded, less the fields its model keeps for programs (`TEXT_OMIT`) and the ranges of too
    few runs (FEW_RUNS_RANGES)."""
    return json.dumps(rounded(pruned(without_few_runs_ranges(without(structured, omit)))), ensure_ascii=False,
                      separators=(",", ":"))


def text_omit(model: Any, structured: Any = None) -> frozenset[str]:
    """The dotted fields an output model keeps out of its text (a `TEXT_OMIT` class attribute),
    plus those its `text_omit_for(structured)` classmethod leaves out of this one result."""
    omit = frozenset(getattr(model, "TEXT_OMIT", ()) or ())
    more = getattr(model, "text_omit_for", None)
    return omit | frozenset(more(structured)) if callable(more) and isinstance(structured, dict) else omit
