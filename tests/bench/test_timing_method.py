"""A run is bound to the timing method its candidates were measured by, as to its kit's content:
scores taken before a change that makes them incomparable (metrics.timing_method) are never
pooled or ranked with scores taken after it."""

from __future__ import annotations

import pytest

from evoteam.errors import DomainError
from evoteam.servers.bench.evaluation import core
from evoteam.servers.bench.evaluation.core import evaluate_candidate
from evoteam.servers.bench.measurement.method import TIMING_METHOD

BASELINE_LIKE = """
import numpy as np

def run(hidden_states, weight, eps):
    x = hidden_states.astype(np.float64)
    return (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight).astype(np.float32)
"""


async def test_every_kernel_evaluation_says_its_timing_method(fast_kit, fast_settings, store):
    e = await evaluate_candidate(fast_settings, str(fast_kit), code=BASELINE_LIKE, store=store)
    assert e.status == "PASSED" and e.metrics["timing_method"] == TIMING_METHOD
    full = await store.get_candidate(e.candidate_id)
    assert full.metrics["timing_method"] == TIMING_METHOD


@pytest.mark.parametrize("earlier", [None, TIMING_METHOD - 1])
async def test_a_run_timed_by_an_earlier_method_takes_no_new_measurement(fast_kit, fast_settings, store,
                                                                         monkeypatch, earlier):
    """None: a run recorded before the method was written down (method 1)."""
    monkeypatch.setattr(core, "TIMING_METHOD", earlier)
    old = await evaluate_candidate(fast_settings, str(fast_kit), code=BASELINE_LIKE, store=store)
    assert old.recorded and old.metrics.get("timing_method") == earlier
    monkeypatch.setattr(core, "TIMING_METHOD", TIMING_METHOD)
    with pytest.raises(DomainError, match="timing method") as err:
        await evaluate_candidate(fast_settings, str(fast_kit), code=BASELINE_LIKE, store=store, run_id=old.run_id)
    assert "start a new run" in str(err.value)
    # The same code is still one candidate there, measured once: nothing was pooled into it.
    (only,) = (await store.list_candidates(old.run_id)).items
    assert only.n_measurements == 1
    # Without a run id the measurement goes to a run of its own, timed one way.
    new = await evaluate_candidate(fast_settings, str(fast_kit), code=BASELINE_LIKE, store=store)
    assert new.recorded and new.run_id != old.run_id and new.n_measurements == 1
