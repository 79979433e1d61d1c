"""From timed rounds to estimates: what a round is, what is subtracted, and the intervals.

A round (session.measure_sides) gives, for every timed side, ``reps_per_round`` harness-clocked
calls on fresh inputs that every side gets alike, and, in the empty-call worker (a confined worker
of their own, session.py), as many empty calls (the whole call path with no kernel in between). Per round and side the time is the fastest
of its calls (delays only ever add to a call; no call is fast by luck, since its inputs exist only
from its start and its output is checked), less the call path: the median over rounds of each
round's fastest empty call (see ``Rounds.path``), measured in a worker that runs the kit's baseline
code and that no candidate can reach, so a candidate cannot inflate it. A net time is only known to within the spread of the
rounds' fastest empty calls (``Rounds.resolution``); one below it is unresolved: it counts as the
resolution itself in the point, never as the 1 us floor, and its round's ratio becomes a range
that the intervals cover (``Rounds.bounds``). A round's speedup is the paired ratio
baseline/candidate of the same round; the workload's speedup is the median of its rounds with
the exact order-statistic interval (stats.median_interval), and the kit score is
stats.score_estimate over the workloads' rounds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from evoteam import stats

BASELINE = "baseline"
FLOOR_NS = 1000  # 1 us: below the harness's resolution a time is not a time
UNRESOLVED = "time not resolved"  # how a workload's note of unresolved rounds begins (interleave.py, batch.py)
# Said in the message where such a workload's score still has a verdict: only its own note said so, and a
# 16x kernel at 15.9x (14.3-223) ranked below a slower control (mp80).
UNRESOLVED_SAID = ("time not resolved in some rounds (its message says why): its speedup reads closer to 1 and the "
                   "score's interval stretches, so the score's rank is loose; bench.compare by id settles a ranking")
# The process-to-process widening of every kernel ratio interval lives in stats.py (one rule for
# the bench and the store's pooling).


@dataclass
class Rounds:
    """One workload's timed rounds: per round and side the fastest call (raw harness clock), and
    every empty call (the empty-call worker's)."""

    labels: list[str]
    per_round: list[dict[str, int]] = field(default_factory=list)
    nulls: list[int] = field(default_factory=list)
    round_nulls: list[int] = field(default_factory=list)
    spent_ns: dict[str, int] = field(default_factory=dict)
    # Other runnable processes on the machine at the end of each round (machine.runnable_others).
    runnable: list[int] = field(default_factory=list)

    def add(self, nulls: list[int], times: dict[str, list[int]]) -> None:
        if BASELINE not in times or not nulls:
            return
        self.nulls.extend(nulls)
        self.round_nulls.append(min(nulls))
        self.per_round.append({label: min(ns) for label, ns in times.items() if ns})
        for label, ns in times.items():
            self.spent_ns[label] = self.spent_ns.get(label, 0) + sum(ns)

    @property
    def floor(self) -> int:
        """The fastest empty call of all rounds (what the path costs at the very least)."""
        return min(self.nulls) if self.nulls else 0

    @property
    def path(self) -> int:
        """What is subtracted from every round's time: the median over rounds of each round's
        fastest empty call. A round's time is a side's fastest of ``reps_per_round`` calls, and a
        round's empty-call time the fastest of as many empty calls spread over the same round, so
        both carry the same kind of wait for a CPU; the median over rounds keeps one delayed round
        of empty calls from taking kernel time away. Subtracting only the floor would leave that
        wait in every time (on a busy machine hundreds of microseconds per call) and pull short
        kernels' speedups toward 1."""
        return int(stats.median(self.round_nulls)) if self.round_nulls else 0

    @property
    def resolution(self) -> int:
        """The smallest net time these rounds can tell from zero: how far the rounds' fastest
        empty calls spread (their upper quartile, nearest rank, less the fastest of all: with
        two rounds the slower one), at least FLOOR_NS. A side's round time is a fastest call
        too, so it carries the same kind of wait; a net time within that spread is within what
        waiting for a CPU alone does to a call. On a quiet machine the spread is tens of
        microseconds; under load it is milliseconds, and a side whose raw time fell below the
        subtracted path was credited with the 1 us floor: a baseline delayed by 1.7 ms against
        a floored candidate read as 1,663x. The quartile, not the slowest round, so that one
        round of waiting empty calls among ten does not make every kernel unresolved."""
        if not self.round_nulls:
            return FLOOR_NS
        ordered = sorted(self.round_nulls)
        upper = ordered[math.ceil(0.75 * len(ordered)) - 1]  # upper quartile, nearest rank
        return max(FLOOR_NS, upper - self.floor)

    def unresolved(self, label: str) -> int:
        """How many rounds' net times of this side were below the resolution."""
        res, path = self.resolution, self.path
        return sum(1 for r in self.per_round if label in r and r[label] - path < res)

    def _net(self, i: int, label: str) -> int:
        # An unresolved time counts as the resolution: a round's ratio is then never larger
        # (or smaller) than what the measurement can back, and a round where neither side is
        # resolved reads as no difference. This understates a kernel that is really faster
        # than the resolution (its speedup is at least the reported one), never overstates it.
        return max(self.resolution, self.per_round[i][label] - self.path)

    def times(self, label: str) -> list[int]:
        """This side's time per round, the call path subtracted."""
        return [self._net(i, label) for i, r in enumerate(self.per_round) if label in r]

    def _paired(self, a: str, b: str) -> list[float]:
        return [self._net(i, a) / self._net(i, b) for i, r in enumerate(self.per_round) if a in r and b in r]

    def _mean_net(self, i: int, labels: Sequence[str]) -> float:
        """The geometric mean of these sides' net times in round ``i`` (one side: its time)."""
        return stats.geomean([self._net(i, x) for x in labels])

    def group_logs(self, labels: Sequence[str]) -> list[list[float]]:
        """Per round that timed every one of these sides: the logs of their net times, in order."""
        return [[math.log(self._net(i, x)) for x in labels] for i, r in enumerate(self.per_round)
                if all(x in r for x in labels)]

    def group_contrast(self, a: Sequence[str], b: Sequence[str]) -> list[float]:
        """Per round: the geometric mean of the A processes' times over that of the B processes'
        (copies.py: each side timed in processes of its own), paired on the same inputs."""
        both = [*a, *b]
        return [self._mean_net(i, a) / self._mean_net(i, b) for i, r in enumerate(self.per_round)
                if all(x in r for x in both)]

    def group_bounds(self, a: Sequence[str], b: Sequence[str]) -> tuple[list[float], list[float]]:
        """group_contrast's rounds as bounds() gives one side's: the smallest and largest ratio each
        round's measurements allow."""
        # The same arithmetic as group_contrast's (stats.geomean of each side, then the ratio): every
        # step is monotone, so each round's ratio lies within its bounds to the last bit. Computed
        # another way (one exp of a difference of mean logs) a resolved round's bound came out an ulp
        # off its ratio, and the store refused the whole measurement (held-out, repeats 5; mp43).
        lows, highs = [], []
        for i, r in enumerate(self.per_round):
            if all(x in r for x in (*a, *b)):
                ends = {x: self._range(i, x) for x in (*a, *b)}

                def mean(labels: Sequence[str], end: int) -> float:
                    return stats.geomean([ends[x][end] for x in labels])

                lows.append(mean(a, 0) / mean(b, 1))
                highs.append(mean(a, 1) / mean(b, 0))
        return lows, highs

    def ratios(self, label: str) -> list[float]:
        """Per round: the baseline's time over this side's (its speedup in that round)."""
        return self._paired(BASELINE, label)

    def contrast(self, a: str, b: str) -> list[float]:
        """Per round: A's time over B's (above 1: B is faster), paired on the same inputs."""
        return self._paired(a, b)

    def _range(self, i: int, label: str) -> tuple[int, int]:
        """What this side's kernel time in round ``i`` may have been: its net time when resolved;
        otherwise anything from FLOOR_NS up to its raw time less the fastest empty call (every
        call pays at least that), and at least the resolution."""
        raw = self.per_round[i][label]
        net = raw - self.path
        if net >= self.resolution:
            return net, net
        return FLOOR_NS, max(self.resolution, raw - self.floor)

    def bounds(self, a: str, b: str) -> tuple[list[float], list[float]]:
        """Per round: the smallest and largest A-time over B-time that round's measurements
        allow (equal to the ratio where both times are resolved)."""
        lows, highs = [], []
        for i, r in enumerate(self.per_round):
            if a in r and b in r:
                (a_lo, a_hi), (b_lo, b_hi) = self._range(i, a), self._range(i, b)
                lows.append(a_lo / b_hi)
                highs.append(a_hi / b_lo)
        return lows, highs

    def censored(self, a: str, b: str) -> bool:
        """Whether any round's A/B ratio is only known as a range (an unresolved time)."""
        lows, highs = self.bounds(a, b)
        return lows != highs

    def estimate(self, a: str, b: str) -> stats.Estimate | None:
        """A's time over B's: the median of the rounds' ratios (unresolved times counted at the
        resolution, so toward 1), with an interval that also covers every value the unresolved
        rounds allow: its lower end from each round's smallest possible ratio, its upper end
        from each round's largest. A kernel the rounds cannot resolve thus gets an interval
        reaching what a 1 us kernel would give, never a point score from that floor."""
        ratios = self._paired(a, b)
        if not ratios:
            return None
        return stats.censored_ratio_interval(ratios, *self.bounds(a, b))

    def speedup(self, label: str) -> stats.Estimate | None:
        return self.estimate(BASELINE, label)

    def median_ms(self, label: str) -> float | None:
        t = self.times(label)
        return stats.median(t) / 1e6 if t else None

    def kernel_s(self, label: str) -> float:
        """Time inside timed calls of this side and its share of the baseline's."""
        share = len([x for x in self.labels if x != BASELINE]) or 1
        return (self.spent_ns.get(label, 0) + self.spent_ns.get(BASELINE, 0) / share) / 1e9

    def summary(self) -> dict:
        """What was subtracted and how steady the path was, for the evaluation's metrics."""
        if not self.nulls:
            return {}
        out = {"call_path_floor_us": round(self.floor / 1e3, 1),
               "call_path_subtracted_us": round(self.path / 1e3, 1),
               "resolution_us": round(self.resolution / 1e3, 1),
               "rounds": len(self.per_round)}
        unresolved = {label: n for label in self.labels if (n := self.unresolved(label))}
        if unresolved:
            out["unresolved_rounds"] = unresolved
        return out


def kit_estimate(samples: dict[str, list[float]], kind: str = "kernel",
                 ranges: dict[str, tuple[list[float], list[float]]] | None = None) -> stats.Estimate | None:
    """The kit score (or a contrast) with its interval from per-workload rounds of paired ratios,
    widened for the process-to-process difference (None without measurements). ``ranges``: per
    workload, each round's smallest and largest possible ratio (Rounds.bounds) where some time
    was unresolved; the interval then also covers the scores those allow (stats.py: the store
    pools by the same rule)."""
    clean = {k: v for k, v in samples.items() if v}
    if not clean:
        return None
    return stats.censored_score_estimate(clean, ranges, kind)
