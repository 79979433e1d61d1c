"""A kernel re-measurement of a few sides times each, the baseline's included, in three processes
(report/batchruns.py, measurement/batch.py's groups): each side scored by its processes against
the baseline's as an evaluation with repeats is, every two sides' paired rounds read as compare
reads its copies, and a failure in one process is that side's alone."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from evoteam.config import SOURCE_ROOT, Settings
from evoteam.report import batchruns
from evoteam.servers.bench.measurement import copies
from evoteam.servers.bench.measurement.batch import _rotation, _stop_copies
from evoteam.servers.bench.measurement.sides import WorkloadVerdict
from evoteam.servers.knowledge.comparisons import record_of
from tests.bench.conftest import kill_before_timing

KIT = SOURCE_ROOT / "task_kits" / "rmsnorm_cpu"


def test_the_order_of_processes_in_groups():
    """Tier by tier, the baseline's other processes between the tiers; one candidate as an
    evaluation with repeats has always been timed (B C B' C' B'' C'', the session's baseline first)."""
    assert _rotation(["c", "c'", "c''"], 1, ("b'", "b''")) == ["c", "b'", "c'", "b''", "c''"]
    assert _rotation(["x", "y", "x'", "y'", "x''", "y''"], 2, ("b'", "b''")) == \
        ["x", "y", "b'", "x'", "y'", "b''", "x''", "y''"]
    assert _rotation(["x", "y"], 0, ()) == ["x", "y"]


def test_which_batches_are_timed_in_copies():
    """A kernel kit's batch of up to six sides on a CPU, three on a GPU (its CUDA contexts no more
    than a batch of twelve in one process each starts); a program kit's never."""
    from types import SimpleNamespace as NS

    def kit(kind: str, device: str):
        return NS(manifest=NS(kind=kind, device=device))

    assert [batchruns.processes_per_side(kit("kernel", "cpu"), n) for n in (2, 6, 7)] == [3, 3, 1]
    assert [batchruns.processes_per_side(kit("kernel", "cuda:0"), n) for n in (2, 3, 4)] == [3, 3, 1]
    assert batchruns.processes_per_side(kit("program", "cpu"), 2) == 1


def test_what_stops_being_timed_after_a_failure_in_groups():
    ok, bad = [WorkloadVerdict()], [WorkloadVerdict("RUNTIME_ERROR", "crashed")]
    groups = [("x", "x'", "x''"), ("y", "y'", "y''")]
    base = ("baseline'", "baseline''")

    def stopped(failing: set[str]) -> set[str]:
        labels = [*groups[0], *groups[1], *base]
        verdicts = {label: bad if label in failing else ok for label in labels}
        failed = dict.fromkeys(labels, False)
        _stop_copies(failed, verdicts, groups, base)
        return {label for label, f in failed.items() if f}

    assert stopped(set()) == set()
    assert stopped({"x''"}) == {"x", "x'", "x''"}  # x fails; y goes on against the baseline's three
    assert stopped({"x'", "y"}) == {*groups[0], *groups[1], *base}  # nothing left to time but the baseline
    # Each scored by its first process against the baseline; their other processes still pair them.
    assert stopped({"baseline'"}) == {*base}
    one = [("c", "c'", "c''")]  # an evaluation with repeats: nothing else to pair its copies with
    verdicts = {label: bad if label == "baseline''" else ok for label in (*one[0], *base)}
    failed = dict.fromkeys(verdicts, False)
    _stop_copies(failed, verdicts, one, base)
    assert {label for label, f in failed.items() if f} == {"c'", "c''", *base}


async def test_a_batch_of_finalists_in_copies_with_real_workers(tmp_path, monkeypatch):
    """Three sides on the shipped kit: each scored in three processes, their pairs kept with the
    processes' spread; then one finalist's second process killed before the first timing: it
    fails, named as the side, is not timed again, and the others are still scored in copies; then
    a baseline process killed: every side scored by its first process, the pairs still whole; no
    folder is left."""
    from evoteam.servers.bench.confinement import scratch
    from evoteam.servers.bench.formats.kits import find_kit

    settings = Settings(db=tmp_path / "kb.db")
    kit = find_kit(settings, "rmsnorm_cpu")
    base = kit.starting_point().read_text()
    codes = {"cand_x": (KIT / "examples" / "better.py").read_text(), "cand_y": base + "\n# y\n", "baseline": base}
    timed, kill = kill_before_timing(monkeypatch)
    made: list[Path] = []
    new_folder = scratch.new_folder

    def recorded(kind: str) -> Path:
        folder = new_folder(kind)
        made.append(folder)
        return folder

    monkeypatch.setattr(scratch, "new_folder", recorded)
    results, paired = await batchruns.measure_sides(settings, kit, codes, "dev", 3, None)
    sides = ("cand_x", "cand_y", batchruns.COPY)
    every = {x for side in sides for x in copies.labels(side)} | {"baseline'", "baseline''"}
    assert timed[0] == every and all(len(p) == 3 for p in paired.processes.values())
    for label, e in results.items():
        assert e.status == "PASSED" and e.metrics["processes_per_side"] == 3, (label, e.message)
        assert "each side in 3 processes" in e.message and e.score_interval[0] <= e.score <= e.score_interval[1]
    assert results["cand_x"].score > 1.5  # better.py: about 3x on this kit
    # The pair as a re-measurement keeps it: the contrast of the two groups, with the processes' spread.
    spread = paired.spread("cand_y", "cand_x")
    assert spread is not None and spread[0] >= 0 and 1 <= spread[1] <= 4
    record = record_of("cand_y", "cand_x", kit=kit.name, split="dev", kind="kernel",
                       samples=paired.samples("cand_y", "cand_x"), ranges=paired.ranges("cand_y", "cand_x"),
                       contended=False, measured_at=datetime.now(UTC), spread=spread)
    assert record.spread_df == spread[1] and record.b_over_a > 1.5 and record.significant
    assert all(len(v) == 3 for v in record.samples.values())

    timed.clear()
    kill.append("cand_x'")
    results, paired = await batchruns.measure_sides(settings, kit, codes, "dev", 3, None)
    x = results["cand_x"]
    assert x.status == "RUNTIME_ERROR" and "cand_x (in its second process)" in x.message, x.message
    assert "cand_x'" not in x.message
    assert len(timed) == 3 and all(not t & set(copies.labels("cand_x")) for t in timed[1:])
    for label in ("cand_y", "baseline"):
        assert results[label].status == "PASSED" and results[label].metrics["processes_per_side"] == 3
    assert made and not [f for f in made if f.exists() and "-trusted-" not in f.name]

    # A baseline process killed: each side is scored by its first process against the baseline, and
    # every side's processes are still timed, so the finalists' pairs keep their processes (review 2026-12-05).
    timed.clear()
    kill.append("baseline'")
    results, paired = await batchruns.measure_sides(settings, kit, codes, "dev", 3, None)
    for label, e in results.items():
        assert e.status == "PASSED" and e.metrics["processes_per_side"] == 1, (label, e.message)
        assert "scored by one process a side: the baseline failed in its other process" in e.message
    assert all(t == every - {"baseline'", "baseline''"} for t in timed[1:]) and len(timed) == 3
    assert all(len(v) == 3 for v in paired.samples("cand_y", "cand_x").values())
    assert paired.spread("cand_y", "cand_x") is not None
    assert not [f for f in made if f.exists() and "-trusted-" not in f.name]


def test_a_side_in_copies_ranks_by_the_interval_it_showed_and_counts_its_own_calls():
    """Where nothing pools (a run of an earlier timing method), a finalist in copies is ranked by
    the interval it showed, as the store ranks such a measurement; and each of several sides counts
    its own processes' timed calls and its share of the baseline's, not the whole batch's."""
    import math
    import random

    from evoteam.servers.bench.measurement.batch import _grouped, _outcome
    from evoteam.servers.bench.measurement.sides import BASELINE
    from evoteam.servers.bench.measurement.timing import Rounds
    from evoteam.servers.knowledge.measurements import rank_of

    rng = random.Random(4)
    samples = {"w": [2.0 * math.exp(rng.gauss(0, 0.01)) for _ in range(10)]}
    alone = rank_of(samples, None, "maximize")
    assert rank_of(samples, None, "maximize", [1.5, 2.5]) == 1.5 < alone
    assert rank_of(samples, None, "maximize", [1.99, 2.01]) == alone  # never narrower

    base, x, y = copies.labels(BASELINE), copies.labels("x"), copies.labels("y")
    r = Rounds(labels=[*base, *x, *y])
    for _ in range(5):
        r.add([1000], {label: [int(1e6 * (0.5 if label in y else 1.0) * math.exp(rng.gauss(0, 0.01)))]
                       for label in (*base, *x, *y)})
    verdicts = {label: [WorkloadVerdict(samples=r.ratios(label), speedup=1.0)] for label in (*x, *y, *base[1:])}
    outcomes = {label: [_outcome("w", v[0])] for label, v in verdicts.items()}
    for group in (x, y):
        _grouped(verdicts, outcomes, {"w": r}, base, group, 100.0, 2)
        own = sum(r.spent_ns[label] for label in group) + sum(r.spent_ns[label] for label in base) / 2
        assert verdicts[group[0]][0].kernel_s == pytest.approx(own / 1e9)
    assert verdicts["x"][0].kernel_s > verdicts["y"][0].kernel_s  # y's calls took half as long


async def test_a_re_measurement_on_both_splits_in_copies(tmp_path):
    """split "all" on the shipped kit: the dev batch and the held-out one each in copies; each
    finalist's held-out rounds are recorded apart, and the reply names that record."""
    from evoteam.report.remeasure import remeasure_run
    from evoteam.servers.bench.evaluation.core import evaluate_candidate
    from evoteam.servers.knowledge.local import LocalKnowledgeStore

    settings = Settings(db=tmp_path / "kb.db")
    better = (KIT / "examples" / "better.py").read_text()
    async with LocalKnowledgeStore.open(tmp_path / "kb.db") as store:
        first = await evaluate_candidate(settings, "rmsnorm_cpu", code=better, store=store)
        mset = await remeasure_run(settings, store, first.run_id, rounds=3, split="all",
                                   candidate_ids=[first.candidate_id])
        assert mset.splits == ["dev", "heldout"] and mset.processes_per_side == 3
        entry = next(e for e in mset.entries if e.candidate_id == first.candidate_id)
        assert entry.score > 1.5 and entry.heldout_score > 1.5 and entry.heldout_interval
        held = await store.get_candidate(entry.heldout_candidate_id)
        assert held.id != first.candidate_id and held.split == "heldout" and held.score == entry.heldout_score
        copy = next(e for e in mset.entries if e.candidate_id == "baseline")
        assert copy.heldout_candidate_id is None and copy.heldout_score is not None  # the A/A copy is never stored
