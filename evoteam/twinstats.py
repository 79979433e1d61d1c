"""The arithmetic of twins (servers/bench/measurement/twins.py), shared by the bench and the store.

A contrast measured with each side in two processes carries the variance of its log that the
batch's two A/A controls give (two degrees of freedom). Its interval is the wider of the rounds'
one and a Student's t interval from that variance; a pool of batches adds each batch's, scaled by
its weight squared, with Welch–Satterthwaite's degrees of freedom.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from evoteam import stats

DF_PER_BATCH = 2  # two controls a batch: A over A', B over B' (averaged over a kit's workloads)


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


def joined(rounds_est: stats.Estimate, parts: Iterable[float], confidence: float = stats.CONFIDENCE) -> stats.Estimate:
    """``rounds_est`` widened to cover the t interval (around its value, at ``confidence``) of a log
    whose variance is the sum of ``parts``, each already scaled by its weight squared and estimated
    with two degrees of freedom (Welch–Satterthwaite for their sum). No parts: ``rounds_est``."""
    parts = [p for p in parts if p >= 0]
    if not parts:
        return rounds_est
    total = sum(parts)
    squares = sum(p * p for p in parts)
    df = total * total / (squares / DF_PER_BATCH) if squares else DF_PER_BATCH * len(parts)
    half = t_quantile(confidence, df) * math.sqrt(total)
    lo, hi = rounds_est.value * math.exp(-half), rounds_est.value * math.exp(half)
    return stats.Estimate(rounds_est.value, min(rounds_est.lo, lo), max(rounds_est.hi, hi), rounds_est.n,
                          rounds_est.coverage)
