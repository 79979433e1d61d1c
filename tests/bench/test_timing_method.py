"""A run is bound to the timing method its candidates were measured by, as to its kit's content:
scores taken before a change that makes them incomparable (metrics.timing_method) are never
pooled or ranked with scores taken after it. The method is written where the measurement is made
(a pool slot or Ray node may run another evoteam), and a named run is checked before anything
is measured."""

from __future__ import annotations

import pytest

from evoteam.errors import DomainError
from evoteam.servers.bench.evaluation import core
from evoteam.servers.bench.evaluation.core import evaluate_candidate, record_evaluation
from evoteam.servers.bench.formats.kits import find_kit
from evoteam.servers.bench.measurement import batch
from evoteam.servers.bench.measurement.method import TIMING_METHOD

BASELINE_LIKE = """
import numpy as np

def run(hidden_states, weight, eps):
    x = hidden_states.astype(np.float64)
    return (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight).astype(np.float32)
"""


@pytest.fixture
def measured(monkeypatch):
    """How many kernel evaluations were measured."""
    calls = []
    real = core._run_kernel

    async def counting(*args, **kwargs):
        calls.append(1)
        return await real(*args, **kwargs)

    monkeypatch.setattr(core, "_run_kernel", counting)
    return calls


async def old_run(settings, kit, store, monkeypatch, earlier):
    """A run whose candidate was timed by an earlier method (None: before the method was written
    down, which counts as method 1)."""
    monkeypatch.setattr(batch, "TIMING_METHOD", earlier)
    e = await evaluate_candidate(settings, str(kit), code=BASELINE_LIKE, store=store)
    monkeypatch.setattr(batch, "TIMING_METHOD", TIMING_METHOD)
    assert e.recorded and e.metrics.get("timing_method") == earlier
    return e


async def test_every_kernel_evaluation_says_its_timing_method(fast_kit, fast_settings, store):
    e = await evaluate_candidate(fast_settings, str(fast_kit), code=BASELINE_LIKE, store=store)
    assert e.status == "PASSED" and e.metrics["timing_method"] == TIMING_METHOD
    full = await store.get_candidate(e.candidate_id)
    assert full.metrics["timing_method"] == TIMING_METHOD


@pytest.mark.parametrize("earlier", [None, TIMING_METHOD - 1])
async def test_a_run_timed_by_an_earlier_method_is_refused_before_measuring(fast_kit, fast_settings, store,
                                                                           monkeypatch, measured, earlier):
    old = await old_run(fast_settings, fast_kit, store, monkeypatch, earlier)
    before = len(measured)
    with pytest.raises(DomainError, match="timing method") as err:
        await evaluate_candidate(fast_settings, str(fast_kit), code=BASELINE_LIKE, store=store, run_id=old.run_id)
    assert "start a new run" in str(err.value) and f"seed_from={old.run_id!r}" in str(err.value)
    assert len(measured) == before  # refused before anything ran
    (only,) = (await store.list_candidates(old.run_id)).items
    assert only.n_measurements == 1  # nothing was pooled into it
    # Without a run id the measurement goes to a run of its own, timed one way.
    new = await evaluate_candidate(fast_settings, str(fast_kit), code=BASELINE_LIKE, store=store)
    assert new.recorded and new.run_id != old.run_id and new.n_measurements == 1


async def test_a_result_measured_elsewhere_keeps_its_own_method(fast_kit, fast_settings, store, monkeypatch):
    """A result that came back from a slot or node running an earlier evoteam is recorded by its own
    method, not the recording process's: refused by a run of this method, never pooled into it."""
    kit = find_kit(fast_settings, str(fast_kit))
    current = await evaluate_candidate(fast_settings, str(fast_kit), code=BASELINE_LIKE, store=store)
    monkeypatch.setattr(batch, "TIMING_METHOD", None)
    elsewhere = await evaluate_candidate(fast_settings, str(fast_kit), code=BASELINE_LIKE)  # not recorded
    monkeypatch.setattr(batch, "TIMING_METHOD", TIMING_METHOD)
    with pytest.raises(DomainError, match=f"timing method {TIMING_METHOD}, and this evaluation by method 1"):
        await record_evaluation(fast_settings, store, kit, elsewhere, BASELINE_LIKE, run_id=current.run_id)
    await record_evaluation(fast_settings, store, kit, elsewhere, BASELINE_LIKE)
    assert elsewhere.run_id != current.run_id
    (only,) = (await store.list_candidates(current.run_id)).items
    assert only.n_measurements == 1


async def test_remeasure_of_a_run_timed_by_an_earlier_method_compares_but_pools_nothing(
        fast_kit, fast_settings, store, monkeypatch):
    """One batch compares the finalists soundly whatever timed them before; their new rounds are
    not pooled into candidates measured the other way, and the set says so."""
    from evoteam.report.remeasure import remeasure_run

    old = await old_run(fast_settings, fast_kit, store, monkeypatch, None)
    mset = await remeasure_run(fast_settings, store, old.run_id, rounds=2)
    assert mset.pooled is False and "not pooled" in mset.note
    (entry,) = [e for e in mset.entries if e.candidate_id == old.candidate_id]
    assert entry.score is not None and entry.pooled_score is None
    (only,) = (await store.list_candidates(old.run_id)).items
    assert only.n_measurements == 1
    stored = await store.list_artifacts(old.run_id)
    assert any(a.kind == "measurement_set" for a in stored.items)


async def test_a_parent_timed_another_way_is_no_yardstick_for_document_credit(fast_kit, fast_settings, store,
                                                                              monkeypatch):
    """Documents are credited with whether a candidate beat its parent; a parent measured by an
    earlier timing method (from an older run, say through seed_from) gives no such comparison."""
    from evoteam.servers.retrieval import core as retrieval

    compared = []

    async def credit(store, run_id, documents, score, parent_score, **kw):
        compared.append(parent_score)

    monkeypatch.setattr(retrieval, "credit_documents", credit)
    parent_then = await old_run(fast_settings, fast_kit, store, monkeypatch, None)
    # Other code each (comments alone would be the same candidate: code_hash ignores them).
    parent_now = await evaluate_candidate(fast_settings, str(fast_kit), store=store,
                                          code=BASELINE_LIKE.replace("+ eps", "+ eps * 1.0"))
    for parent, child in ((parent_then, "np.square(x)"), (parent_now, "x ** 2")):
        await evaluate_candidate(fast_settings, str(fast_kit), code=BASELINE_LIKE.replace("x * x", child),
                                 store=store, run_id=parent_now.run_id, parent_id=parent.candidate_id,
                                 documents_used=["doc_x"])
    assert compared[0] is None and compared[1] == parent_now.candidate_score, compared


async def test_a_run_that_ranks_the_other_way_is_refused_before_measuring(fast_kit, fast_settings, store, measured):
    """A run started with the wrong direction (a kernel engineer thinking "minimise the time")
    would rank the kit's slowest candidate best: evaluating into it is refused before anything
    runs, saying the direction to use; without a run id the evaluation goes to a run that ranks
    the kit's way, never to that one."""
    from evoteam.servers.knowledge.models import RunCreate

    wrong = await store.start_run(RunCreate(goal="faster rmsnorm", kit="rmsnorm_fast", direction="minimize"))
    with pytest.raises(DomainError, match="to be minimized") as err:
        await evaluate_candidate(fast_settings, str(fast_kit), code=BASELINE_LIKE, store=store, run_id=wrong.id)
    assert "direction='maximize'" in str(err.value) and "speedup" in str(err.value)
    assert "Nothing was measured or recorded" in str(err.value)
    assert measured == [] and (await store.list_candidates(wrong.id)).items == []
    e = await evaluate_candidate(fast_settings, str(fast_kit), code=BASELINE_LIKE, store=store)
    assert e.recorded and e.run_id != wrong.id
    assert (await store.get_run(e.run_id)).direction == "maximize"
    # The result says its measurement went to a run started now, and which of the model's was skipped.
    assert f"recorded in {e.run_id}, a run started now; skipped {wrong.id}: it ranks scores to be minimized, " \
        "this kit's to be maximized" in e.message, e.message
    again = await evaluate_candidate(fast_settings, str(fast_kit), code=BASELINE_LIKE.replace("x * x", "x ** 2"),
                                     store=store)
    assert again.run_id == e.run_id and "started now" not in again.message, again.message
    # Started the wrong way again (newer than the run that takes it): the message names both.
    wrong2 = await store.start_run(RunCreate(goal="faster rmsnorm", kit="rmsnorm_fast", direction="minimize"))
    third = await evaluate_candidate(fast_settings, str(fast_kit), code=BASELINE_LIKE.replace("x * x", "x**2 + 0"),
                                     store=store)
    assert third.run_id == e.run_id
    assert f"recorded in {e.run_id}, your newest active run of this kit that can take it; skipped {wrong2.id}: " \
        "it ranks scores to be minimized" in third.message, third.message


def test_describe_kit_says_how_a_kit_is_timed_in_one_short_paragraph(fast_settings):
    """Issue 21, point 7: describe_kit states warm-ups, rounds, repetitions, fresh or reused inputs,
    cold or warm caches, whether a DPS output's allocation is timed and what is subtracted; and it
    is read at the start of every session, so it stays short (it was 1,325 characters)."""
    from evoteam.servers.bench.evaluation.catalog import describe_kit

    text = describe_kit(fast_settings, "rmsnorm_cpu").timing_method
    for needed in ("2 warm-up calls per side", "10 rounds of 2 repetitions", "fresh inputs", "caches are warm",
                   "destination passing style gets its outputs allocated outside the clock",
                   "less the call path", "order-statistic interval", "bootstrap interval",
                   # Where the inputs come from and what a destination-passing output saves (mp34, 2026-12-05):
                   "inputs are written from another CPU", "up to 1.3x apart, memory-bound"):
        assert needed in text, needed
    assert len(text) <= 900, len(text)


def test_describe_kit_says_what_a_candidate_may_import_and_how_long_a_program_may_run(fast_settings):
    """A role assumed scipy (mp35) and a model kept its programs under 12 s for want of the limit
    (mp36): describe_kit says the packages a candidate can import and a program kit's time per run."""
    from evoteam.servers.bench.evaluation.catalog import describe_kit

    program = describe_kit(fast_settings, "circle_packing_26")
    assert "files beside it are not importable" in program.entry and "up to 300 s a run" in program.entry
    kernel = describe_kit(fast_settings, "rmsnorm_cpu")
    assert program.packages == kernel.packages and program.packages.startswith("numpy")  # the bench's dependency


def test_packages_are_those_a_worker_can_import(tmp_path, monkeypatch):
    """Workers start as `python -I`: a package only this process's path holds (PYTHONPATH, the
    working folder) is not importable there, and is listed as not installed (review 2026-12-05)."""
    import sys

    from evoteam.servers.bench.evaluation import catalog

    (tmp_path / "numba").mkdir()
    (tmp_path / "numba" / "__init__.py").write_text("")
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    catalog._importable_in_workers.cache_clear()
    try:
        text = catalog.importable_packages()
    finally:
        catalog._importable_in_workers.cache_clear()
    importable, _, missing = text.partition("; not installed: ")
    assert "numpy" in importable.split(", ") and "numba" in missing.split(", "), text
