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
