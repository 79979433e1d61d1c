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
  both sides over k. So the contrast over the square root of ``spread()`` is close to Student's t
  with Welch–Satterthwaite's degrees of freedom from the two sides' spreads (copystats.sides_df):
  2(k - 1) where they spread alike (an A/A), down to k - 1 where one side's processes do not
  differ (A and B are other code, and where a process landed may matter to one and not the
  other). With two processes a side the variance is the twins' rule of 2026-12-05.
- Three a side, not two: the t interval's half width goes (sides alike) as t(2(k - 1)) sqrt(2 / k)
  times a process's spread, 4.30 for two and 2.27 for three; with two a side a 10% slower
  candidate was found in 5 of 10 compares on `rmsnorm_cpu` (docs/bench.md, *With copies*).
- A workload's interval is the wider of the rounds' (stats.censored_ratio_interval, without the
  fixed widening a side in one process gets: the t interval is what it stood for) and that t
  interval; a kit's is the wider of the rounds' bootstrap and the t interval from the offsets
  averaged over the workloads as the contrast is. The t interval holds what differs between a
  side's processes (their lasting offsets and each one's own rounds' noise), the rounds' interval
  what differs between rounds (noise that all of one side's processes share in a round included,
  which the offsets cannot see). Not the workloads' variances added as independent draws: the
  same workers time every workload, and on `rmsnorm_cpu` a process's offsets on its three
  workloads correlated 0.3–0.66 (50 batches, 2026-12-05), so the kit's contrast spread 1.36% where
  independent draws give 1.04%.

``compare`` times copies, and so does an evaluation with ``repeats`` (2 or more) on a kernel kit:
the candidate and the baseline each in three processes (evaluation_rounds). There the fixed
widening stays on the rounds' interval beside the t interval: a candidate far from the baseline
also differs from it by what changes between batches, which neither the rounds nor the processes
of one batch see (better.py against the baseline: its score spread 1.4-1.8% over batches where
one batch's processes and rounds gave ~0.7%; for close candidates, +5 and +10% of work, 0.3-0.5%
against ~0.7%: docs/bench.md, *Evaluations with repeats*). So does a re-measurement of up to
six sides (report/batchruns.py): each side, the copy of the baseline included, in three processes
and scored as an evaluation with repeats is, every two finalists' paired rounds read as compare
reads its copies; a larger batch keeps one process a side and the fixed widening.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence

from evoteam import stats
from evoteam.copystats import joined, sides_df, unwidened
from evoteam.servers.bench.measurement.sides import ORDINALS  # the most a side can have (MAX_DF)
from evoteam.servers.bench.measurement.timing import Rounds

COPIES = 3  # processes a side in a compare and in an evaluation with repeats
MAX_ROUNDS = 100  # an evaluation's rounds at most (evaluate's rule for repeats)

Offsets = tuple[list[float], list[float]]  # each process's offset on one workload: A's, then B's


def labels(side: str, copies: int | None = None) -> tuple[str, ...]:
    """The labels of a side's processes (COPIES of them unless said): its own, then A', A''..."""
    count = copies or COPIES
    if not 1 <= count <= len(ORDINALS):
        raise ValueError(f"a side runs in 1 to {len(ORDINALS)} processes, not {count}")
    return tuple(side + "'" * j for j in range(count))


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
    ("A (in its second process)"): the caller never gave those labels. Workers' messages use a
    label's possessive too ("the candidate A'''s scheduling": A'' and 's), so those go first, and a
    label followed by "s" is never taken for another: "cand_x's" is the first process's."""
    if not text:
        return text
    for j in range(len(ORDINALS) - 1, 0, -1):  # A'' before A': a label is never another's start after this
        text = re.sub(r"(?<![\w'])" + re.escape(side + "'" * j) + r"'s\b",
                      f"{side} (in its {ORDINALS[j]} process)'s", text)
    for j in range(len(ORDINALS) - 1, 0, -1):
        text = re.sub(r"(?<![\w'])" + re.escape(side + "'" * j) + r"(?!'|s\b)",
                      f"{side} (in its {ORDINALS[j]} process)", text)
    return text


def named_evaluation(e, side: str):
    """A side's evaluation (one of its other processes' that failed) with those processes' labels
    said as the side (named): its message, flags and workloads' messages."""
    return e.model_copy(update={"message": named(e.message, side), "flags": [named(f, side) for f in e.flags],
                                "workloads": [w.model_copy(update={"message": named(w.message, side)})
                                              for w in e.workloads]})


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


def spread(kept: Iterable[Offsets]) -> tuple[float, float]:
    """The variance of the log of the contrast from the processes' offsets on the workloads it is
    the mean of (one workload: its own), each process's averaged over them as the contrast is, and
    its degrees of freedom (copystats.sides_df: 2(k - 1) where the two sides' processes spread
    alike, fewer where not; however the workloads' processes go together)."""
    found = list(kept)
    k = len(found[0][0])
    squares = []
    for side in (0, 1):
        means = [sum(f[side][j] for f in found) / len(found) for j in range(k)]
        squares.append(sum(m * m for m in means))
    v_a, v_b = (x / (k * (k - 1)) for x in squares)  # each side's share of the contrast's variance
    return v_a + v_b, sides_df(v_a, v_b, k - 1)


def workload_estimate(rounds: Rounds, a: Sequence[str], b: Sequence[str],
                      widened: bool = False) -> stats.Estimate | None:
    """A's time over B's, each side the geometric mean of its processes: the median of the rounds
    with the wider of the rounds' interval and the processes' t interval. ``widened`` keeps the
    fixed widening on the rounds' interval (an evaluation's: see the module's docstring)."""
    ratios = rounds.group_contrast(a, b)
    found = offsets(rounds, a, b)
    if not ratios or found is None:
        return None
    est = stats.censored_ratio_interval(ratios, *rounds.group_bounds(a, b))
    return joined(est if widened else unwidened(est), [spread([found])])


def evaluation_rounds(kit_rounds: int, repeats: int) -> int:
    """The rounds of an evaluation with ``repeats`` (2 or more) in copies: the kit's and ``repeats``
    at least (a kit of one round still gets an interval), and the kit's times repeats shared among
    a side's processes (three processes for the kit's rounds cost 1.1-1.3x what one took for three
    times them: docs/bench.md, *Evaluations with repeats*), at most MAX_ROUNDS."""
    return min(MAX_ROUNDS, max(kit_rounds, math.ceil(kit_rounds * repeats / COPIES), repeats))


def kit_estimate(rounds_est: stats.Estimate, kit_spread: tuple[float, float]) -> stats.Estimate:
    """The kit's contrast (the geometric mean of the workloads' medians, with the rounds' bootstrap
    interval ``rounds_est``, as stats.censored_score_estimate gives it) joined with the t interval
    of ``kit_spread`` (spread() of every workload's offsets), the fixed widening undone."""
    return joined(unwidened(rounds_est), [kit_spread])
