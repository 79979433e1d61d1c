"""Price table, transcript pricing, and costs recorded per role and version."""

from __future__ import annotations

import json

import pytest

from evoteam.servers.team.cost import (
    PriceTable,
    load_price_table,
    price_transcript,
    record_cost_as,
    record_transcript_cost,
)


def write_transcript(path, entries):
    path.write_text("\n".join(json.dumps(e) for e in entries) + "\nnot json\n")
    return path


def assistant(mid, model, **usage):
    return {"type": "assistant", "message": {"id": mid, "model": model, "role": "assistant", "usage": usage,
                                             "content": [{"type": "text", "text": "x"}]}}


def test_transcript_is_priced_once_per_message(tmp_path):
    path = write_transcript(tmp_path / "t.jsonl", [
        {"type": "user", "message": {"role": "user", "content": "go"}},
        assistant("m1", "claude-sonnet-4-5-20250929", input_tokens=1000, output_tokens=10),
        # the same message streamed as a second entry: counted once, with its last usage
        assistant("m1", "claude-sonnet-4-5-20250929", input_tokens=1000, output_tokens=500),
        assistant("m2", "claude-haiku-4-5", input_tokens=2000, output_tokens=1000,
                  cache_read_input_tokens=10_000, cache_creation_input_tokens=1000),
        assistant("m3", "<synthetic>", input_tokens=99999, output_tokens=99999),
    ])
    record = price_transcript(path)
    sonnet = (1000 * 3 + 500 * 15) / 1e6
    haiku = (2000 * 1 + 1000 * 5 + 10_000 * 0.1 + 1000 * 1.25) / 1e6
    assert record.usd == pytest.approx(sonnet + haiku)
    assert record.messages == 2 and record.output_tokens == 1500
    assert record.priced_with == "claude-haiku-4-5, claude-sonnet"


def test_unknown_model_uses_default_and_says_so():
    key, price = PriceTable().lookup("mystery-model-9")
    assert key == "default" and price.input > 0


def test_price_overrides(tmp_path, monkeypatch):
    (tmp_path / "evoteam.toml").write_text('[prices."claude-sonnet"]\ninput = 1.0\noutput = 2.0\n')
    prices_json = tmp_path / "p.json"
    prices_json.write_text(json.dumps({"prices": {"my-model": {"input": 10, "output": 20}}}))
    table = load_price_table(env={"EVOTEAM_PRICES": str(prices_json)}, cwd=tmp_path)
    assert table.lookup("claude-sonnet-4-5")[1].output == 2.0
    assert table.lookup("my-model-x")[0] == "my-model"


async def test_costs_are_recorded_per_role_and_version(kb, run, tmp_path):
    path = write_transcript(tmp_path / "agent-1.jsonl", [assistant("m1", "claude-opus-4-5", input_tokens=100_000,
                                                                   output_tokens=10_000)])
    record, entry = await record_transcript_cost(kb, run.id, path, role="Scout", team_version=1)
    assert record.usd == pytest.approx(0.75)
    assert (entry.provenance.role, entry.provenance.team_version, entry.source) == ("Scout", 1, "transcript")
    again, _ = await record_transcript_cost(kb, run.id, path, role="Scout", team_version=1)  # hook fired twice
    await record_cost_as(kb, run.id, 0.25, "sdk_result", role="supervisor", team_version=None)
    spend = await kb.spend(run.id)
    assert spend.spent_usd == pytest.approx(1.0)
    assert {(line.role, line.team_version): line.usd for line in spend.lines} == {
        ("supervisor", None): pytest.approx(0.25), ("Scout", 1): pytest.approx(0.75)}
    assert kb.actor.role is None  # recording as a role never changes the caller's actor
