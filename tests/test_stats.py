"""The bootstrap behind every kit score and contrast (evoteam/stats.py): vectorised, it must give
the interval plain resampling gives, the same one for the same measurements, and refuse what
cannot be a speedup."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from evoteam import stats


def _plain_bootstrap(samples: dict, kind: str, resamples: int, seed: int) -> list[float]:
    """What the statistic's bootstrap means, written the slow obvious way: draw every resample's
    values, compute the statistic on them."""
    rng = random.Random(seed)
    stat = stats.statistic_for(kind)
    return [stat({k: [vs[rng.randrange(len(vs))] for _ in vs] for k, vs in samples.items()})
            for _ in range(resamples)]


def _ends(draws: list[float]) -> tuple[float, float]:
    return stats._percentiles(draws, stats.CONFIDENCE)


def _groups(rng: random.Random, sizes: list[int], center: float = 3.0, spread: float = 0.1) -> dict:
    return {f"w{i}": [rng.lognormvariate(math.log(center) + i / 4, spread) for _ in range(n)]
            for i, n in enumerate(sizes)}


@pytest.mark.parametrize("sizes", [[6, 6, 6], [7, 9, 10], [2, 3, 40], [1, 5, 8]])
def test_a_kernel_score_interval_is_the_plain_bootstraps(sizes):
    data = _groups(random.Random(sum(sizes)), sizes)
    got = stats.score_estimate(data, resamples=20_000)
    lo, hi = _ends(_plain_bootstrap(data, "kernel", 20_000, seed=7))
    f = 1 + stats.PROCESS_RESOLUTION  # kernel intervals are widened alike on both paths
    value = stats.kernel_statistic(data)
    want_lo, want_hi = min(lo, value) / f, max(hi, value) * f
    # Two Monte Carlo bootstraps of 20,000 draws: their 2.5% and 97.5% points agree to well
    # under a percent; a wrong statistic (mean for median, one workload dropped) misses by more.
    assert got.lo == pytest.approx(want_lo, rel=0.01) and got.hi == pytest.approx(want_hi, rel=0.01)


def test_a_contrast_interval_is_the_plain_bootstraps_for_kernels_and_programs():
    rng = random.Random(3)
    a, b = _groups(rng, [10, 10, 11]), _groups(rng, [10, 12, 11], center=3.3)
    got = stats.contrast_estimate(a, b, resamples=20_000)
    ra, rb = _plain_bootstrap(a, "kernel", 20_000, 1), _plain_bootstrap(b, "kernel", 20_000, 2)
    lo, hi = _ends([y / x for x, y in zip(ra, rb)])
    f = 1 + stats.PROCESS_RESOLUTION
    assert got.lo == pytest.approx(min(lo, got.value) / f, rel=0.01)
    assert got.hi == pytest.approx(max(hi, got.value) * f, rel=0.01)
    pa = {"program": [rng.gauss(10, 1) for _ in range(15)]}
    pb = {"program": [rng.gauss(11, 1) for _ in range(12)]}
    got = stats.contrast_estimate(pa, pb, "program", resamples=20_000)
    da, db = _plain_bootstrap(pa, "program", 20_000, 1), _plain_bootstrap(pb, "program", 20_000, 2)
    lo, hi = _ends([y - x for x, y in zip(da, db)])
    assert got.lo == pytest.approx(min(lo, got.value), abs=0.1) and got.hi == pytest.approx(max(hi, got.value), abs=0.1)


def test_a_resamples_median_read_off_its_positions_is_the_median_of_its_values():
    for n in (1, 2, 3, 10, 11, 64):
        values = [random.Random(n).uniform(0, 5) for _ in range(n)]
        # The same generator state drawn both ways: the shortcut against the resamples' values.
        fast = stats._median_draws(np.random.default_rng(n), values, 500)
        idx = np.random.default_rng(n).integers(0, n, size=(500, n), dtype=np.int32) if n > 1 else None
        plain = np.median(np.sort(values)[idx], axis=1) if n > 1 else np.full(500, values[0])
        assert np.allclose(fast, plain)


def test_the_same_measurements_give_the_same_interval_however_listed():
    data = _groups(random.Random(5), [8, 9, 10])
    again = dict(reversed(list(data.items())))
    first, second = stats.score_estimate(data), stats.score_estimate(again)
    assert (first.lo, first.hi) == (second.lo, second.hi)
    assert stats.score_estimate(data) == first
    other = _groups(random.Random(6), [8, 9, 10])
    assert stats.contrast_estimate(data, other) == stats.contrast_estimate(again, dict(reversed(list(other.items()))))


def test_what_cannot_be_a_speedup_is_refused_not_averaged():
    with pytest.raises(ValueError):
        stats.score_estimate({"w1": [1.0, 2.0, 0.0], "w2": [1.0, 1.1, 1.2]})
    with pytest.raises(ValueError):
        stats.contrast_estimate({"w1": [1.0, -2.0]}, {"w1": [1.0, 1.5]})


def test_few_runs_never_make_a_contrast_significant_and_enough_rarely_do_on_noise():
    """A program contrast of 3 runs a side called an A/A pair significant one time in ten (review,
    2026-12-03); with too few values its interval now states less than 95% and is never
    significant, and with enough an A/A pair is rarely significant."""
    rng = random.Random(11)

    def trial(n: int) -> stats.Estimate:
        a = {"program": [rng.gauss(1.0, 0.05) for _ in range(n)]}
        b = {"program": [rng.gauss(1.0, 0.05) for _ in range(n)]}
        return stats.contrast_estimate(a, b, "program")

    few = [trial(3) for _ in range(200)]
    assert all(e.coverage < stats.CONFIDENCE and not stats.significant(e, "program") for e in few)
    enough = [trial(8) for _ in range(200)]
    assert all(e.coverage == stats.CONFIDENCE for e in enough)
    assert sum(stats.significant(e, "program") for e in enough) <= 16  # at most 8% on an A/A pair


def test_a_deterministic_evaluator_gives_an_exact_difference_but_chance_ties_do_not():
    est = stats.contrast_estimate({"program": [0.5] * 5}, {"program": [0.6] * 5}, "program")
    assert (est.lo, est.hi) == (est.value, est.value) and est.value == pytest.approx(0.1)
    assert stats.significant(est, "program") and "exact" in stats.describe(est)
    # An evaluator with a few possible scores ties by chance over two or three runs (review,
    # 2026-12-03: one A/A pair in eight at two runs): that is no exact difference.
    tie = stats.contrast_estimate({"program": [0.9, 0.9]}, {"program": [1.0, 1.0]}, "program")
    assert not stats.significant(tie, "program")


def test_a_kit_score_from_two_rounds_a_workload_states_less_than_95_percent():
    data = _groups(random.Random(5), [2, 2, 2])
    est = stats.score_estimate(data)
    assert 0 < est.coverage < stats.CONFIDENCE and est.lo < est.hi
    assert stats.score_estimate(_groups(random.Random(5), [3, 3, 3])).coverage == stats.CONFIDENCE


def test_intervals_do_not_depend_on_the_order_rounds_are_listed_or_which_side_is_a():
    rng = random.Random(8)
    a, b = _groups(rng, [10, 10, 10]), _groups(rng, [10, 10, 10], center=3.2)
    shuffled = {k: random.Random(1).sample(v, len(v)) for k, v in a.items()}
    assert stats.score_estimate(a) == stats.score_estimate(shuffled)
    ab, ba = stats.contrast_estimate(a, b), stats.contrast_estimate(b, a)
    assert ba.value == pytest.approx(1 / ab.value)
    assert (ba.lo, ba.hi) == pytest.approx((1 / ab.hi, 1 / ab.lo))
    pa, pb = {"program": [x[0] for x in a.values()] * 3}, {"program": [x[1] for x in b.values()] * 3}
    d1, d2 = stats.contrast_estimate(pa, pb, "program"), stats.contrast_estimate(pb, pa, "program")
    assert (d2.lo, d2.hi) == pytest.approx((-d1.hi, -d1.lo))


def test_a_listed_zero_width_score_says_what_stands_behind_it():
    """Listings set `runs` only where too few: a zero-width score without them is from enough runs
    (it read "(no interval)"), one marked unknown is not, and an interval reads as always."""
    assert stats.describe_listed(0.386149, [0.386149, 0.386149], None) == "0.386149 (5+ runs, the middle ones alike)"
    assert stats.describe_listed(0.3862, [0.3862, 0.3862], None, spread_unknown=True) == \
        "0.3862 (too few runs to know its spread)"
    assert stats.describe_listed(0.3862, [0.3862, 0.3862], 1) == stats.describe_score(0.3862, [0.3862, 0.3862], runs=1)
    assert stats.describe_listed(4.4, [3.9, 5.0], None) == "4.40 (3.90–5.00)"  # three digits each, zeros kept
    assert stats.describe_listed(None, None, None) == "none"
