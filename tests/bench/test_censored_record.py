"""A measurement whose rounds the harness could not resolve is recorded with the same interval it
reported: the store pools by the bench's rule (stats.censored_score_estimate), so the interval
that ranks a candidate is never narrower than its measurement's."""

from __future__ import annotations

import pytest

from evoteam.servers.bench.evaluation.core import evaluate_candidate
from evoteam.servers.bench.measurement import timing

from tests.bench.test_timing_method import BASELINE_LIKE


async def test_an_unresolved_measurement_keeps_its_interval_in_the_store(fast_kit, fast_settings, store, monkeypatch):
    # Every net time below the resolution (as for a kernel far shorter than the call path's spread).
    monkeypatch.setattr(timing.Rounds, "resolution", property(lambda self: 10**9))
    e = await evaluate_candidate(fast_settings, str(fast_kit), code=BASELINE_LIKE, store=store)
    assert e.status == "PASSED" and e.sample_ranges, e.message
    assert e.score_interval[1] > 10  # what a kernel of 1 us could give: the interval says so
    assert e.n_measurements == 1 and e.candidate_interval == pytest.approx(e.score_interval)
    stored = await store.get_candidate(e.candidate_id)
    assert stored.score_interval == pytest.approx(e.score_interval)


def test_a_slots_reply_carries_the_ranges_back():
    """The pool and Ray backends return an evaluation as a slot runner's JSON line, where the
    samples and their ranges (left out of an agent's JSON) travel beside it: both must come back,
    or a slot's measurement is recorded with a narrower interval than its own."""
    from evoteam.servers.bench.models import Evaluation
    from evoteam.servers.bench.scheduling.jobs import SlotReply

    e = Evaluation(kit="k", kind="kernel", split="dev", status="PASSED", score=2.0, direction="maximize", passed=1,
                   total=1, workloads=[], samples={"w": [2.0, 2.0]}, sample_ranges={"w": ([1.0, 2.0], [2.0, 50.0])})
    line = SlotReply(ok=True, evaluation=e, samples=e.samples, sample_ranges=e.sample_ranges).model_dump_json()
    back = SlotReply.model_validate_json(line).result()
    assert back.samples == {"w": [2.0, 2.0]}
    assert {k: (list(lo), list(hi)) for k, (lo, hi) in back.sample_ranges.items()} == {"w": ([1.0, 2.0], [2.0, 50.0])}
