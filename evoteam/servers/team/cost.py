"""Cost accounting: a configurable price table, pricing of Claude Code transcripts (in-session
subagents), and recording costs in the store under the role and team version that spent them.

Headless roles report their cost themselves (the SDK's `ResultMessage.total_cost_usd`); an
in-session subagent has only its transcript, whose assistant entries carry token usage. The
SubagentStop hook prices that transcript with `record_transcript_cost`.

Price table: USD per million tokens, per model. The built-in table below can be overridden by
a JSON or TOML file named by `EVOTEAM_PRICES`, or by a `[prices]` table in `evoteam.toml`, e.g.

    [prices."claude-sonnet-4-5"]
    input = 3.0
    output = 15.0
    cache_write = 3.75
    cache_read = 0.30

Model keys match by longest prefix of the model id ("claude-sonnet-4-5-20250929" uses
"claude-sonnet-4-5", then "claude-sonnet", ...); an unknown model is priced with "default"
and the record says so.
"""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import Field

from evoteam.servers.knowledge.models import BaseModel, CostCreate, CostEntry  # BaseModel: built on first use
from evoteam.servers.knowledge.store import KnowledgeStore
from evoteam.servers.team.models import CostRecord


class ModelPrice(BaseModel):
    """USD per million tokens."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_write: float | None = Field(default=None, ge=0, description="default: 1.25 x input")
    cache_read: float | None = Field(default=None, ge=0, description="default: 0.1 x input")

    def usd(self, input_tokens: int, output_tokens: int, cache_write_tokens: int, cache_read_tokens: int) -> float:
        cw = self.cache_write if self.cache_write is not None else 1.25 * self.input
        cr = self.cache_read if self.cache_read is not None else 0.1 * self.input
        return (input_tokens * self.input + output_tokens * self.output + cache_write_tokens * cw
                + cache_read_tokens * cr) / 1_000_000


# Published list prices (USD / MTok) as of writing; override them in evoteam.toml when they change.
DEFAULT_PRICES: dict[str, ModelPrice] = {
    "claude-opus-4-5": ModelPrice(input=5.0, output=25.0),
    "claude-opus-4-6": ModelPrice(input=5.0, output=25.0),
    "claude-opus-4-1": ModelPrice(input=15.0, output=75.0),
    "claude-opus-4": ModelPrice(input=15.0, output=75.0),
    "claude-opus": ModelPrice(input=5.0, output=25.0),
    "claude-sonnet": ModelPrice(input=3.0, output=15.0),
    "claude-3-7-sonnet": ModelPrice(input=3.0, output=15.0),
    "claude-haiku-4-5": ModelPrice(input=1.0, output=5.0),
    "claude-haiku": ModelPrice(input=1.0, output=5.0),
    "claude-3-5-haiku": ModelPrice(input=0.8, output=4.0),
    "opus": ModelPrice(input=5.0, output=25.0),
    "sonnet": ModelPrice(input=3.0, output=15.0),
    "haiku": ModelPrice(input=1.0, output=5.0),
    "gpt-5": ModelPrice(input=1.25, output=10.0, cache_read=0.125, cache_write=1.25),
    "codex": ModelPrice(input=1.25, output=10.0, cache_read=0.125, cache_write=1.25),
    "default": ModelPrice(input=3.0, output=15.0),
}


class PriceTable(BaseModel):
    prices: dict[str, ModelPrice] = Field(default_factory=lambda: dict(DEFAULT_PRICES))

    def lookup(self, model: str | None) -> tuple[str, ModelPrice]:
        """The (key, price) for a model id: longest matching prefix, else 'default'."""
        name = (model or "").lower()
        best = None
        for key in self.prices:
            if key != "default" and name.startswith(key.lower()) and (best is None or len(key) > len(best)):
                best = key
        if best is None:
            return "default", self.prices.get("default", DEFAULT_PRICES["default"])
        return best, self.prices[best]

    def merged(self, overrides: Mapping[str, Any]) -> PriceTable:
        prices = dict(self.prices)
        for key, value in overrides.items():
            prices[key] = value if isinstance(value, ModelPrice) else ModelPrice(**value)
        return PriceTable(prices=prices)


def _read_overrides(path: Path) -> dict[str, Any]:
    text = path.read_text()
    data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    return data.get("prices", data)


def load_price_table(settings: Any = None, env: Mapping[str, str] | None = None,
                     cwd: Path | None = None) -> PriceTable:
    """The built-in table, overlaid by `settings.prices` (if the settings carry one), the
    `[prices]` table of the project's evoteam.toml, then the file named by EVOTEAM_PRICES."""
    env = os.environ if env is None else env
    table = PriceTable()
    extra = getattr(settings, "prices", None)
    if extra:
        table = table.merged(extra)
    start = cwd or Path.cwd()
    for folder in [start, *start.parents]:
        config = folder / "evoteam.toml"
        if config.is_file():
            try:
                data = tomllib.loads(config.read_text())
            except (OSError, tomllib.TOMLDecodeError):
                break
            if isinstance(data.get("prices"), dict):
                table = table.merged(data["prices"])
            break
    if env.get("EVOTEAM_PRICES"):
        table = table.merged(_read_overrides(Path(env["EVOTEAM_PRICES"]).expanduser()))
    return table


# ---------------------------------------------------------------- transcripts


def _usage_of(entry: dict[str, Any]) -> tuple[str | None, str | None, dict[str, Any] | None]:
    """(message id, model, usage) of an assistant transcript entry, else Nones."""
    message = entry.get("message") if isinstance(entry.get("message"), dict) else None
    if entry.get("type") != "assistant" or message is None:
        return None, None, None
    usage = message.get("usage")
    if not isinstance(usage, dict):
        return None, None, None
    return message.get("id") or entry.get("uuid"), message.get("model"), usage


def transcript_usage(path: str | Path, main_only: bool = False) -> list[tuple[str | None, dict[str, Any]]]:
    """(model, usage) per assistant message of a Claude Code JSONL transcript. A message
    streamed as several entries (one per content block) shares one id and is counted once,
    with its last-seen usage. Unreadable lines are skipped."""
    seen: dict[str, tuple[str | None, dict[str, Any]]] = {}
    order: list[str] = []
    with Path(path).open(encoding="utf-8", errors="replace") as fh:
        for number, line in enumerate(fh):
            line = line.strip()
            if not line:
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue
            if not isinstance(entry, dict):
                continue
            if main_only and entry.get("isSidechain"):
                continue  # a subagent's message (older CLIs keep them in the main transcript)
            message_id, model, usage = _usage_of(entry)
            if usage is None or model == "<synthetic>":
                continue
            key = message_id or f"line{number}"
            if key not in seen:
                order.append(key)
            seen[key] = (model, usage)
    return [seen[k] for k in order]


def price_usage(items: list[tuple[str | None, dict[str, Any]]], prices: PriceTable | None = None) -> CostRecord:
    """Price a list of (model, usage) pairs."""
    prices = prices or PriceTable()
    total = 0.0
    counts = {"input_tokens": 0, "output_tokens": 0, "cache_creation_input_tokens": 0,
              "cache_read_input_tokens": 0}
    keys: set[str] = set()
    models: set[str] = set()
    for model, usage in items:
        n = {k: int(usage.get(k) or 0) for k in counts}
        key, price = prices.lookup(model)
        keys.add(key)
        if model:
            models.add(model)
        total += price.usd(n["input_tokens"], n["output_tokens"], n["cache_creation_input_tokens"],
                           n["cache_read_input_tokens"])
        for k in counts:
            counts[k] += n[k]
    return CostRecord(usd=round(total, 6), model=", ".join(sorted(models)) or None, messages=len(items),
                      priced_with=", ".join(sorted(keys)), **counts)


def find_transcript(session_id: str, env: Mapping[str, str] | None = None) -> Path | None:
    """The JSONL transcript Claude Code keeps for a session id (under CLAUDE_CONFIG_DIR or
    ~/.claude), or None."""
    env = os.environ if env is None else env
    base = Path(env["CLAUDE_CONFIG_DIR"]) if env.get("CLAUDE_CONFIG_DIR") else Path.home() / ".claude"
    if not session_id or "/" in session_id:
        return None
    return next(iter(sorted((base / "projects").glob(f"*/{session_id}.jsonl"))), None)


def price_transcript(path: str | Path, prices: PriceTable | None = None) -> CostRecord:
    """The cost of one Claude Code transcript (a subagent's `agent_transcript_path`)."""
    record = price_usage(transcript_usage(path), prices)
    record.detail = {"transcript": str(path)}
    return record


async def record_cost_as(store: KnowledgeStore, run_id: str, usd: float, source: str, *, role: str | None,
                         team_version: int | None, detail: dict[str, Any] | None = None,
                         idempotency_key: str | None = None) -> CostEntry:
    """Record money spent on a run, attributed to a role and team version."""
    actor = store.actor.model_copy(update={"role": role, "team_version": team_version})
    return await store.with_actor(actor).record_cost(CostCreate(
        run_id=run_id, usd=max(0.0, float(usd)), source=source, detail=detail or {},
        idempotency_key=idempotency_key))


def transcript_key(path: str | Path) -> str:
    """The idempotency key of a transcript's cost (its resolved path, hashed to fit)."""
    digest = hashlib.sha256(str(Path(path).resolve()).encode()).hexdigest()[:32]
    return f"transcript:{digest}"


async def record_transcript_cost(store: KnowledgeStore, run_id: str, transcript_path: str | Path, *,
                                 role: str | None, team_version: int | None,
                                 prices: PriceTable | None = None,
                                 idempotency_key: str | None = None) -> tuple[CostRecord, CostEntry]:
    """Price a subagent transcript and record it under (role, team_version). The default
    idempotency key is the transcript path, so a repeated hook call does not count twice."""
    record = price_transcript(transcript_path, prices)
    entry = await record_cost_as(
        store, run_id, record.usd, "transcript", role=role, team_version=team_version,
        detail={**record.model_dump(exclude={"detail", "usd"}), **record.detail},
        idempotency_key=idempotency_key or transcript_key(transcript_path))
    return record, entry


async def record_session_cost(store: KnowledgeStore, run_id: str, transcript_path: str | Path, *, role: str,
                              team_version: int | None, prices: PriceTable | None = None) -> float:
    """Count a growing session transcript (the in-session supervisor's own): price its main
    messages and record what was not counted yet under `role`. Returns the USD added."""
    items = transcript_usage(transcript_path, main_only=True)
    total = price_usage(items, prices).usd
    key = transcript_key(transcript_path)
    counted = sum(c.usd for c in await store.list_costs(run_id)
                  if c.source == "session_transcript" and c.detail.get("key") == key)
    delta = round(total - counted, 6)
    if delta <= 0:
        return 0.0
    await record_cost_as(store, run_id, delta, "session_transcript", role=role, team_version=team_version,
                         detail={"key": key, "transcript": str(transcript_path), "messages": len(items)},
                         idempotency_key=f"{key}:{len(items)}:{total:.6f}")
    return delta
