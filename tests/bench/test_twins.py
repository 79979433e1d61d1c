"""Twins (measurement/twins.py): a comparison's interval covers the process-to-process spread it
measures, where the fixed widening did not. The simulated processes differ by a lasting offset
each (as the machine's workers do: docs/bench.md, "Comparisons"), and their rounds by noise that
every round's sides do not share."""

from __future__ import annotations

import math
import random

from evoteam import stats
from evoteam.servers.bench.measurement import twins
from evoteam.servers.bench.measurement.timing import BASELINE, Rounds

SIDES = ("A", "A'", "B", "B'")


def _batch(rng: random.Random, process_sd: float, round_sd: float, effect: float = 1.0, n: int = 30,
           ns: float = 1e6) -> Rounds:
    """One batch: every side a process with its own offset; B's code ``effect`` times faster."""
    offset = {label: math.exp(rng.gauss(0, process_sd)) for label in (*SIDES, BASELINE)}
    r = Rounds(labels=[*SIDES])
    for _ in range(n):
        machine = math.exp(rng.gauss(0, 0.02))  # what every side of the round shares
        times = {}
        for label, off in offset.items():
            speed = effect if label.startswith("B") else 1.0
            times[label] = [int(ns * off * machine * math.exp(rng.gauss(0, round_sd)) / speed)]
        r.add([1000], times)
    return r


def _alarms(estimates: list[stats.Estimate]) -> float:
    return sum(not e.contains(1.0) for e in estimates) / len(estimates)


def test_t_quantiles():
    assert twins.t975(1) == 12.706 and twins.t975(2) == 4.303 and twins.t975(2.9) == 4.303
    assert abs(twins.t975(30) - 2.042) < 1e-9
    assert abs(twins.t975(60) - 2.0003) < 0.001 and abs(twins.t975(1000) - 1.9623) < 0.001
    qs = [twins.t975(df) for df in range(1, 200)]
    assert all(a >= b for a, b in zip(qs, qs[1:]))


def test_one_workload_covers_what_processes_add():
    """Lasting process offsets of 3% (SD) against 1% of round noise: the single-process rule (the
    rounds' interval widened by 3%) calls identical code different far more often than 1 in 20;
    the twins' interval about as often as its 95% says. What that costs: from two degrees of
    freedom a 10% gain is found in about 40% of batches against such processes (in all where they
    differ by 1%); a kit's workloads pool into more (next test)."""
    rng = random.Random(20261205)
    old, new = [], []
    for _ in range(400):
        r = _batch(rng, 0.03, 0.01)
        old.append(r.estimate("A", "B"))
        new.append(twins.workload_estimate(r, "A", "B"))
    assert _alarms(old) > 0.15
    assert 0.01 <= _alarms(new) <= 0.075, _alarms(new)
    for process_sd, power in ((0.03, 0.3), (0.01, 0.95)):
        found = [twins.workload_estimate(_batch(rng, process_sd, 0.01, effect=1.10), "A", "B") for _ in range(200)]
        assert sum(e.lo > 1.0 for e in found) / len(found) >= power  # B's gain: A's time over B's above 1


def test_quiet_processes_keep_the_rounds_interval():
    """Where processes do not differ, the twins' interval is the rounds' one or not much wider:
    the t interval only joins it."""
    rng = random.Random(7)
    widths = []
    for _ in range(100):
        r = _batch(rng, 0.0, 0.01)
        joined = twins.workload_estimate(r, "A", "B")
        alone = stats.censored_ratio_interval(r.group_contrast(("A", "A'"), ("B", "B'")),
                                              *r.group_bounds(("A", "A'"), ("B", "B'")))
        assert joined.lo <= alone.lo and joined.hi >= alone.hi and joined.value == alone.value
        widths.append(math.log(joined.hi / joined.lo) / math.log(alone.hi / alone.lo))
    assert stats.median(widths) < 1.5


def test_kit_interval_adds_the_workloads_spreads():
    """Three workloads, each with processes of its own draw: the kit's joined interval covers the
    geometric mean about as often as it says, and finds a 10% gain against 3% processes."""
    rng = random.Random(11)

    def kit(effect: float) -> stats.Estimate:
        samples, ranges, spreads = {}, {}, {}
        for w in ("w1", "w2", "w3"):
            r = _batch(rng, 0.03, 0.01, effect=effect, n=20)
            samples[w] = r.group_contrast(("A", "A'"), ("B", "B'"))
            ranges[w] = r.group_bounds(("A", "A'"), ("B", "B'"))
            spreads[w] = twins.spread(r, "A", "B")
        return twins.kit_estimate(stats.censored_score_estimate(samples, ranges), spreads)

    same = [kit(1.0) for _ in range(300)]
    assert 0.005 <= _alarms(same) <= 0.075, _alarms(same)
    better = [kit(1.10) for _ in range(100)]
    assert sum(e.lo > 1.0 for e in better) >= 85
    one = twins.kit_estimate(stats.Estimate(1.0, 0.99, 1.01, 20), {"w": 0.0004})
    assert math.isclose(one.hi, math.exp(4.303 * 0.02)) and math.isclose(one.lo, math.exp(-4.303 * 0.02))


def test_no_twin_no_spread():
    r = Rounds(labels=["A", "B"])
    r.add([1000], {BASELINE: [10_000], "A": [9_000], "B": [8_000]})
    assert twins.spread(r, "A", "B") is None and twins.workload_estimate(r, "A", "B") is None


def test_group_bounds_are_the_contrast_where_every_time_is_resolved_and_widen_where_not():
    r = Rounds(labels=list(SIDES))
    r.add([1000], {BASELINE: [400_000], "A": [200_000], "A'": [180_000], "B": [100_000], "B'": [121_000]})
    r.add([1000], {BASELINE: [400_000], "A": [220_000], "A'": [200_000], "B": [110_000], "B'": [100_000]})
    pair = (("A", "A'"), ("B", "B'"))
    lows, highs = r.group_bounds(*pair)
    assert lows == highs and all(math.isclose(x, y) for x, y in zip(lows, r.group_contrast(*pair)))
    assert math.isclose(r.group_contrast(*pair)[0], math.sqrt(199_000 * 179_000) / math.sqrt(99_000 * 120_000))
    # A third round whose empty calls waited (the resolution becomes 4 us) and whose B' fell below
    # it: that round's contrast counts B' at the resolution and reaches up to what a 1 us B' gives
    r.add([5000], {BASELINE: [400_000], "A": [200_000], "A'": [190_000], "B": [100_000], "B'": [3_000]})
    assert r.resolution == 4000 and r.unresolved("B'") == 1
    lows, highs = r.group_bounds(*pair)
    value = r.group_contrast(*pair)[2]
    assert math.isclose(lows[2], value) and highs[2] > 1.9 * value and lows[:2] == highs[:2]
