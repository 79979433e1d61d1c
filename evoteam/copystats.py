"""The arithmetic of copies (servers/bench/measurement/copies.py), shared by the bench and the store.

A contrast measured with each side in k processes carries the variance of its log that the
processes' spread about their side's mean gives, with Welch–Satterthwaite's degrees of freedom
from the two sides' spreads (2(k - 1) where they spread alike, k - 1 where one side's processes
do not differ at all: 2 to 4 for three a side). Its interval is the wider of the rounds' one and
a Student's t interval from that variance; a pool of batches adds each batch's, scaled by its
weight squared, with Welch–Satterthwaite's degrees of freedom again.

Separate measurements (a candidate's evaluations, a pair's paired batches) are process pairs of
their own too: where they differ by more than their intervals allow, their pool is widened to the
random-effects interval of their logs (between_measurements).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable

from evoteam import stats

TWINS_DF = 2  # what a batch of two processes a side brought (A over A', B over B'): records kept before spread_df
MAX_DF = 10.0  # 2(k - 1) for the most processes a side copies.py can name


def sides_df(v_a: float, v_b: float, per_side: int) -> float:
    """The degrees of freedom of ``v_a + v_b``, each side's variance estimated from ``per_side``
    (k - 1) of its own: as many as both sides together where they spread alike, as one side's where
    the other's processes do not differ (Welch–Satterthwaite). The sum alone would take 2(k - 1)
    for granted: simulated, three a side with A's processes 2% apart and B's alike called an A/A
    significant in 9-10% of batches (a review, 2026-12-05)."""
    if v_a + v_b <= 0:
        return 2.0 * per_side
    return (v_a + v_b) ** 2 * per_side / (v_a * v_a + v_b * v_b)


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularized incomplete beta function (modified Lentz)."""
    tiny, c, d = 1e-300, 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-12:
            break
    return h


def _t_tail(t: float, df: float) -> float:
    """P(T > t) for Student's t with ``df`` degrees of freedom, t >= 0."""
    x = df / (df + t * t)
    a, b = df / 2.0, 0.5
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    return 0.5 * front * _beta_fraction(a, b, x) / a


def t_quantile(confidence: float, df: float) -> float:
    """The two-sided ``confidence`` quantile of Student's t (12.706 for 95% at one degree of
    freedom, 4.303 at two); ``df`` may be fractional (Welch–Satterthwaite's), at least 1."""
    df, tail = max(1.0, float(df)), (1.0 - confidence) / 2
    lo, hi = 0.0, 1.0
    while _t_tail(hi, df) > tail:
        hi *= 2
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _t_tail(mid, df) > tail else (lo, mid)
    return hi


def unwidened(est: stats.Estimate) -> stats.Estimate:
    """stats.widen() undone: a batch of copies measures the process difference that widening stands
    for, so its rounds' interval joins the t interval without it."""
    if est.coverage == 0:  # as widen(): a single measurement was not widened
        return est
    f = 1.0 + stats.PROCESS_RESOLUTION
    return stats.Estimate(est.value, est.lo * f, est.hi / f, est.n, est.coverage)


def joined(rounds_est: stats.Estimate, parts: Iterable[tuple[float, float]],
           confidence: float = stats.CONFIDENCE) -> stats.Estimate:
    """``rounds_est`` widened to cover the t interval (around its value, at ``confidence``) of a log
    whose variance is the sum of ``parts``, each ``(variance, degrees of freedom)`` with the
    variance already scaled by its weight squared (Welch–Satterthwaite for their sum). No parts:
    ``rounds_est``."""
    parts = [(v, df) for v, df in parts if v >= 0 and df > 0]
    if not parts:
        return rounds_est
    total = sum(v for v, _ in parts)
    squares = sum(v * v / df for v, df in parts)
    df = total * total / squares if squares else sum(df for _, df in parts)
    half = t_quantile(confidence, df) * math.sqrt(total)
    lo, hi = rounds_est.value * math.exp(-half), rounds_est.value * math.exp(half)
    return stats.Estimate(rounds_est.value, min(rounds_est.lo, lo), max(rounds_est.hi, hi), rounds_est.n,
                          rounds_est.coverage)


def processes_of(metrics: dict | None) -> int:
    """The processes each side of a measurement was timed in, as its metrics say
    (``processes_per_side``: 3 for one in copies); 1 where they do not say it."""
    n = (metrics or {}).get("processes_per_side")
    return n if isinstance(n, int) and n > 1 else 1


def interval_pair(lo: object, hi: object) -> list[float] | None:
    """Two ends as an interval: two finite numbers, the lower first; else None (a record's shown
    interval, a measurement's in a candidate's history)."""
    try:
        lo, hi = float(lo), float(hi)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return [lo, hi] if lo <= hi and math.isfinite(lo) and math.isfinite(hi) else None


def as_shown(est: stats.Estimate | None, shown: object) -> stats.Estimate | None:
    """``est`` (a first measurement's interval as the store re-estimates it from the rounds) widened
    to the interval the bench showed for it, ``shown`` ([lo, hi], from its metrics), where that is
    wider: an evaluation in copies joins the processes' t interval to its rounds' (batch._grouped),
    which the rounds alone do not give. Never narrower, so a record cannot rank higher by it."""
    pair = interval_pair(*shown) if isinstance(shown, (list, tuple)) and len(shown) == 2 else None
    if est is None or pair is None:
        return est
    return stats.Estimate(est.value, min(est.lo, pair[0]), max(est.hi, pair[1]), est.n, est.coverage)


def _normal_quantile(confidence: float) -> float:
    from statistics import NormalDist
    return NormalDist().inv_cdf(0.5 + confidence / 2)


# The 95% quantile of chi-squared for 1-19 degrees of freedom (a candidate keeps 20 measurements).
CHI2_95 = (3.841, 5.991, 7.815, 9.488, 11.070, 12.592, 14.067, 15.507, 16.919, 18.307,
           19.675, 21.026, 22.362, 23.685, 24.996, 26.296, 27.587, 28.869, 30.144)


Measured = tuple[float, float, float] | tuple[float, float, float, float | None]


def _log_points(measured: Iterable[Measured]) -> tuple[list[tuple[float, float]],
                                                       list[tuple[float, float, float | None]]]:
    """Each usable measurement's log score (kept within its interval) and the variance of that log
    its 95% interval gives, with the log ends of that interval and the degrees of freedom of a t
    interval (a batch of copies: its fourth item), else None."""
    z = _normal_quantile(stats.CONFIDENCE)
    points: list[tuple[float, float]] = []
    ends: list[tuple[float, float, float | None]] = []
    for item in measured:
        try:
            value, lo, hi = item[:3]
            df = item[3] if len(item) > 3 and isinstance(item[3], (int, float)) and 1 <= item[3] < math.inf else None
            if not (0 < lo < hi and math.isfinite(hi) and math.isfinite(value)):
                continue
            low, high = math.log(lo), math.log(hi)
            variance = ((high - low) / (2 * z)) ** 2
        except (TypeError, ValueError):
            continue
        if variance > 0:  # ends a last bit apart have none to weigh by
            points.append((math.log(min(max(value, lo), hi)), variance))
            ends.append((low, high, df))
    return points, ends


@functools.lru_cache(maxsize=256)
def _stretch(confidence: float, df: float | None) -> float:
    """How much wider an interval is at ``confidence`` than at 95%: normal, or Student's t."""
    if df is None:
        return _normal_quantile(confidence) / _normal_quantile(stats.CONFIDENCE)
    return t_quantile(confidence, df) / t_quantile(stats.CONFIDENCE, df)


def _cochran_q(points: list[tuple[float, float]]) -> tuple[float, list[float], float]:
    """Cochran's Q of the points, their fixed-effect weights and those weights' sum."""
    weights = [1.0 / v for _, v in points]
    total = sum(weights)
    mean = sum(w * y for w, (y, _) in zip(weights, points)) / total
    return sum(w * (y - mean) ** 2 for w, (y, _) in zip(weights, points)), weights, total


def measurements_disagree(measured: Iterable[Measured]) -> bool:
    """Whether separate measurements (as between_measurements takes them) differ by more than their
    own intervals allow at 95% (Cochran's Q beyond its chi-squared quantile): said to the model. Two
    that overlap can give a Q just over its degrees of freedom, which widens the pool a little but
    is what chance gives one time in three; "they differ" was said of two such (mp51)."""
    points, _ = _log_points(measured)
    if len(points) < 2:
        return False
    try:
        q, _, _ = _cochran_q(points)
    except ArithmeticError:
        return False
    df = len(points) - 1
    if df <= len(CHI2_95):
        return q > CHI2_95[df - 1]
    return q > df * (1 - 2 / (9 * df) + 1.645 * math.sqrt(2 / (9 * df))) ** 3  # Wilson-Hilferty


def between_measurements(est: stats.Estimate | None, measured: Iterable[Measured],
                         confidence: float = stats.CONFIDENCE) -> stats.Estimate | None:
    """``est`` (a pooled candidate's interval, from all its rounds as one sample) widened where its
    separate measurements, each ``(score, lo, hi)`` with its own 95% interval (a fourth item: the
    degrees of freedom of a t interval), differ by more than those intervals allow: the
    random-effects interval of their log scores (DerSimonian–Laird:
    the between-measurement variance from Cochran's Q beyond its degrees of freedom, each
    measurement's standard error from its interval's width), kept within the span of their own
    intervals. Identical code read 3.79x (3.50–4.92), then 2.69x (2.53–3.01), on a quiet machine
    (mp47): the rounds pooled as one sample gave an interval that neither measurement's process
    supports. Measurements that agree (Q at most its degrees of freedom) leave ``est`` as it is;
    so do fewer than two with an interval. Never narrower, so no record ranks higher by it; never
    past the measurements' own ends, so measuring again never ranks a code below what its worst
    measurement alone would give, and two batches that agree on a gain's sign keep it (review,
    2026-12-06). An interval below 95% (few rounds) or a t interval (copies) reads as a larger
    error than it is: less widening, not more. Numbers it cannot use leave ``est`` as it is."""
    if est is None:
        return est
    points, ends = _log_points(measured)
    if len(points) < 2:
        return est
    try:
        q, weights, total = _cochran_q(points)
        scale = sum(w * (total - w) for w in weights) / total  # S1 - S2/S1, without its cancellation
        if q <= len(points) - 1 or scale <= 0:
            return est
        spread = (q - (len(points) - 1)) / scale
        weights = [1.0 / (v + spread) for _, v in points]
        mean = sum(w * y for w, (y, _) in zip(weights, points)) / sum(weights)
        half = _normal_quantile(confidence) / math.sqrt(sum(weights))
        # The measurements' own ends, read at ``confidence`` about their middles (a pick of the best
        # reads 97.5% or more: capped at their 95% ends, it read as 95%; review 2026-12-06).
        caps = [((low + high) / 2, (high - low) / 2 * _stretch(confidence, df)) for low, high, df in ends]
        lo = math.exp(max(mean - half, min(middle - width for middle, width in caps)))
        hi = math.exp(min(mean + half, max(middle + width for middle, width in caps)))
    except (ArithmeticError, ValueError):
        return est
    return stats.Estimate(est.value, min(est.lo, lo), max(est.hi, hi), est.n, est.coverage)
