"""Statistics of measurements: every score is an estimate with an interval.

A measurement is noisy, so each score evoteam reports is an estimate from its own rounds, and
every decision taken on scores (a new best, a team version's gain, a comparison) asks whether the
intervals say so, never whether one draw beat another. The knowledge store pools measurements with
it inside a write, so the bootstrap is numpy, vectorised over resamples (imported on first use: a
hook that only reads stored intervals never pays for it): at the 400 rounds per workload a pooled
candidate keeps, the pure-Python loop took ~0.4 s per write (benchmarks/bench_stats.py).

The methods, chosen once for every caller:

- **One workload's speedup**: the median of its rounds' paired ratios (each round times baseline
  and candidate back to back on the same fresh inputs), with the distribution-free interval for a
  median from order statistics: ``[x(k), x(n+1-k)]`` for the largest ``k`` whose coverage
  ``1 - 2·P(Binomial(n, 1/2) < k)`` is at least 95%. Below six rounds no such ``k`` exists; the
  interval is then the whole range and `coverage` says how much less than 95% it covers.
- **A kit's score** (several workloads, or a program's repeated scores): the statistic of the
  pooled rounds — geometric mean of the workloads' medians for kernels, the median for programs —
  with a percentile bootstrap interval (rounds resampled within each workload, 2,000 resamples,
  seeded by the data so that the same measurements always give the same interval). A resample's
  median is read off the sorted rounds at the median of its drawn positions (the same value as
  sorting the drawn rounds: order statistics commute with a monotone map).
- **A contrast** (B over A, a version's gain): the same bootstrap applied to both sides at once.
- **Kernel kits' ratios** (speedups, scores, contrasts) have their intervals widened by
  `PROCESS_RESOLUTION` on each side: two processes running identical code differ by a few
  percent that no round of one batch can see (a compare's copies measure it instead: copies.py).
- **Ranking** uses the pessimistic end of the interval (the lower bound when maximising, the upper
  when minimising): a candidate measured once with a wide interval does not outrank one measured
  often, and a lucky draw cannot become the best.
"""

from __future__ import annotations

import hashlib
import math
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

CONFIDENCE = 0.95
BOOTSTRAP_RESAMPLES = 2000
# Two worker processes running identical code differ by a few percent that stays the same for
# their whole life (where their memory landed, cache colouring): the rounds of one batch cannot
# see it, and across A/A trials on the 2-core development machine it was a 3-4% spread of the
# ratio. Every ratio interval of a kernel kit (a speedup, a kit score, a contrast) is widened by
# this much on each side for it (docs/bench.md).
PROCESS_RESOLUTION = 0.03
# Separate evaluations of the same code, one on a busy machine, have differed by up to 2.5x (39.5x
# under load against 15.9x quiet, issue #21; 19.7x against 16.3x, docs/bench.md), and load can
# slow a baseline more than a candidate (a launch-bound one on a GPU, a threaded one here): a busy
# kernel's interval counts against another evaluation's, or a starting score, only widened by this
# factor each way (load_widened). Load widens an interval; it does not place it. Ignored instead,
# a 4x first version on a shared machine read "not established" for ever (model-play 2026-12-04).
BUSY_SPREAD = 3.0
# How that widening is said: "widened 3x each way" read as its half-width tripled (mp82).
BUSY_COUNTS = f"its low end ÷{BUSY_SPREAD:g} to its high end ×{BUSY_SPREAD:g}"

Direction = Literal["maximize", "minimize"]
Samples = Mapping[str, Sequence[float]]  # workload (or "program") -> one value per round / measurement


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its interval; ``n`` is the number of rounds behind it (the smallest
    count over workloads for a kit score) and ``coverage`` the interval's nominal coverage."""

    value: float
    lo: float
    hi: float
    n: int
    coverage: float = CONFIDENCE

    @property
    def interval(self) -> list[float]:
        return [self.lo, self.hi]

    def contains(self, x: float) -> bool:
        return self.lo <= x <= self.hi


def median(values: Sequence[float]) -> float:
    xs = sorted(values)
    if not xs:
        raise ValueError("median of no values")
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2


def geomean(values: Sequence[float]) -> float:
    """The geometric mean; of one value, that value exactly (a round's ratio of one process a side
    is then the ratio of its times, to the last bit, as its bounds are: timing.Rounds)."""
    if not values or any(v <= 0 or not math.isfinite(v) for v in values):
        raise ValueError("a geometric mean needs positive finite values")
    if len(values) == 1:
        return float(values[0])
    return math.exp(sum(math.log(v) for v in values) / len(values))


def _binom_cdf_half(n: int, k: int) -> float:
    """P(Binomial(n, 1/2) <= k)."""
    if k < 0:
        return 0.0
    return sum(math.comb(n, i) for i in range(0, min(k, n) + 1)) / 2 ** n


def median_rank(n: int, confidence: float = CONFIDENCE) -> tuple[int, float]:
    """(k, coverage): the order statistics x(k), x(n+1-k) (1-based) bounding the median with at
    least ``confidence``, or (1, coverage of the whole range) when n is too small for that."""
    best = (1, 1 - 2 * _binom_cdf_half(n, 0)) if n >= 1 else (1, 0.0)
    for k in range(1, n // 2 + 1):
        coverage = 1 - 2 * _binom_cdf_half(n, k - 1)
        if coverage >= confidence:
            best = (k, coverage)
        else:
            break
    return best


def median_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> Estimate:
    """The median with its order-statistic interval (see the module's docstring)."""
    xs = sorted(float(v) for v in values)
    if not xs:
        raise ValueError("no values to estimate from")
    k, coverage = median_rank(len(xs), confidence)
    return Estimate(median(xs), xs[k - 1], xs[len(xs) - k], len(xs), round(coverage, 4))


def widen(est: Estimate) -> Estimate:
    """A ratio's interval widened for the process-to-process difference no round can see."""
    if est.coverage == 0:  # a single measurement: no interval to widen
        return est
    f = 1.0 + PROCESS_RESOLUTION
    return Estimate(est.value, est.lo / f, est.hi * f, est.n, est.coverage)


def ratio_interval(ratios: Sequence[float]) -> Estimate:
    """One workload's speedup (or contrast) from its rounds' paired ratios: the median with its
    order-statistic interval, widened for the process difference."""
    return widen(median_interval(ratios))


def censored_ratio_interval(ratios: Sequence[float], lows: Sequence[float] | None = None,
                            highs: Sequence[float] | None = None) -> Estimate:
    """ratio_interval, stretched to the same interval computed from every round's smallest and
    largest possible ratio (``lows``, ``highs``, parallel to ``ratios``) where some round's time
    was below the harness's resolution; no change when every time was resolved. One rule for the
    bench's workloads and the store's pooled ones."""
    est = ratio_interval(ratios)
    if lows is None or highs is None or list(lows) == list(highs):
        return est
    return Estimate(est.value, min(est.lo, ratio_interval(lows).lo), max(est.hi, ratio_interval(highs).hi),
                    est.n, est.coverage)


def _seed(samples: Sequence[Samples]) -> int:
    """A seed from the measurements themselves, not from the order their rounds were listed in:
    the same rounds give the same interval (a bootstrap reads only their sorted values)."""
    h = hashlib.sha256()
    for group in samples:
        for name in sorted(group):
            h.update(name.encode())
            for v in sorted(float(x) for x in group[name]):
                h.update(struct.pack("<d", v))
    return int.from_bytes(h.digest()[:8], "little")


def _side_rngs(a: Samples, b: Samples) -> tuple:
    """One generator per side of a contrast, each seeded by both sides' data in an order that does
    not depend on which side is A: B against A is then exactly the reciprocal (or the negation) of
    A against B."""
    ka, kb = _seed([a]), _seed([b])
    base = _seed([{"pair": sorted([float(ka), float(kb)])}])
    return (_rng(base), _rng(base + 1)) if ka <= kb else (_rng(base + 1), _rng(base))


def kernel_statistic(samples: Samples) -> float:
    """A kernel kit's score from per-workload rounds: geometric mean of the workloads' medians."""
    return geomean([median(samples[k]) for k in sorted(samples)])  # name order: the same sum however listed


def program_statistic(samples: Samples) -> float:
    """A program kit's score from repeated measurements: their median."""
    return median([v for vs in samples.values() for v in vs])


def statistic_for(kind: str) -> Callable[[Samples], float]:
    return kernel_statistic if kind == "kernel" else program_statistic


def _median_draws(rng, values: Sequence[float], resamples: int):
    """The medians of ``resamples`` bootstrap resamples of ``values`` (each as many draws, with
    replacement, as there are values): one array, computed without materialising the resamples'
    values, from the order statistics of the drawn positions into the sorted values."""
    import numpy as np

    v = np.sort(np.asarray(values, dtype=np.float64))
    n = len(v)
    if n == 1:
        return np.full(resamples, v[0])
    idx = rng.integers(0, n, size=(resamples, n), dtype=np.int32 if n < 2**31 else np.int64)
    mid = n // 2
    if n % 2:
        return v[np.partition(idx, mid, axis=1)[:, mid]]
    both = np.partition(idx, (mid - 1, mid), axis=1)
    return (v[both[:, mid - 1]] + v[both[:, mid]]) / 2


def _statistic_draws(rng, samples: Samples, kind: str, resamples: int):
    """The kit statistic (statistic_for(kind)) of ``resamples`` bootstrap resamples, rounds
    resampled within each workload."""
    import numpy as np

    if kind == "kernel":
        # Workloads in name order: the same measurements give the same interval however listed.
        logs = [np.log(_median_draws(rng, samples[k], resamples)) for k in sorted(samples)]
        return np.exp(np.mean(logs, axis=0))
    if len(samples) == 1:  # a program's scores: the median of one group, read off its positions
        return _median_draws(rng, next(iter(samples.values())), resamples)
    # A program's statistic is the median of every value pooled: resample each group, then pool.
    drawn = [np.asarray(samples[k], dtype=np.float64)[rng.integers(0, len(samples[k]), size=(resamples, len(samples[k])))]
             for k in sorted(samples)]
    return np.median(np.concatenate(drawn, axis=1), axis=1)


def _rng(seed: int):
    import numpy as np

    return np.random.default_rng(seed)


def _percentiles(values, confidence: float) -> tuple[float, float]:
    import numpy as np

    values = np.sort(np.asarray(values, dtype=np.float64))
    a = (1 - confidence) / 2
    lo = values[min(len(values) - 1, max(0, int(math.floor(a * len(values)))))]
    hi = values[min(len(values) - 1, max(0, int(math.ceil((1 - a) * len(values))) - 1))]
    return float(lo), float(hi)


def _checked(samples: Samples, kind: str) -> dict[str, list[float]]:
    """The non-empty groups as floats; every value finite, and positive for a kernel kit (its
    values are ratios: a zero or a negative one is a broken measurement, not a slow one)."""
    clean = {k: [float(v) for v in vs] for k, vs in samples.items() if vs}
    for vs in clean.values():
        if any(not math.isfinite(v) or (kind == "kernel" and v <= 0) for v in vs):
            raise ValueError("a kernel kit's measurements are positive finite ratios" if kind == "kernel"
                             else "measurements must be finite numbers")
    return clean


def score_estimate(samples: Samples, kind: str = "kernel", confidence: float = CONFIDENCE,
                   resamples: int = BOOTSTRAP_RESAMPLES) -> Estimate:
    """A kit score and its bootstrap interval from pooled rounds. One value in all is a point
    (interval of zero width, coverage 0: nothing is known of its spread)."""
    clean = _checked(samples, kind)
    if not clean:
        raise ValueError("no measurements")
    stat = statistic_for(kind)
    value = stat(clean)
    n = min(len(v) for v in clean.values())
    if max(len(v) for v in clean.values()) == 1:
        return Estimate(value, value, value, 1, 0.0)
    if kind != "kernel" or len(clean) == 1:
        # One group: the exact order-statistic interval of its median (programs: of the scores).
        flat = [v for vs in clean.values() for v in vs]
        est = median_interval(flat, confidence)
        if kind == "kernel":
            return widen(est)
        # Enough runs, every one alike (a deterministic program): the score is exact, as a contrast
        # of such runs is (a zero-width interval from differing runs is not: its middle runs agree).
        return Estimate(value, est.lo, est.hi, len(flat), 1.0 if every_run_alike(clean) else est.coverage)
    draws = _statistic_draws(_rng(_seed([clean])), clean, kind, resamples)
    lo, hi = _percentiles(draws, confidence)
    return widen(Estimate(value, min(lo, value), max(hi, value), n, _bootstrap_coverage(n, confidence, kind)))


# Below these many values per group a percentile bootstrap covers less than it says (simulated,
# 2026-12-03: a kit score from 2 rounds per workload covered 72-81% where 95% was stated; a
# program contrast of 3 runs a side called an A/A pair significant one time in ten). There the
# interval states the coverage of one group's order-statistic interval, which is lower than what
# the bootstrap achieves: conservative, and below 95% nothing is called significant.
BOOTSTRAP_MIN_VALUES = {"kernel": 3, "program": 5}


def _bootstrap_coverage(n: int, confidence: float, kind: str) -> float:
    if n >= BOOTSTRAP_MIN_VALUES.get(kind, 5):
        return confidence
    # At least a half: 0 would read as "one measurement, no interval", and other groups have spread.
    return min(confidence, max(0.5, round(median_rank(n, confidence)[1], 4)))


# A zero-width interval says how much a score moves only when enough runs agree on it: one run of a
# program, or a few that happened to give the same value, says nothing (a program that draws random
# numbers unseeded scores differently each run). From this many runs alike, the number a program
# contrast needs to call a difference exact, the value is exact.
EXACT_MIN_RUNS = BOOTSTRAP_MIN_VALUES["program"]


def runs_of(samples: Samples | None) -> int | None:
    """The runs (or rounds) behind a score: the fewest values of any group (None without any)."""
    groups = [v for v in (samples or {}).values() if isinstance(v, (list, tuple))]
    return min(len(v) for v in groups) if groups else None


def every_run_alike(samples: Samples) -> bool:
    """Enough runs to call a value exact (EXACT_MIN_RUNS in each group), and every one the same."""
    return (runs_of(samples) or 0) >= EXACT_MIN_RUNS and len({v for vs in samples.values() for v in vs}) == 1


def spread_unknown(est: Estimate) -> bool:
    """Too few runs to know how much the score moves: a point from under EXACT_MIN_RUNS runs (a
    one-run program's score), or an interval from so few that it covers less than 95% (a program
    run 2 to 4 times: [min, max] of 2 runs covers 50%, and read as 95% it announced a second run of
    the same program as a new best one time in six; review 2026-12-04). It neither clears another
    estimate nor is cleared by one."""
    return est.n < EXACT_MIN_RUNS and (est.lo == est.hi or est.coverage < CONFIDENCE - 1e-9)


def picked_confidence(picked_of: int) -> float:
    """The confidence a verdict on the best of ``picked_of`` candidates is read at (Bonferroni):
    the best of several is the one whose noise ran highest, so at 95% each a tie would be called
    a difference up to ``picked_of`` times as often (a renamed copy of a version's best, picked as
    the next version's, read a significant 1.07x where one process timed 0.994x; mp38)."""
    return 1.0 - (1.0 - CONFIDENCE) / max(1, picked_of)


def confident(est: Estimate) -> bool:
    """Whether an interval is a full 95% one (few rounds or runs give less; a point gives none)."""
    return est.coverage >= CONFIDENCE - 1e-9


SampleRanges = Mapping[str, tuple[Sequence[float], Sequence[float]]]


def _range_ends(samples: Samples, ranges: SampleRanges | None) -> tuple[Samples, Samples] | None:
    """Each round's smallest and largest possible value per workload (the samples themselves where
    every round was resolved), or None when no round of any workload was unresolved."""
    kept = {k: r for k, r in (ranges or {}).items() if k in samples and list(r[0]) != list(r[1])}
    if not kept:
        return None
    lows = {k: list(kept[k][0]) if k in kept else list(v) for k, v in samples.items() if v}
    highs = {k: list(kept[k][1]) if k in kept else list(v) for k, v in samples.items() if v}
    return lows, highs


def censored_score_estimate(samples: Samples, ranges: SampleRanges | None = None,
                            kind: str = "kernel", confidence: float = CONFIDENCE) -> Estimate:
    """score_estimate, with the interval stretched to cover what the rounds whose time was below
    the harness's resolution allow: ``ranges`` gives per workload each round's smallest and
    largest possible ratio (the bench's Rounds.bounds). One rule for the bench's score and the
    store's pooled one, so a candidate's interval is the measurement's."""
    est = score_estimate(samples, kind, confidence)
    ends = _range_ends(samples, ranges)
    if ends is None:
        return est
    lows, highs = ends
    lo, hi = score_estimate(lows, kind, confidence).lo, score_estimate(highs, kind, confidence).hi
    return Estimate(est.value, min(est.lo, lo), max(est.hi, hi), est.n, est.coverage)


def contrast_estimate(a: Samples, b: Samples, kind: str = "kernel", confidence: float = CONFIDENCE,
                      resamples: int = BOOTSTRAP_RESAMPLES) -> Estimate:
    """B relative to A from two independent sets of measurements: the ratio B/A of their scores
    (kernel kits: speedups), or the difference B - A (program kits, whose objective may be zero
    or negative). Its interval is a joint bootstrap of both sides."""
    stat = statistic_for(kind)
    ca, cb = _checked(a, kind), _checked(b, kind)
    if not ca or not cb:
        raise ValueError("no measurements")

    def rel(x: float, y: float) -> float:
        return y / x if kind == "kernel" else y - x

    value = rel(stat(ca), stat(cb))
    single = max(len(v) for v in ca.values()) == 1 and max(len(v) for v in cb.values()) == 1
    if single:
        return Estimate(value, value, value, 1, 0.0)
    n = min(min(len(v) for v in ca.values()), min(len(v) for v in cb.values()))
    # (Not from fewer runs: an evaluator with a few possible scores ties by chance that often.)
    if kind != "kernel" and n >= BOOTSTRAP_MIN_VALUES["program"] and \
            all(len(set(v)) == 1 for side in (ca, cb) for v in side.values()):
        # Every repeat alike on both sides (a deterministic evaluator): the difference is exact.
        return Estimate(value, value, value, n, 1.0)
    rng_a, rng_b = _side_rngs(ca, cb)
    da, db = _statistic_draws(rng_a, ca, kind, resamples), _statistic_draws(rng_b, cb, kind, resamples)
    lo, hi = _percentiles(rel(da, db), confidence)
    est = Estimate(value, min(lo, value), max(hi, value), n, _bootstrap_coverage(n, confidence, kind))
    return widen(est) if kind == "kernel" else est


def censored_contrast_estimate(a: Samples, b: Samples, kind: str = "kernel", a_ranges: SampleRanges | None = None,
                               b_ranges: SampleRanges | None = None) -> Estimate:
    """contrast_estimate, stretched as censored_score_estimate stretches a score: where some round
    of either side was below the harness's resolution, the interval also covers the contrast of
    one side's smallest possible ratios with the other's largest, both ways."""
    est = contrast_estimate(a, b, kind)
    a_ends, b_ends = _range_ends(a, a_ranges), _range_ends(b, b_ranges)
    if a_ends is None and b_ends is None:
        return est
    (a_lo, a_hi), (b_lo, b_hi) = a_ends or (a, a), b_ends or (b, b)
    lo, hi = contrast_estimate(a_hi, b_lo, kind).lo, contrast_estimate(a_lo, b_hi, kind).hi
    return Estimate(est.value, min(est.lo, lo), max(est.hi, hi), est.n, est.coverage)


def no_effect(kind: str) -> float:
    """The contrast value that means "no difference": a ratio of 1, or a difference of 0."""
    return 1.0 if kind == "kernel" else 0.0


def favours_b(value: float, kind: str, direction: Direction) -> bool:
    """Whether a contrast's value (B over A, or B minus A) reads as B the better: a ratio of
    speedups above 1 whatever the kit's direction, a difference on the direction's side of 0."""
    larger = kind == "kernel" or direction == "maximize"
    return value > no_effect(kind) if larger else value < no_effect(kind)


def significant(contrast: Estimate, kind: str = "kernel") -> bool:
    """True only when a full 95% interval (or an exact difference) excludes "no difference": with
    too few rounds or runs for one, nothing is significant."""
    return confident(contrast) and not contrast.contains(no_effect(kind))


def pessimistic(est: Estimate, direction: Direction) -> float:
    """The end of the interval a ranking uses: the lower bound when maximising, the upper when
    minimising."""
    return est.lo if direction == "maximize" else est.hi


def clears(new: Estimate, incumbent: Estimate, direction: Direction) -> bool:
    """A new best is announced only when its whole interval lies beyond the incumbent's, and
    neither is a point whose spread is unknown (two single runs of a program tell nothing apart)."""
    if spread_unknown(new) or spread_unknown(incumbent):
        return False
    return new.lo > incumbent.hi if direction == "maximize" else new.hi < incumbent.lo


def load_widened(est: Estimate) -> Estimate:
    """``est`` as a busy kernel's interval counts against another evaluation's or x0: low end
    divided by BUSY_SPREAD, high end multiplied (the store's rankings and the bench's verdict)."""
    return Estimate(est.value, est.lo / BUSY_SPREAD, est.hi * BUSY_SPREAD, est.n, est.coverage)


def sig3(x: float | None) -> str:
    """Three significant digits, as human text shows numbers: "3.20", not "3.2" beside "(3.09–3.33)"."""
    if x is None or not math.isfinite(x):
        return str(x)
    return _sig(x, 3, zeros=True) if x else "0"  # an exact zero (or -0.0) is not "0.00"


def _sig(x: float, digits: int, zeros: bool = False) -> str:
    """``digits`` significant digits; from 1,000 up with thousands separators and the digits
    asked for ("1,000.4" at five, not "1e+03" or "1,000"). ``zeros``: trailing zeros kept, so every
    number shown says how many digits it has ("3.20"); without, an exact point keeps only the
    digits it has ("2.5022", not "2.50220")."""
    if abs(float(f"{x:.{digits}g}")) >= 1000:
        return f"{x:,.{max(0, digits - len(str(int(abs(x)))))}f}"
    if zeros:
        return f"{x:#.{digits}g}".rstrip(".").replace(".e", "e")
    return f"{x:.{digits}g}"


def describe(est: Estimate, unit: str = "") -> str:
    """"4.40× (3.90–5.00)": the value and its interval in three significant digits, or more (up to
    six) where three would show different numbers alike ("2.5 (2.5–2.5)" hid a run of 2.5022); a
    point in six: an exact score is known to all its digits (a program near its best known
    differs in the fourth)."""
    if est.lo == est.hi:
        shown = _sig(est.value, 6) + unit if math.isfinite(est.value) else str(est.value)
        if spread_unknown(est):
            if est.n > 1:
                return f"{shown} ({est.n} runs alike: too few to know its spread)"
            return f"{shown} (one measurement, no interval)"
        if est.coverage == 1.0:  # every run alike (score_estimate, contrast_estimate say so)
            return f"{shown} (exact: every run alike)"
        return f"{shown} ({est.n} runs, the middle ones alike)"  # the median is known to its digits
    xs = (est.lo, est.value, est.hi)
    if not all(math.isfinite(x) for x in xs):
        return f"{sig3(est.value)}{unit} ({sig3(est.lo)}–{sig3(est.hi)})"
    # Enough digits that different numbers differ, and that an end near "no change" (a ratio's 1, a
    # difference's 0) does not show as it: "1.07× (1–1.14): significant" read as a contradiction (mp38).
    none = 1.0 if unit == "×" else 0.0
    digits = next((d for d in range(3, 7) if len({_sig(x, d) for x in xs}) == len(set(xs))
                   and all(x == none or float(_sig(x, d).replace(",", "")) != none for x in (est.lo, est.hi))), 6)
    few = f", {est.n} runs: too few for a 95% interval" if spread_unknown(est) else ""
    zeros = digits == 3  # "3.20× (3.09–3.33)"; with more digits only where they tell numbers apart
    return (f"{_sig(est.value, digits, zeros)}{unit} ({_sig(est.lo, digits, zeros)}–"
            f"{_sig(est.hi, digits, zeros)}{few})")


def describe_listed(value: float | None, interval: list[float] | None, runs: int | None, unit: str = "",
                    spread_unknown: bool | None = None, exact_runs: int | None = None) -> str:
    """A listed score, whose ``runs`` the listing sets only where they are too few for a 95%
    interval: a zero-width interval without them is from enough runs, the middle ones alike (an
    exact best of 15 alike runs read "(no interval)" in prior work; model-play 2026-12-04).
    ``spread_unknown``: what a reader without the count knows (search hits); ``exact_runs``: where
    the caller knows every run is alike, how many."""
    if exact_runs and value is not None and interval and len(interval) == 2 and interval[0] == interval[1]:
        return describe_score(value, interval, unit, runs=exact_runs, exact=True)
    if value is not None and interval and len(interval) == 2 and interval[0] == interval[1] and runs is None \
            and math.isfinite(value):
        if spread_unknown:
            return f"{_sig(value, 6)}{unit} (too few runs to know its spread)"
        return f"{_sig(value, 6)}{unit} ({EXACT_MIN_RUNS}+ runs, the middle ones alike)"
    return describe_score(value, interval, unit, runs=runs)


def describe_score(value: float | None, interval: list[float] | None, unit: str = "",
                   runs: Samples | int | None = None, exact: bool = False) -> str:
    """A stored score as people read it: "4.4 (3.9–5.0)", or just the value where no interval was
    measured, or "none". A zero-width interval says what ``runs`` (the runs behind it, or the
    runs themselves, where the caller knows them) make of it: one measurement, a few alike, the
    middle ones alike, or exact."""
    if value is None:
        return "none"
    if not interval or len(interval) != 2:  # a bare value: the digits it has (a score given as 2 reads "2")
        return _sig(value, 3) + unit if math.isfinite(value) else str(value) + unit
    if interval[0] == interval[1] and runs is None:  # all its digits: two such scores may differ in the fourth
        return f"{_sig(value, 6) if math.isfinite(value) else value}{unit} (no interval)"
    if isinstance(runs, int):  # a count: a range of under EXACT_MIN_RUNS runs covers what their order statistics do;
        few = interval[0] != interval[1] and runs < EXACT_MIN_RUNS  # ``exact``: every one of them alike
        coverage = median_rank(runs)[1] if few else 1.0 if exact and interval[0] == interval[1] else CONFIDENCE
        return describe(Estimate(value, interval[0], interval[1], runs, coverage), unit)
    # The runs themselves: whether every one is alike is known, and what a program's few cover.
    return describe(Estimate(value, interval[0], interval[1], runs_of(runs) or 0, runs_coverage(runs)), unit)


def describe_leads(leads: list | None) -> str:
    """"; cand_a 2.61 (1 run), ... read better from too few runs ...": the candidates a run's best
    outranks only because their runs are too few (get_run's leads_from_too_few_runs: each with
    candidate_id, score and runs), said beside that best."""
    if not leads:
        return ""
    named = ", ".join(x.candidate_id + (f" {describe_score(x.score, None)}" if x.score is not None else "")
                      + (f" ({x.runs} run{'s' if x.runs != 1 else ''})" if x.runs is not None else "") for x in leads)
    return (f"; {named} read better from too few runs and rank after it until measured "
            f"{EXACT_MIN_RUNS} times (bench.remeasure with candidate_ids)")


def runs_coverage(samples: Samples) -> float:
    """What a score's interval from these rounds covers: 1 where every run is alike, a program's
    order-statistic coverage (under 95% from under 5 runs), else the stated 95%."""
    if not samples:
        return CONFIDENCE
    if every_run_alike(samples):
        return 1.0
    values = samples.get("program") if set(samples) == {"program"} else None
    return median_interval(values).coverage if values else CONFIDENCE
