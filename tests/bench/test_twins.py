"""Twins (measurement/twins.py): a comparison's interval covers the process-to-process spread it
measures, where the fixed widening did not. The simulated processes differ by a lasting offset
each (as the machine's workers do: docs/bench.md, "Comparisons"), and their rounds by noise that
every round's sides do not share."""

from __future__ import annotations

import math
import random

from evoteam import stats, twinstats
from evoteam.servers.bench.measurement import twins
from evoteam.servers.bench.measurement.timing import BASELINE, Rounds

SIDES = ("A", "A'", "B", "B'")


def _batch(rng: random.Random, process_sd: float, round_sd: float, effect: float = 1.0, n: int = 30,
           ns: float = 1e6, shared: dict[str, float] | None = None) -> Rounds:
    """One batch (of one workload): every side a process with its own offset; B's code ``effect``
    times faster. ``shared``: a part of each process's offset (log) it has on every workload."""
    offset = {label: math.exp(rng.gauss(0, process_sd) + (shared or {}).get(label, 0.0))
              for label in (*SIDES, BASELINE)}
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
    """Against published values of Student's t (two-sided 95%, 97.5%, 99%)."""
    q = twinstats.t_quantile
    for df, want in ((1, 12.706), (2, 4.303), (3, 3.182), (6, 2.447), (10, 2.228), (30, 2.042), (60, 2.000)):
        assert abs(q(0.95, df) - want) < 0.001, df
    assert abs(q(0.975, 2) - 6.205) < 0.001 and abs(q(0.99, 1) - 63.657) < 0.01
    assert q(0.95, 2.9) == q(0.95, 2) and abs(q(0.95, 10_000) - 1.960) < 0.001
    qs = [q(0.95, df) for df in range(1, 200)]
    assert all(a > b for a, b in zip(qs, qs[1:]))


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


def _kit(rng: random.Random, effect: float, shared_sd: float) -> stats.Estimate:
    """A compare's kit estimate over three workloads whose processes keep a part of their offset
    (``shared_sd``) on every workload, as the bench's workers do (twins.py)."""
    shared = {label: rng.gauss(0, shared_sd) for label in (*SIDES, BASELINE)}
    samples, ranges, found = {}, {}, []
    for w in ("w1", "w2", "w3"):
        r = _batch(rng, 0.02, 0.01, effect=effect, n=20, shared=shared)
        samples[w] = r.group_contrast(("A", "A'"), ("B", "B'"))
        ranges[w] = r.group_bounds(("A", "A'"), ("B", "B'"))
        found.append(twins.controls(r, "A", "B"))
    return twins.kit_estimate(stats.censored_score_estimate(samples, ranges), twins.spread(found))


def test_kit_interval_holds_however_the_workloads_processes_go_together():
    """Three workloads, a process's offsets on them independent or largely shared (on rmsnorm_cpu
    they correlated 0.3-0.66): the kit's interval covers the geometric mean about as often as it
    says either way, since its controls are averaged as the contrast is. What two degrees of
    freedom cost: a 10% gain is found in most batches against processes 2% apart, and in about
    half where a shared 2% comes on top (the kit's processes then differ by 2.8% on every workload)."""
    rng = random.Random(11)
    for shared_sd, power in ((0.0, 70), (0.02, 40)):
        same = [_kit(rng, 1.0, shared_sd) for _ in range(300)]
        assert 0.003 <= _alarms(same) <= 0.075, (shared_sd, _alarms(same))
        better = [_kit(rng, 1.10, shared_sd) for _ in range(100)]
        assert sum(e.lo > 1.0 for e in better) >= power, shared_sd
    one = twins.kit_estimate(stats.Estimate(1.0, 0.99, 1.01, 20), 0.0004)
    t = twinstats.t_quantile(0.95, 2)
    assert math.isclose(one.hi, math.exp(t * 0.02)) and math.isclose(one.lo, math.exp(-t * 0.02))
    assert twins.spread([(0.02, -0.02), (0.04, 0.0)]) == (0.03 ** 2 + 0.01 ** 2) / 4


def test_no_twin_no_spread():
    r = Rounds(labels=["A", "B"])
    r.add([1000], {BASELINE: [10_000], "A": [9_000], "B": [8_000]})
    assert twins.controls(r, "A", "B") is None and twins.workload_estimate(r, "A", "B") is None


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


def test_a_side_that_fails_in_its_second_process_fails_under_its_own_name():
    """A candidate that passes in one process and fails in the other is a failing side, and the
    caller reads the failure of the side it named (it never gave a twin's label)."""
    from evoteam.servers.bench.evaluation.compare import _side
    from evoteam.servers.bench.models import Evaluation, WorkloadOutcome

    def ev(status: str, message: str | None) -> Evaluation:
        return Evaluation(kit="k", kind="kernel", split="dev", status=status, score=1.0, direction="maximize",
                          passed=int(status == "PASSED"), total=1, message=message,
                          workloads=[WorkloadOutcome(workload="w", status=status, message=message)])

    ok, failed = ev("PASSED", None), ev("RUNTIME_ERROR", "A' raised ZeroDivisionError")
    side = _side({"A": ok, "A'": failed}, "A")
    assert side.status == "RUNTIME_ERROR" and "A'" not in side.message
    assert side.message == side.workloads[0].message == "A (in its second process) raised ZeroDivisionError"
    assert _side({"A": failed, "A'": ok}, "A") is failed and _side({"A": ok, "A'": ok}, "A") is ok


def _kept(r: Rounds, at: int):
    from datetime import UTC, datetime

    from evoteam.servers.knowledge.comparisons import record_of

    pair = (("A", "A'"), ("B", "B'"))
    samples, ranges = {"w": r.group_contrast(*pair)}, {"w": r.group_bounds(*pair)}
    spread = twins.spread([twins.controls(r, "A", "B")])
    shown = twins.kit_estimate(stats.censored_score_estimate(samples, ranges), spread)
    record = record_of("cand_a", "cand_b", kit="k", split="dev", kind="kernel", samples=samples, ranges=ranges,
                       contended=False, measured_at=datetime(2026, 12, 5, 12, at, tzinfo=UTC), spread=spread)
    return shown, record


def test_a_kept_compare_reads_as_it_was_shown_and_pools_with_its_processes():
    """The record a compare keeps carries its twins' spread: its interval is the one the compare
    showed (read without them, a kept A/A batch against processes 3% apart was significant far more
    often than 1 in 20), and pooled with another batch of the two it still covers what they add."""
    from evoteam.servers.knowledge.comparisons import ComparisonRecord, paired_verdict

    rng = random.Random(5)
    shown, record = _kept(_batch(rng, 0.03, 0.01), 0)
    assert record.interval == [shown.lo, shown.hi] and record.significant == stats.significant(shown)
    back = ComparisonRecord.model_validate_json(record.model_dump_json())
    assert back.spread == record.spread > 0
    older = ComparisonRecord.model_validate({k: v for k, v in record.model_dump().items() if k != "spread"})
    assert older.spread is None  # a record kept before twins reads as one process a side
    alarms = bare = 0
    for _ in range(150):
        records = [_kept(_batch(rng, 0.03, 0.01), m)[1] for m in (1, 2)]
        alarms += paired_verdict(records, "cand_a", "cand_b").significant
        bare += paired_verdict([records[0].model_copy(update={"spread": None})], "cand_a", "cand_b").significant
    assert alarms / 150 <= 0.075 and bare / 150 > 0.15, (alarms, bare)
