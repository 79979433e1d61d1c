"""An evaluation with repeats times the candidate and the baseline in three processes each
(copies.py, batch._grouped): its score is their contrast, and its interval covers what the
processes add where one process a side and the fixed widening did not."""

from __future__ import annotations

import math
import random

from evoteam import stats
from evoteam.servers.bench.measurement import copies
from evoteam.servers.bench.measurement.batch import _grouped, _outcome
from evoteam.servers.bench.measurement.sides import BASELINE, CANDIDATE, WorkloadVerdict
from evoteam.servers.bench.measurement.timing import Rounds

BASE, CAND = copies.labels(BASELINE), copies.labels(CANDIDATE)


def _rounds(rng: random.Random, process_sd: float, speedup: float, n: int = 10, round_sd: float = 0.01) -> Rounds:
    """One workload's rounds: every process with a lasting offset of its own, the candidate's code
    ``speedup`` times faster than the baseline's."""
    offset = {label: math.exp(rng.gauss(0, process_sd)) for label in (*BASE, *CAND)}
    r = Rounds(labels=[*BASE, *CAND])
    for _ in range(n):
        machine = math.exp(rng.gauss(0, 0.02))  # shared by every side of a round
        r.add([1000], {label: [int(1e6 * off * machine * math.exp(rng.gauss(0, round_sd))
                                   / (speedup if label in CAND else 1.0))] for label, off in offset.items()})
    return r


def _batch(rounds: dict[str, Rounds], failing: dict[str, str] | None = None):
    """The verdicts and outcomes a batch holds before _grouped: each process's own, its speedup
    against the session's baseline process alone (as interleave.py gives it)."""
    verdicts, outcomes = {}, {}
    for label in (*CAND, *BASE[1:]):
        verdicts[label] = []
        for name, r in rounds.items():
            if label in (failing or {}):
                v = WorkloadVerdict("RUNTIME_ERROR", failing[label])
            else:
                est = r.speedup(label)
                v = WorkloadVerdict(samples=r.ratios(label), speedup=est.value, speedup_interval=[est.lo, est.hi],
                                    rounds=len(r.per_round), candidate_ms=r.median_ms(label),
                                    baseline_ms=r.median_ms(BASELINE))
            verdicts[label].append(v)
        outcomes[label] = [_outcome(name, v) for name, v in zip(rounds, verdicts[label])]
    return verdicts, outcomes


def test_the_candidate_is_scored_by_its_processes_against_the_baselines():
    rng = random.Random(3)
    rounds = {"w1": _rounds(rng, 0.02, 3.0), "w2": _rounds(rng, 0.02, 2.0)}
    verdicts, outcomes = _batch(rounds)
    spread = _grouped(verdicts, outcomes, rounds, BASE, CAND)
    assert spread is not None and spread[0] > 0 and 2 <= spread[1] <= 4
    for (name, r), v, o in zip(rounds.items(), verdicts[CANDIDATE], outcomes[CANDIDATE]):
        contrast = r.group_contrast(BASE, CAND)
        assert v.samples == contrast and v.speedup == o.speedup == stats.median(contrast)
        assert o.speedup_interval == v.speedup_interval and v.speedup_interval[0] < v.speedup < v.speedup_interval[1]
        # Each side's ms the geometric mean of its processes' medians, so that they divide to the speedup.
        assert math.isclose(v.baseline_ms / v.candidate_ms, v.speedup, rel_tol=0.03)
        assert o.rounds == len(contrast) == 10
    # The interval keeps the fixed widening beside the processes' t interval (copies.py).
    r = rounds["w1"]
    widened = stats.censored_ratio_interval(r.group_contrast(BASE, CAND), *r.group_bounds(BASE, CAND))
    got = verdicts[CANDIDATE][0].speedup_interval
    assert got[0] <= widened.lo and got[1] >= widened.hi


def test_its_interval_covers_what_the_processes_add():
    """Processes 3% apart (SD) and 1% of round noise: one process a side with the fixed widening
    misses the candidate's true speedup far more often than 1 in 20; three a side, as often as
    the 95% says or less."""
    rng = random.Random(11)
    missed_one = missed_three = 0
    trials = 200
    for _ in range(trials):
        rounds = {"w": _rounds(rng, 0.03, 2.0)}
        verdicts, outcomes = _batch(rounds)
        lo, hi = verdicts[CANDIDATE][0].speedup_interval  # one process a side, as a plain evaluation
        missed_one += not lo <= 2.0 <= hi
        _grouped(verdicts, outcomes, rounds, BASE, CAND)
        lo, hi = verdicts[CANDIDATE][0].speedup_interval
        missed_three += not lo <= 2.0 <= hi
    assert missed_three / trials <= 0.06 and missed_one / trials > 0.12, (missed_one, missed_three)


def test_a_failure_in_any_of_the_candidates_processes_is_the_candidates():
    rng = random.Random(5)
    rounds = {"w1": _rounds(rng, 0.02, 3.0), "w2": _rounds(rng, 0.02, 2.0)}
    verdicts, outcomes = _batch(rounds, failing={"candidate''": "candidate'' raised ZeroDivisionError"})
    first = list(verdicts[CANDIDATE])
    assert _grouped(verdicts, outcomes, rounds, BASE, CAND) is None
    assert verdicts[CANDIDATE] is not first and all(v.status == "RUNTIME_ERROR" for v in verdicts[CANDIDATE])
    assert outcomes[CANDIDATE][0].message == "candidate (in its third process) raised ZeroDivisionError"
    # A baseline process that failed (a timeout on a busy machine): the first process scores alone.
    verdicts, outcomes = _batch(rounds, failing={"baseline'": "took too long"})
    plain = [v.speedup for v in verdicts[CANDIDATE]]
    assert _grouped(verdicts, outcomes, rounds, BASE, CAND) is None
    assert [v.speedup for v in verdicts[CANDIDATE]] == plain


def test_rounds_of_an_evaluation_in_copies():
    """The kit's rounds at least; more repeats share the kit's rounds times repeats among a side's
    three processes (about a plain evaluation's cost with that many times the rounds)."""
    assert copies.evaluation_rounds(10, 2) == copies.evaluation_rounds(10, 3) == 10
    assert copies.evaluation_rounds(10, 5) == 17 and copies.evaluation_rounds(10, 20) == 67
    assert copies.evaluation_rounds(60, 20) == copies.MAX_ROUNDS
