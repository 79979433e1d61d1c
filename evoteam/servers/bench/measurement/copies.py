"""Each side of a comparison in several processes of its own: the process spread measured in the batch.

Two worker processes running identical code differ by an amount that stays the same for their
whole life, and the rounds of one batch cannot see it: on `rmsnorm_cpu` cut to one workload the
ratio of identical code spread 3.5% (SD) between batches (3.9% with four processes a batch) while
each batch's rounds gave an interval of about ±2.7%, so the fixed widening every kernel ratio gets
(stats.PROCESS_RESOLUTION, 3%) left an A/A comparison significant in 13% of trials, 30 of 80 with
four processes a batch (docs/bench.md, *Comparisons*; benchmarks/results/2026-12-05-twins_aa.txt).
How much processes differ depends on the workload and the machine, so ``compare`` measures it: each
side runs in ``COPIES`` processes (A, A', A'' and B, B', B''), and every round times all of them and
the baseline on the same inputs.

- The contrast of a round is the geometric mean of A's times over that of B's.
- A process's offset is the median over rounds of its log time less the mean log time of its
  side's processes in that round. For processes alike but for their code, the offsets of a side
  scatter about their mean as the processes do: their sum of squares over k - 1 estimates a
  process's variance with k - 1 degrees of freedom a side, and the contrast's variance is that of
  both sides over k. So the contrast over the square root of ``spread()`` is Student's t with
  2(k - 1) degrees of freedom (copystats.py), whatever the processes' spread is, so long as A's
  processes spread as B's do (so in an A/A; a side whose processes spread far more than the
  other's gets fewer degrees of freedom: simulated for twins, 5% against 0% alarmed in 8% of
  batches, not 5%). With two processes a side this is the twins' rule of 2026-12-05 exactly.
- Three a side, not two: the t interval's half width goes as t(2(k - 1)) sqrt(2 / k) times a
  process's spread, 4.30 for two and 2.27 for three; with two a side a 10% slower candidate was
  found in 5 of 10 compares on `rmsnorm_cpu` (docs/bench.md, *With copies*).
- A workload's interval is the wider of the rounds' (stats.censored_ratio_interval, without the
  fixed widening a side in one process gets: the t interval is what it stood for) and that t
  interval; a kit's is the wider of the rounds' bootstrap and the t interval from the offsets
  averaged over the workloads as the contrast is. Each of the two covers the contrast at 95% on its
  own (the t interval: the offsets hold the rounds' noise of each process's median as well as its
  lasting part), so the wider does too. Not the workloads'
  variances added as independent draws: the same workers time every workload, and on
  `rmsnorm_cpu` a process's offsets on its three workloads correlated 0.3–0.66 (50 batches,
  2026-12-05), so the kit's contrast spread 1.36% where independent draws give 1.04%.

Only ``compare`` times copies (it decides between two candidates). An evaluation's score and a
re-measurement keep one process a side and the fixed widening.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from evoteam import stats
from evoteam.copystats import batch_df, joined, unwidened
from evoteam.servers.bench.measurement.timing import Rounds

COPIES = 3  # processes a side in a compare
ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth")

Offsets = tuple[list[float], list[float]]  # each process's offset on one workload: A's, then B's


def labels(side: str, copies: int | None = None) -> tuple[str, ...]:
    """The labels of a side's processes (COPIES of them unless said): its own, then A', A''..."""
    return tuple(side + "'" * j for j in range(copies or COPIES))


def rotation(a: Sequence[str], b: Sequence[str], b_first: bool) -> list[str]:
    """The order a batch is given its sides in (the rounds' rotation keeps it, batch.py): the two
    sides' processes alternating, A B A' B' A'' B'' (``b_first``: B A B' A' B'' A''). Given
    A A' A'' B B' B'', the later side read faster: an A/A of the kit's baseline on `rmsnorm_cpu`
    gave B/A +0.65% (SE 0.19%) over 16 batches, -0.75% (SE 0.11%) with B's given first and -0.01%
    (SE 0.11%) alternating, side by side (docs/bench.md, *With copies*). Which side leads is drawn
    for each compare, so that what is left of a place's lean has no side."""
    first, second = (b, a) if b_first else (a, b)
    return [x for pair in zip(first, second) for x in pair]


def named(text: str | None, side: str) -> str | None:
    """``text`` with each of the side's other processes' labels said as the side the caller named
    ("A (in its second process)"): the caller never gave those labels."""
    if not text:
        return text
    for j in range(len(ORDINALS) - 1, 0, -1):  # A'' before A': a label is never another's start after this
        text = re.sub(re.escape(side + "'" * j) + "(?!')", f"{side} (in its {ORDINALS[j]} process)", text)
    return text


def offsets(rounds: Rounds, a: Sequence[str], b: Sequence[str]) -> Offsets | None:
    """Each process's lasting offset on this workload (the median over the rounds every process
    timed of its log time less its side's mean log time); None where a side has one process or
    no round timed them all."""
    if len(a) < 2 or len(a) != len(b):
        return None
    logs = rounds.group_logs([*a, *b])
    if not logs:
        return None
    out = []
    for part in (slice(0, len(a)), slice(len(a), len(a) + len(b))):
        deviations = [[x - sum(row[part]) / len(row[part]) for x in row[part]] for row in logs]
        out.append([stats.median([d[j] for d in deviations]) for j in range(len(a))])
    return out[0], out[1]


def spread(kept: Iterable[Offsets]) -> tuple[float, int]:
    """The variance of the log of the contrast from the processes' offsets on the workloads it is
    the mean of (one workload: its own), each process's averaged over them as the contrast is, and
    its degrees of freedom (2(k - 1) however the workloads' processes go together)."""
    found = list(kept)
    k = len(found[0][0])
    total = 0.0
    for side in (0, 1):
        for j in range(k):
            mean = sum(f[side][j] for f in found) / len(found)
            total += mean * mean
    return total / (k * (k - 1)), batch_df(k)


def workload_estimate(rounds: Rounds, a: Sequence[str], b: Sequence[str]) -> stats.Estimate | None:
    """A's time over B's, each side the geometric mean of its processes: the median of the rounds
    with the wider of the rounds' interval and the processes' t interval."""
    ratios = rounds.group_contrast(a, b)
    found = offsets(rounds, a, b)
    if not ratios or found is None:
        return None
    est = stats.censored_ratio_interval(ratios, *rounds.group_bounds(a, b))
    return joined(unwidened(est), [spread([found])])


def kit_estimate(rounds_est: stats.Estimate, kit_spread: tuple[float, int]) -> stats.Estimate:
    """The kit's contrast (the geometric mean of the workloads' medians, with the rounds' bootstrap
    interval ``rounds_est``, as stats.censored_score_estimate gives it) joined with the t interval
    of ``kit_spread`` (spread() of every workload's offsets), the fixed widening undone."""
    return joined(unwidened(rounds_est), [kit_spread])
