"""Judging outputs: the few-pass comparison gives compare_outputs' verdict and figures, NaN/inf
never pass, and the sampled check of timed outputs catches a small part left undone."""

from __future__ import annotations

import numpy as np
import pytest

from evoteam.servers.bench.measurement.judge import compare_outputs, sampled_match

SHAPE = (64, 96)
META = [{"name": "y", "dtype": "float32", "shape": list(SHAPE)}]
EXPECTED = {"y": (SHAPE, "float32")}


def _plain_verdict(a: np.ndarray, r: np.ndarray, atol: float, rtol: float, ratio: float):
    """The rule written out element by element (no shortcuts): pass, max abs, max rel."""
    a, r = a.astype(np.float64).ravel(), r.astype(np.float64).ravel()
    bad, max_abs, max_rel = 0, 0.0, 0.0
    for x, y in zip(a.tolist(), r.tolist()):
        d = abs(x - y)
        max_abs = max(max_abs, d)
        if y != 0:
            max_rel = max(max_rel, d / abs(y))
        if d > atol and d > rtol * abs(y):
            bad += 1
    return (bad == 0 or 1 - bad / a.size >= ratio), max_abs, max_rel


def _cases():
    rng = np.random.default_rng(7)
    r = rng.standard_normal(SHAPE).astype(np.float32)
    yield "equal", r.copy(), r, 1.0
    yield "tiny noise", r + np.float32(1e-6), r, 1.0
    off = r.copy()
    off[3, 5] += 0.5
    yield "one element off", off, r, 1.0
    yield "one element off, ratio allows it", off, r, 0.999
    zeros = r.copy()
    zeros[0, :10] = 0.0
    near = zeros.copy()
    near[0, :10] = 1e-7  # the reference is 0 there: only atol applies, and no relative error exists
    yield "reference zeros", near, zeros, 1.0
    big = zeros.copy()
    big[0, :10] = 1.0
    yield "reference zeros, far off", big, zeros, 1.0
    rel_only = r * np.float32(1 + 5e-5)  # within rtol, beyond atol where |r| is large
    yield "relative error within rtol", rel_only, r, 1.0
    yield "many off, ratio not enough", r + np.float32(0.1) * (rng.random(SHAPE) < 0.01), r, 0.995


@pytest.mark.parametrize("case", list(range(8)))
def test_fast_comparison_gives_the_rule_s_verdict_and_figures(case):
    name, got, ref, ratio = list(_cases())[case]
    atol, rtol = 1e-5, 1e-4
    check = compare_outputs(META, {"y": got}, [], {"y": ref.astype(np.float64)}, EXPECTED, atol, rtol, ratio)
    passed, max_abs, max_rel = _plain_verdict(got, ref, atol, rtol, ratio)
    assert (check.status == "PASSED") is passed, (name, check)
    assert check.max_abs == pytest.approx(max_abs, rel=1e-12, abs=0), name
    assert check.max_rel == pytest.approx(max_rel, rel=1e-12, abs=0), name


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nan_and_inf_never_pass_even_where_the_ratio_would_allow_one_wrong_element(bad):
    ref = np.ones(SHAPE, dtype=np.float32)
    got = ref.copy()
    got[1, 2] = bad
    check = compare_outputs(META, {"y": got}, [], {"y": ref}, EXPECTED, 1e-3, 1e-3, 0.5)
    assert check.status == "INCORRECT_NUMERICAL"
    assert "NaN/inf" in check.message


def test_sampled_check_catches_one_element_in_a_thousand_left_undone():
    rng = np.random.default_rng(1)
    n = 1 << 20
    ref = rng.standard_normal(n).astype(np.float32)
    meta = [{"name": "y", "dtype": "float32", "shape": [n]}]
    expected = {"y": ((n,), "float32")}
    judge_rng = np.random.default_rng(2)
    caught = 0
    for _ in range(40):  # a fresh 0.1% undone on every call, as a cheating candidate would do
        got = ref.copy()
        got[rng.choice(n, n // 1000, replace=False)] = 0.0
        caught += not sampled_match(meta, {"y": got}, {"y": ref}, expected, 1e-5, 1e-4, 1.0, judge_rng, 1 << 14)
    assert caught == 40
    honest = ref + np.float32(1e-7)
    assert all(sampled_match(meta, {"y": honest}, {"y": ref}, expected, 1e-5, 1e-4, 1.0, judge_rng, 1 << 14)
               for _ in range(10))


def test_sampled_check_reads_every_element_of_a_small_output_and_checks_shape_dtype_and_nan():
    ref = np.ones(SHAPE, dtype=np.float32)
    got = ref.copy()
    got[-1, -1] = 2.0  # the last element only: a sample of the whole output finds it every time
    rng = np.random.default_rng(3)
    assert not any(sampled_match(META, {"y": got}, {"y": ref}, EXPECTED, 1e-5, 1e-4, 1.0, rng, 1 << 14)
                   for _ in range(5))
    assert not sampled_match(META, {"y": ref.reshape(-1)}, {"y": ref}, EXPECTED, 1e-5, 1e-4, 1.0, rng, 16)
    wrong_dtype = [dict(META[0], dtype="float64")]
    assert not sampled_match(wrong_dtype, {"y": ref}, {"y": ref}, EXPECTED, 1e-5, 1e-4, 1.0, rng, 16)
    nan = ref.copy()
    nan[:] = np.nan
    assert not sampled_match(META, {"y": nan}, {"y": ref}, EXPECTED, 1e-5, 1e-4, 1.0, rng, 16)


def test_a_long_output_is_judged_whole_across_its_chunks():
    """Longer than the comparison's chunk: an error in the last, partial chunk and a zero of the
    reference in a middle one count as in a short output."""
    from evoteam.servers.bench.measurement.judge import _CHUNK

    n = 3 * _CHUNK + 123
    rng = np.random.default_rng(5)
    ref = rng.standard_normal(n).astype(np.float32)
    ref[_CHUNK + 7] = 0.0
    meta = [{"name": "y", "dtype": "float32", "shape": [n]}]
    expected = {"y": ((n,), "float32")}
    got = ref.copy()
    got[_CHUNK + 7] = 1e-6  # within atol of a zero: passes, and is no relative error
    check = compare_outputs(meta, {"y": got}, [], {"y": ref}, expected, 1e-5, 1e-4, 1.0)
    assert check.status == "PASSED" and check.max_abs == pytest.approx(1e-6, rel=1e-3) and check.max_rel == 0.0
    got[-1] += 1.0
    check = compare_outputs(meta, {"y": got}, [], {"y": ref}, expected, 1e-5, 1e-4, 1.0)
    assert check.status == "INCORRECT_NUMERICAL" and f"worst at ({n - 1},)" in check.message, check
