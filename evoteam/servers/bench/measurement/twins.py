"""Each side of a comparison in two processes of its own: the process spread measured in the batch.

Two worker processes running identical code differ by an amount that stays the same for their
whole life, and the rounds of one batch cannot see it: on `rmsnorm_cpu` cut to one workload the
ratio of identical code spread 3.5% (SD) between batches (3.9% with four processes a batch) while
each batch's rounds gave an interval of about ±2.7%, so the fixed widening every kernel ratio gets
(stats.PROCESS_RESOLUTION, 3%) left an A/A comparison significant in 13% of trials, 30 of 80 with
four processes a batch (docs/bench.md, *Comparisons*; benchmarks/results/2026-12-05-twins_aa.txt).
How much processes differ depends on the workload and the machine, so ``compare`` measures it: each
side runs in two processes (A and A', B and B'), and every round times all of them and the
baseline on the same inputs.

- The contrast of a round is the geometric mean of A's two times over that of B's two.
- A over A' and B over B' are two A/A comparisons inside the batch. For processes alike but for
  their code, the contrast's log is ``½(a1 + a2) − ½(b1 + b2)`` and the controls' are ``a1 − a2``
  and ``b1 − b2``: the contrast's variance is a quarter of the controls' together, and sums and
  differences of independent normal variables are independent, so the contrast over
  ``sqrt((c_A² + c_B²) / 4)`` (each control the median of its rounds' logs) is Student's t with
  two degrees of freedom per workload, whatever the processes' spread is, so long as A's
  processes spread as B's do (so in an A/A; a side whose processes spread far more than the
  other's gets fewer degrees of freedom than two: simulated, 5% against 0% alarmed in 8% of
  batches, not 5%).
- A workload's interval is the wider of the rounds' (stats.censored_ratio_interval, as a side in
  one process gets) and that t interval; a kit's is the wider of the rounds' bootstrap and the t
  interval from the controls averaged over the workloads as the contrast is (two degrees of
  freedom). Not the workloads' variances added as independent draws: the same four workers time
  every workload, and on `rmsnorm_cpu` a process's offsets on its three workloads correlated
  0.3–0.66 (50 batches, 2026-12-05), so the kit's contrast spread 1.36% where independent draws
  give 1.04%.

Only ``compare`` times twins (it decides between two candidates; five timed sides a round where a
single-process comparison has three). An evaluation's score and a re-measurement keep one process a
side and the fixed widening.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from evoteam import stats
from evoteam.servers.bench.measurement.timing import Rounds
from evoteam.twinstats import joined


def twin(label: str) -> str:
    """The label of a side's second process."""
    return f"{label}'"


def controls(rounds: Rounds, a: str, b: str) -> tuple[float, float] | None:
    """This workload's two in-batch A/A controls: the logs of the medians of A over A' and of B over
    B'; None where a twin was not timed."""
    logs = []
    for side in (a, b):
        ratios = rounds.contrast(side, twin(side))
        if not ratios:
            return None
        logs.append(math.log(stats.median(ratios)))
    return logs[0], logs[1]


def spread(kept: Iterable[tuple[float, float]]) -> float:
    """The variance of the log of the twins' contrast from the controls of the workloads it is the
    mean of (one workload: its own): the controls averaged the same way, a quarter of their squares
    (two degrees of freedom however the workloads' processes go together)."""
    pairs = list(kept)
    c_a = sum(p[0] for p in pairs) / len(pairs)
    c_b = sum(p[1] for p in pairs) / len(pairs)
    return (c_a * c_a + c_b * c_b) / 4


def workload_estimate(rounds: Rounds, a: str, b: str) -> stats.Estimate | None:
    """A's time over B's, each side the geometric mean of its two processes: the median of the
    rounds with the wider of the rounds' interval and the twins' t interval."""
    sa, sb = (a, twin(a)), (b, twin(b))
    ratios = rounds.group_contrast(sa, sb)
    found = controls(rounds, a, b)
    if not ratios or found is None:
        return None
    est = stats.censored_ratio_interval(ratios, *rounds.group_bounds(sa, sb))
    return joined(est, [spread([found])])


def kit_estimate(rounds_est: stats.Estimate, kit_spread: float) -> stats.Estimate:
    """The kit's contrast (the geometric mean of the workloads' medians, with the rounds' bootstrap
    interval ``rounds_est``) joined with the t interval of ``kit_spread`` (spread() of every
    workload's controls)."""
    return joined(rounds_est, [kit_spread])
