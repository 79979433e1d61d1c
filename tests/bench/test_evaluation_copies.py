"""An evaluation with repeats times the candidate and the baseline in three processes each
(copies.py, batch._grouped): its score is their contrast, and its interval covers what the
processes add where one process a side and the fixed widening did not."""

from __future__ import annotations

import math
import os
import random
import signal
from pathlib import Path

import pytest

from evoteam import stats
from evoteam.config import SOURCE_ROOT, Settings
from evoteam.servers.bench.measurement import copies
from evoteam.servers.bench.measurement.batch import _grouped, _outcome
from evoteam.servers.bench.measurement.sides import BASELINE, CANDIDATE, WorkloadVerdict
from evoteam.servers.bench.measurement.timing import Rounds
from tests.bench.conftest import kill_before_timing, steady_kit_at

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
    spread, single = _grouped(verdicts, outcomes, rounds, BASE, CAND, 20.0)
    assert single is None and spread is not None and spread[0] > 0 and 2 <= spread[1] <= 4
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
        _grouped(verdicts, outcomes, rounds, BASE, CAND, 20.0)
        lo, hi = verdicts[CANDIDATE][0].speedup_interval
        missed_three += not lo <= 2.0 <= hi
    assert missed_three / trials <= 0.06 and missed_one / trials > 0.12, (missed_one, missed_three)


def test_a_failure_in_any_of_the_candidates_processes_is_the_candidates():
    rng = random.Random(5)
    rounds = {"w1": _rounds(rng, 0.02, 3.0), "w2": _rounds(rng, 0.02, 2.0)}
    said = "the candidate's third process crashed (SIGKILL, killed)"  # as its worker names itself (sides.worker_name)
    verdicts, outcomes = _batch(rounds, failing={"candidate''": said})
    first = list(verdicts[CANDIDATE])
    assert _grouped(verdicts, outcomes, rounds, BASE, CAND, 20.0) == (None, None)
    assert verdicts[CANDIDATE] is not first and all(v.status == "RUNTIME_ERROR" for v in verdicts[CANDIDATE])
    assert outcomes[CANDIDATE][0].message == said
    # A baseline process that failed (a timeout on a busy machine): the first process scores alone, and says so.
    verdicts, outcomes = _batch(rounds, failing={"baseline'": "took too long"})
    plain = [v.speedup for v in verdicts[CANDIDATE]]
    assert _grouped(verdicts, outcomes, rounds, BASE, CAND, 20.0) == (
        None, "scored by one process a side: the baseline failed in its other process (RUNTIME_ERROR)")
    assert [v.speedup for v in verdicts[CANDIDATE]] == plain


def test_a_flag_in_any_process_and_the_sanity_bound_of_the_shown_speedup_are_the_candidates():
    rng = random.Random(8)
    rounds = {"w1": _rounds(rng, 0.02, 3.0), "w2": _rounds(rng, 0.02, 2.0)}
    verdicts, outcomes = _batch(rounds)
    verdicts["candidate'"][1].flagged = True
    verdicts["candidate'"][1].notes.append("its timing was not comparable")
    _grouped(verdicts, outcomes, rounds, BASE, CAND, 2.5)
    w1, w2 = outcomes[CANDIDATE]
    assert w2.flagged and "its timing was not comparable" in w2.message
    # w1's speedup (about 3x, as its processes give it) is above a bound of 2.5x: flagged, its figure the shown one
    assert w1.flagged and f"speedup {w1.speedup:.1f}x is above the sanity bound of 2.5x" in w1.message


def test_rounds_of_an_evaluation_in_copies():
    """The kit's rounds at least; more repeats share the kit's rounds times repeats among a side's
    three processes (about a plain evaluation's cost with that many times the rounds)."""
    assert copies.evaluation_rounds(10, 2) == copies.evaluation_rounds(10, 3) == 10
    assert copies.evaluation_rounds(1, 2) == 2 and copies.evaluation_rounds(1, 5) == 5  # never fewer than repeats
    assert copies.evaluation_rounds(10, 5) == 17 and copies.evaluation_rounds(10, 20) == 67
    assert copies.evaluation_rounds(60, 20) == copies.MAX_ROUNDS


def _steady(tmp_path: Path) -> Settings:
    steady_kit_at(tmp_path)
    return Settings(db=tmp_path / "state" / "kb.db", kits_dirs=[tmp_path / "kits", SOURCE_ROOT / "task_kits"])


async def test_an_evaluation_with_repeats_runs_both_sides_in_three_processes(tmp_path, monkeypatch):
    """With real workers: six timed processes, each side's ms the geometric mean of its three, no
    copied folder left behind; a baseline process killed before the timing leaves the candidate
    scored by one process a side, said so; a candidate process killed fails the candidate, named."""
    from evoteam.servers.bench.evaluation.core import evaluate_candidate
    from evoteam.servers.bench.confinement import scratch
    from evoteam.servers.bench.measurement import session as session_module

    settings = _steady(tmp_path)
    better = (tmp_path / "kits" / "rmsnorm_steady" / "examples" / "better.py").read_text()
    labels: list[dict[str, str]] = []
    kill: list[str] = []
    measure = session_module.KernelSession.measure_sides

    def measure_killing(self, wl, verdicts):
        labels.append({s.label: s.worker.label for s in self.sides})
        if kill:
            os.kill(self.side(kill.pop()).worker.proc.pid, signal.SIGKILL)
        return measure(self, wl, verdicts)

    monkeypatch.setattr(session_module.KernelSession, "measure_sides", measure_killing)
    made: list[Path] = []  # every candidate and baseline folder the evaluations make (the trusted
    new_folder = scratch.new_folder  # worker's is kept for the kit's next evaluation: trustedpool.py)

    def recorded(kind: str) -> Path:
        folder = new_folder(kind)
        if kind in ("cand", "baseline"):
            made.append(folder)
        return folder

    monkeypatch.setattr(scratch, "new_folder", recorded)
    e = await evaluate_candidate(settings, "rmsnorm_steady", code=better, repeats=2)
    assert e.status == "PASSED" and e.metrics["processes_per_side"] == 3 and e.workloads[0].rounds == 10, e.message
    assert labels[-1] == {"baseline": "baseline", "candidate": "candidate", "candidate'": "candidate's second",
                          "candidate''": "candidate's third", "baseline'": "baseline's second",
                          "baseline''": "baseline's third"}
    assert e.score_interval[0] < e.score < e.score_interval[1] and "scored by one process" not in e.message
    assert "over baseline.py::run, each side in 3 processes of 10 rounds each (plain: one of 10): " in e.message, e.message
    assert len([f for f in made if "-cand-" in f.name]) == 3 and len([f for f in made if "-baseline-" in f.name]) == 4
    assert not [f for f in made if f.exists()]

    kill.append("baseline'")
    e = await evaluate_candidate(settings, "rmsnorm_steady", code=better, repeats=2)
    assert e.status == "PASSED" and e.metrics["processes_per_side"] == 1, e.message
    assert "each side in" not in e.message
    assert e.message.endswith("; scored by one process a side: the baseline failed in its other process "
                              "(RUNTIME_ERROR)"), e.message

    kill.append("candidate''")
    e = await evaluate_candidate(settings, "rmsnorm_steady", code=better, repeats=2)
    assert e.status == "RUNTIME_ERROR" and "the candidate's third process crashed" in e.message, e.message
    assert len(made) == 21 and not [f for f in made if f.exists()]  # three evaluations' folders, none left


async def test_a_first_measurement_in_copies_is_stored_with_the_interval_it_showed(tmp_path):
    """The store re-estimates a recorded candidate's interval from its rounds; for a first
    measurement in copies it keeps the wider interval the evaluation showed (its processes' t
    interval) and ranks by it, and a record cannot narrow its interval, or raise its rank, by
    what its metrics claim."""
    from evoteam.servers.knowledge.local import LocalKnowledgeStore
    from evoteam.servers.knowledge.models import CandidateCreate, RunCreate
    from evoteam.servers.knowledge.store import Actor

    rng = random.Random(2)
    samples = {"w": [2.0 * math.exp(rng.gauss(0, 0.01)) for _ in range(10)]}
    rounds_only = stats.censored_score_estimate(samples)
    wide = [rounds_only.lo * 0.9, rounds_only.hi * 1.1]
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="t", client="pytest")) as store:
        run = await store.start_run(RunCreate(goal="copies", kit="rmsnorm_cpu", direction="maximize", x0=1.0))

        async def stored(metrics: dict, code: str):
            c = await store.record_candidate(CandidateCreate(run_id=run.id, code=code, status="PASSED", score=2.0,
                                                          metrics=metrics, samples=samples, code_hash=code))
            return await store.get_candidate(c.id)

        copied = await stored({"score_interval": wide, "processes_per_side": 3}, "a")
        assert copied.score_interval == pytest.approx(wide) and copied.rank_score == pytest.approx(wide[0])
        plain = await stored({"score_interval": wide}, "b")  # shown wider, not in copies: its rank is the rounds'
        assert plain.score_interval == pytest.approx(wide) and plain.rank_score == pytest.approx(rounds_only.lo)
        narrow = await stored({"score_interval": [1.99, 2.01], "processes_per_side": 3}, "c")
        assert narrow.score_interval == pytest.approx([rounds_only.lo, rounds_only.hi])
        assert narrow.rank_score == pytest.approx(rounds_only.lo)


async def test_once_a_process_fails_the_copies_that_decide_nothing_are_not_timed_again(tmp_path, monkeypatch):
    """On a kit of three workloads: a candidate process killed before the first timing fails the
    candidate, and nothing is timed after it; a baseline copy killed there leaves only the
    candidate's first process timed (with the baseline) on the later workloads."""
    from evoteam.servers.bench.evaluation.core import evaluate_candidate

    settings = Settings(db=tmp_path / "kb.db")  # the shipped kits
    better = (SOURCE_ROOT / "task_kits" / "rmsnorm_cpu" / "examples" / "better.py").read_text()
    timed, kill = kill_before_timing(monkeypatch)
    kill.append("candidate'")
    e = await evaluate_candidate(settings, "rmsnorm_cpu", code=better, repeats=2)
    assert e.status == "RUNTIME_ERROR" and "the candidate's second process crashed" in e.message, e.message
    assert len(timed) == 1 and timed[0] == {*CAND, *BASE[1:]}
    timed.clear()
    kill.append("baseline''")
    e = await evaluate_candidate(settings, "rmsnorm_cpu", code=better, repeats=2)
    assert e.status == "PASSED" and e.metrics["processes_per_side"] == 1, e.message
    assert len(timed) == 3 and timed[1] == timed[2] == {CANDIDATE}


def test_a_shown_interval_that_is_not_one_changes_nothing():
    """metrics.score_interval comes with the record: anything but two finite ends in order leaves
    the rounds' interval as it is (copystats.as_shown only ever widens)."""
    from evoteam.copystats import as_shown

    est = stats.Estimate(2.0, 1.9, 2.1, 10, 0.95)
    for shown in (None, "1,3", [1.0], [1.0, 2.0, 3.0], [float("nan"), 3.0], [1.0, float("inf")], [2.5, 1.5],
                  ["a", 3.0], {"lo": 1.0, "hi": 3.0}):
        assert as_shown(est, shown) == est, shown
    assert as_shown(est, [1.95, 2.05]) == est  # narrower: not taken
    assert as_shown(est, ["1.5", 2.05]) == stats.Estimate(2.0, 1.5, 2.1, 10, 0.95)  # wider at one end
    assert as_shown(None, [1.0, 3.0]) is None
