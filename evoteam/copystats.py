"""The arithmetic of copies (servers/bench/measurement/copies.py), shared by the bench and the store.

A contrast measured with each side in k processes carries the variance of its log that the
processes' spread about their side's mean gives (2(k - 1) degrees of freedom: 2 for twins, 4 for
three a side). Its interval is the wider of the rounds' one and a Student's t interval from that
variance; a pool of batches adds each batch's, scaled by its weight squared, with
Welch–Satterthwaite's degrees of freedom.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from evoteam import stats

TWINS_DF = 2  # what a batch of two processes a side brings (A over A', B over B'): records kept before spread_df


def batch_df(copies: int) -> int:
    """The degrees of freedom of the process variance from a batch of ``copies`` processes a side."""
    return 2 * (copies - 1)


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


def _t_tail(t: float, df: int) -> float:
    """P(T > t) for Student's t with ``df`` degrees of freedom, t >= 0."""
    x = df / (df + t * t)
    a, b = df / 2.0, 0.5
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    return 0.5 * front * _beta_fraction(a, b, x) / a


def t_quantile(confidence: float, df: float) -> float:
    """The two-sided ``confidence`` quantile of Student's t (12.706 for 95% at one degree of
    freedom, 4.303 at two); a fractional ``df`` is rounded down (the wider interval)."""
    whole, tail = max(1, int(df)), (1.0 - confidence) / 2
    lo, hi = 0.0, 1.0
    while _t_tail(hi, whole) > tail:
        hi *= 2
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _t_tail(mid, whole) > tail else (lo, mid)
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
