"""Each side of a comparison in two processes of its own: the process spread measured in the batch.

Two worker processes running identical code differ by an amount that stays the same for their
whole life, and the rounds of one batch cannot see it: on `rmsnorm_cpu` cut to one workload the
ratio of identical code spread 3.4% (SD) between batches while each batch's rounds gave an
interval of about ±2%, so the fixed widening every kernel ratio gets (stats.PROCESS_RESOLUTION,
3%) left an A/A comparison significant in 13% of trials, 30 of 80 with four processes a batch
(docs/bench.md, *Comparisons*; benchmarks/results/2026-12-05-twins_aa.txt). How
much processes differ depends on the workload and the machine, so ``compare`` measures it: each
side runs in two processes (A and A', B and B'), and every round times all of them and the
baseline on the same inputs.

- The contrast of a round is the geometric mean of A's two times over that of B's two.
- A over A' and B over B' are two A/A comparisons inside the batch. For processes alike but for
  their code, the contrast's log is ``½(a1 + a2) − ½(b1 + b2)`` and the controls' are ``a1 − a2``
  and ``b1 − b2``: the contrast's variance is a quarter of the controls' together, and sums and
  differences of independent normal variables are independent, so the contrast over
  ``sqrt((c_A² + c_B²) / 4)`` (each control the median of its rounds' logs) is Student's t with
  two degrees of freedom per workload, whatever the processes' spread is.
- A workload's interval is the wider of the rounds' (stats.censored_ratio_interval, as a side in
  one process gets) and that t interval; a kit's is the wider of the rounds' bootstrap and the t
  interval of the mean of the workloads' logs (Welch–Satterthwaite degrees of freedom: each
  workload's processes are its own draw, as the data of 2026-12-05 show).

Only ``compare`` times twins (it decides between two candidates; five timed sides a round where a
single-process comparison has three). An evaluation's score and a re-measurement keep one process a
side and the fixed widening.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from evoteam import stats
from evoteam.servers.bench.measurement.timing import Rounds

# Student's t, two-sided 95% (the 97.5% quantile), by whole degrees of freedom.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
         2.045, 2.042)
_Z975 = 1.959964


def twin(label: str) -> str:
    """The label of a side's second process."""
    return f"{label}'"


def t975(df: float) -> float:
    """Student's t 97.5% quantile; a fractional ``df`` is rounded down (the wider interval)."""
    whole = max(1, int(df))
    if whole <= len(_T975):
        return _T975[whole - 1]
    z = _Z975  # Cornish–Fisher: within 0.001 of the exact quantile from 30 degrees of freedom
    return z + (z ** 3 + z) / (4 * whole) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * whole ** 2)


def spread(rounds: Rounds, a: str, b: str) -> float | None:
    """The variance of the log of the twins' contrast (B over A) on this workload, from its two
    in-batch A/A controls (two degrees of freedom); None where a twin was not timed."""
    logs = []
    for side in (a, b):
        ratios = rounds.contrast(side, twin(side))
        if not ratios:
            return None
        logs.append(math.log(stats.median(ratios)))
    return sum(c * c for c in logs) / 4


def _joined(rounds_est: stats.Estimate, value: float, s2: float, df: float) -> stats.Estimate:
    half = t975(df) * math.sqrt(s2)
    lo, hi = value * math.exp(-half), value * math.exp(half)
    return stats.Estimate(rounds_est.value, min(rounds_est.lo, lo), max(rounds_est.hi, hi), rounds_est.n,
                          rounds_est.coverage)


def workload_estimate(rounds: Rounds, a: str, b: str) -> stats.Estimate | None:
    """A's time over B's, each side the geometric mean of its two processes: the median of the
    rounds with the wider of the rounds' interval and the twins' t interval."""
    sa, sb = (a, twin(a)), (b, twin(b))
    ratios = rounds.group_contrast(sa, sb)
    s2 = spread(rounds, a, b)
    if not ratios or s2 is None:
        return None
    est = stats.censored_ratio_interval(ratios, *rounds.group_bounds(sa, sb))
    return _joined(est, est.value, s2, 2)


def kit_estimate(rounds_est: stats.Estimate, spreads: Mapping[str, float]) -> stats.Estimate:
    """The kit's contrast (the geometric mean of the workloads' medians, with the rounds' bootstrap
    interval ``rounds_est``) joined with the t interval of the mean of the workloads' logs: each
    workload's twins are their own draw, so the variances add, over the count squared, with
    Welch–Satterthwaite's degrees of freedom (two per workload where they are alike)."""
    parts: Sequence[float] = list(spreads.values())
    if not parts:
        return rounds_est
    w = len(parts)
    s2 = sum(parts) / (w * w)
    df = 2.0 if w == 1 else (sum(parts) ** 2 / sum(p * p / 2 for p in parts) if any(parts) else 2.0 * w)
    return _joined(rounds_est, rounds_est.value, s2, df)
