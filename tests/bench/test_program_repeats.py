"""A program kit's evaluation with repeats speaks for the median of its runs everywhere (score,
objective, NDG), a single run says its spread is unknown, and pooled runs of a program are
scores, never speedups."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evoteam import stats
from evoteam.config import Settings
from evoteam.errors import DomainError
from evoteam.report.remeasure import remeasure_run
from evoteam.servers.bench.evaluation.core import evaluate_candidate
from evoteam.servers.bench.formats.kits import find_kit
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.models import RunCreate
from evoteam.servers.knowledge.readsql import normalised_discovery_gain
from evoteam.servers.knowledge.store import Actor

# 26 circles on a grid, every radius the same fraction of the cell's half width, drawn afresh each
# run from the operating system's entropy: valid every time, a different score every time.
UNSEEDED = '''
import os
import numpy as np


def run_packing():
    scale = 0.5 + int.from_bytes(os.urandom(4), "little") / 2**33
    cols, rows, cell = 6, 5, 1 / 6
    centers = np.array([[(i + 0.5) * cell, (j + 0.5) * cell] for j in range(rows) for i in range(cols)][:26])
    return centers, np.full(26, cell / 2 * scale)
'''
# The same grid with every radius at a quarter of the cell's half width: the same score every run.
SEEDED = "import numpy as np\n\ndef run_packing():\n" + UNSEEDED.split("def run_packing():\n")[1].replace(
    "int.from_bytes(os.urandom(4), \"little\") / 2**33", "0.25")


async def test_repeats_report_the_median_run_and_one_run_says_its_spread_is_unknown(tmp_path: Path):
    settings = Settings(db=tmp_path / "kb.db")
    kit = find_kit(settings, "circle_packing_26").manifest
    result = await evaluate_candidate(settings, "circle_packing_26", code=UNSEEDED, repeats=3)
    assert result.status == "PASSED", result.message
    runs = result.metrics["repeats"]
    assert len(set(runs)) == 3 and result.score == sorted(runs)[1]
    # The objective, the NDG and the message's figure are the median's, not the last run's.
    assert result.metrics[kit.objective] == result.score
    assert result.ndg == pytest.approx(normalised_discovery_gain(kit.direction, kit.x0, kit.best_known, result.score))
    assert f"{kit.objective} = {result.score:g}" in result.message
    even = await evaluate_candidate(settings, "circle_packing_26", code=UNSEEDED, repeats=4)
    middle = sorted(even.metrics["repeats"])[1:3]
    assert even.score == pytest.approx(sum(middle) / 2) and even.score not in even.metrics["repeats"]
    assert even.message.startswith(f"{kit.objective} = {even.score:.6g}"), even.message  # not one run's
    once = await evaluate_candidate(settings, "circle_packing_26", code=UNSEEDED)
    assert once.score_interval is None  # one run: no interval ([x, x] read as exact; 2026-12-04)
    assert "one run, so its spread is unknown" in once.message


async def test_a_programs_pooled_runs_are_scores_not_speedups(tmp_path: Path):
    settings = Settings(db=tmp_path / "kb.db")
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t")) as kb:
        run = await kb.start_run(RunCreate(goal="circles", kit="circle_packing_26", direction="maximize"))
        for _ in range(2):
            done = await evaluate_candidate(settings, "circle_packing_26", code=UNSEEDED, store=kb, run_id=run.id,
                                            repeats=3)
        pooled = await kb.get_candidate(done.candidate_id)
        assert pooled.n_measurements == 2 and len(pooled.samples["program"]) == 6
        (program,) = pooled.workloads
        # Before, a timing ratio's interval, widened for process noise, reached past every run.
        assert program.speedup_interval is None and program.speedup is None
        assert min(pooled.samples["program"]) <= pooled.score_interval[0] <= pooled.score_interval[1] \
            <= max(pooled.samples["program"])
        # A program kit's batch has no baseline to name.
        with pytest.raises(DomainError, match="program kit: a batch has no baseline"):
            await remeasure_run(settings, kb, run.id, candidate_ids=["baseline", done.candidate_id])


async def test_what_too_few_runs_mean_is_said_of_the_candidate_as_it_stands(tmp_path: Path):
    """A run of a program that ran before is said as its pooled candidate stands: "until it has run 5
    times" followed a pooled "exact: every run alike" and read as unranked (model-play 2026-12-04).
    Under 5 runs pooled, the message says what they mean for its rank and how to settle it."""
    settings = Settings(db=tmp_path / "kb.db")
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t")) as kb:
        run = await kb.start_run(RunCreate(goal="circles", kit="circle_packing_26", direction="maximize"))
        first = await evaluate_candidate(settings, "circle_packing_26", code=SEEDED, store=kb, run_id=run.id)
        assert f"{first.candidate_id} is from 1 run" in first.message and "ranks after every candidate" in first.message
        assert "repeats 4" in first.message
        more = await evaluate_candidate(settings, "circle_packing_26", candidate_id=first.candidate_id, store=kb,
                                        run_id=run.id, repeats=4)
        assert more.n_measurements == 2 and "exact: every run alike" in more.message, more.message
        assert "ranks after" not in more.message and "until it has run" not in more.message, more.message


async def test_remeasure_runs_a_program_until_its_runs_settle(tmp_path: Path):
    """Three re-measurements of programs already exact took 400 of a model's 485 s in calls and
    changed nothing (mp28, 2026-12-04): a program whose runs, with its earlier ones, are 5 or more
    all alike runs no more; one already exact is not run again (its check runs still cost a model
    20 s; mp29); one whose runs differ runs every round, until it has an interval."""
    settings = Settings(db=tmp_path / "kb.db")
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t")) as kb:
        run = await kb.start_run(RunCreate(goal="circles", kit="circle_packing_26", direction="maximize"))
        exact = await evaluate_candidate(settings, "circle_packing_26", code=SEEDED, store=kb, run_id=run.id,
                                         repeats=5)
        once = await evaluate_candidate(settings, "circle_packing_26", code=SEEDED.replace("0.25", "0.3"), store=kb,
                                        run_id=run.id)
        varying = await evaluate_candidate(settings, "circle_packing_26", code=UNSEEDED, store=kb, run_id=run.id)
        mset = await remeasure_run(settings, kb, run.id, rounds=8,
                                   candidate_ids=[exact.candidate_id, once.candidate_id, varying.candidate_id])
        entries = {e.candidate_id: e for e in mset.entries}
        assert entries[exact.candidate_id].settled and entries[exact.candidate_id].runs == 0  # not run again
        assert entries[once.candidate_id].settled and entries[once.candidate_id].runs == 4
        assert not entries[varying.candidate_id].settled and entries[varying.candidate_id].runs == 8
        for cid, runs in ((exact.candidate_id, 5), (once.candidate_id, 5), (varying.candidate_id, 9)):
            pooled = await kb.get_candidate(cid)
            assert len(pooled.samples["program"]) == runs, (cid, pooled.samples)
        # Pooled, the two settled programs are exact and the varying one has its interval.
        for cid in (exact.candidate_id, once.candidate_id):
            assert stats.every_run_alike((await kb.get_candidate(cid)).samples)
            assert entries[cid].pooled_interval[0] == entries[cid].pooled_interval[1] == entries[cid].pooled_score
        assert entries[varying.candidate_id].pooled_interval[0] < entries[varying.candidate_id].pooled_interval[1]
        # With an interval already (9 runs), it runs only up to `rounds` with them: one more for 10, where it
        # ran ten (a model's 104 s call that moved nothing; mp36, 2026-12-05).
        again = await remeasure_run(settings, kb, run.id, rounds=10, candidate_ids=[varying.candidate_id])
        assert again.entries[0].runs == 1 and not again.entries[0].settled
        # Said: one run under "rounds: 10" read as a batch that stopped short (mp59).
        assert f"{varying.candidate_id} ran fewer times than rounds (10) on dev: its earlier runs count toward " \
               "them; a larger rounds runs more" in (again.note or ""), again.note
        assert "ran fewer times" not in (mset.note or ""), mset.note  # ran every round: nothing to say
        assert len((await kb.get_candidate(varying.candidate_id)).samples["program"]) == 10


def test_the_command_says_what_a_settled_program_now_is(tmp_path: Path):
    """`evoteam bench remeasure` on a program run once: "now" is its pooled, exact score and the
    runs it took, not the batch's "4 runs alike: too few to know its spread" beside "settled"."""
    from click.testing import CliRunner

    from evoteam.cli import main
    from evoteam.config import SOURCE_ROOT

    env = {"HOME": str(tmp_path), "EVOTEAM_DB": str(tmp_path / "kb.db")}
    better = str(SOURCE_ROOT / "task_kits" / "circle_packing_26" / "examples" / "better.py")
    ran = CliRunner().invoke(main, ["bench", "run", "circle_packing_26", better, "--json"], env=env)
    assert ran.exit_code == 0, ran.output
    run_id = json.loads(ran.output)["run_id"]
    out = CliRunner().invoke(main, ["bench", "remeasure", run_id], env=env)
    assert out.exit_code == 0, out.output
    line = next(x for x in out.output.splitlines() if x.startswith("cand_"))
    assert "recorded 2.54142 (one measurement, no interval)" in line, line
    assert line.endswith("now 2.54142 (exact: every run alike) pooled after 4 more runs"), line
    again = CliRunner().invoke(main, ["bench", "remeasure", run_id], env=env)
    line = next(x for x in again.output.splitlines() if x.startswith("cand_"))
    assert line.endswith("now 2.54142 (exact: every run alike), not run again"), line


async def test_a_side_that_fails_its_one_run_claims_no_count_of_runs(tmp_path: Path, monkeypatch):
    """A side with 5+ earlier runs stops after one run here even when that run fails; its entry
    carried `runs: 6` (the rounds asked for) beside one run made (review 2026-12-05)."""
    from evoteam.servers.bench.evaluation import core

    settings = Settings(db=tmp_path / "kb.db")
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t")) as kb:
        run = await kb.start_run(RunCreate(goal="circles", kit="circle_packing_26", direction="maximize"))
        varying = await evaluate_candidate(settings, "circle_packing_26", code=UNSEEDED, store=kb, run_id=run.id,
                                           repeats=5)
        real, made = core._run_program, []

        async def failing(*args, **kwargs):
            e = await real(*args, **kwargs)
            made.append(e)
            return e.model_copy(update={"status": "RUNTIME_ERROR", "score": None, "message": "made to fail"})

        monkeypatch.setattr(core, "_run_program", failing)
        mset = await remeasure_run(settings, kb, run.id, rounds=6, candidate_ids=[varying.candidate_id])
    entry = mset.entries[0]
    assert len(made) == 1 and entry.status == "RUNTIME_ERROR" and entry.runs is None and not entry.settled, entry


def test_the_command_says_the_runs_a_program_side_made(tmp_path: Path):
    """A side with an interval already runs only up to `--rounds` with its earlier runs: the line
    shows that batch as what it was (one run), not as a median of `--rounds` runs (review
    2026-12-05: "now 2.12301 (10 runs, the middle ones alike)" of a single run)."""
    from click.testing import CliRunner

    from evoteam.cli import main

    env = {"HOME": str(tmp_path), "EVOTEAM_DB": str(tmp_path / "kb.db"), "EVOTEAM_CANDIDATE_DIRS": str(tmp_path)}
    (tmp_path / "varying.py").write_text(UNSEEDED)
    ran = CliRunner().invoke(main, ["bench", "run", "circle_packing_26", str(tmp_path / "varying.py"), "--json",
                                    "--repeats", "5"], env=env)
    assert ran.exit_code == 0, ran.output
    run_id = json.loads(ran.output)["run_id"]
    out = CliRunner().invoke(main, ["bench", "remeasure", run_id, "--rounds", "6", "--json"], env=env)
    entry = json.loads(out.stdout)["entries"][0]
    assert entry["runs"] == 1 and entry["score_interval"][0] == entry["score_interval"][1], entry
    text = CliRunner().invoke(main, ["bench", "remeasure", run_id, "--rounds", "7"], env=env)
    line = next(x for x in text.output.splitlines() if x.startswith("cand_"))
    assert "now" in line and "(one measurement, no interval)" in line.split("now", 1)[1] and "7 runs" not in line, line


async def test_compare_runs_a_recorded_program_until_its_runs_settle(tmp_path: Path):
    """A compare of two exact programs ran each 5 times, ten evaluations' time for a difference the
    store already held exactly (model-play, 2026-12-04). A recorded side stops once its runs, with
    its earlier ones, are 5 alike: an exact one runs once, to show it still gives its number; the
    contrast is still exact and says why a side ran fewer times; a varying program runs every
    time asked."""
    from evoteam.servers.bench.evaluation.compare import compare_candidates

    settings = Settings(db=tmp_path / "kb.db")
    calls = []

    async def progress(done, total, message):
        calls.append(message)

    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t")) as kb:
        run = await kb.start_run(RunCreate(goal="circles", kit="circle_packing_26", direction="maximize"))
        a = await evaluate_candidate(settings, "circle_packing_26", code=SEEDED, store=kb, run_id=run.id, repeats=5)
        b = await evaluate_candidate(settings, "circle_packing_26", code=SEEDED.replace("0.25", "0.3"), store=kb,
                                     run_id=run.id, repeats=5)
        cmp = await compare_candidates(settings, "circle_packing_26", {"candidate_id": a.candidate_id},
                                       {"candidate_id": b.candidate_id}, store=kb, progress=progress)
        assert len(calls) == 2 and cmp.rounds == 1, calls  # one run a side, not five
        assert cmp.significant and cmp.verdict.startswith("B is better"), cmp.verdict
        assert cmp.interval[0] == cmp.interval[1] == cmp.b_speedup_over_a == pytest.approx(b.score - a.score)
        # Its size is said beside "significant" (an exact 8.1e-07 read as a gain alone; mp32).
        share = stats.sig3(100 * (b.score - a.score) / a.score)
        assert f"significant ({share}% of A's score)" in cmp.verdict, cmp.verdict
        assert "A ran 1 time(s): with its earlier runs, 6 alike" in cmp.verdict, cmp.verdict
        assert cmp.a.score_interval == [a.score, a.score]
        assert f"kept in run {run.id}" in cmp.verdict
        # A varying program, or one given as code, is not cut short.
        calls.clear()
        mixed = await compare_candidates(settings, "circle_packing_26", {"candidate_id": a.candidate_id},
                                         {"code": UNSEEDED}, store=kb, progress=progress, repeats=5)
        assert sum(m.startswith("B:") for m in calls) == 5 and sum(m.startswith("A:") for m in calls) == 1, calls
        assert mixed.rounds == 5 and "B ran" not in mixed.verdict and "A ran 1 time(s)" in mixed.verdict
        assert "pooled into" not in mixed.verdict  # B is no recorded candidate: nothing of either is recorded


async def test_a_programs_compare_runs_pool_into_its_candidates(tmp_path: Path):
    """A candidate compared three times ran 12 more times for a number known exactly, and one exact
    over five compare runs ranked after a single unseeded run (mp32, 2026-12-04): a program's compare
    runs of two recorded candidates of one run pool into them, as remeasure's do, so its runs and
    rank count them and the next compare or remeasure of it runs it no more than once."""
    from evoteam.servers.bench.evaluation.compare import compare_candidates

    settings = Settings(db=tmp_path / "kb.db")
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t")) as kb:
        run = await kb.start_run(RunCreate(goal="circles", kit="circle_packing_26", direction="maximize"))
        a = await evaluate_candidate(settings, "circle_packing_26", code=SEEDED, store=kb, run_id=run.id, repeats=5)
        b = await evaluate_candidate(settings, "circle_packing_26", code=SEEDED.replace("0.25", "0.3"), store=kb,
                                     run_id=run.id)
        assert (await kb.get_candidate(b.candidate_id)).runs == 1  # one run: ranks after every measured one
        cmp = await compare_candidates(settings, "circle_packing_26", {"candidate_id": a.candidate_id},
                                       {"candidate_id": b.candidate_id}, store=kb)
        assert "A ran 1 time(s)" in cmp.verdict and "B ran 4 time(s)" in cmp.verdict, cmp.verdict
        assert f"runs pooled as evaluations (A's 1 into {a.candidate_id}, B's 4 into {b.candidate_id})" in cmp.verdict, \
            cmp.verdict
        pooled = await kb.get_candidate(b.candidate_id)
        assert pooled.samples["program"] == [b.score] * 5 and pooled.runs is None and pooled.n_measurements == 2
        assert (await kb.get_run(run.id)).best_candidate_id == b.candidate_id  # exact now, it ranks first
        # Against the kit's baseline, the candidate side pools too (counted "5 alike", then run again; mp33).
        c = await evaluate_candidate(settings, "circle_packing_26", code=SEEDED.replace("0.25", "0.35"), store=kb,
                                     run_id=run.id)
        vs_base = await compare_candidates(settings, "circle_packing_26", {"candidate_id": "baseline"},
                                           {"candidate_id": c.candidate_id}, store=kb)
        assert f"B's 4 into {c.candidate_id}" in vs_base.verdict, vs_base.verdict
        # A program's baseline is its starting program, whose score is no ratio: no A/A check said (rev76).
        assert vs_base.a.note == "the kit's baseline", vs_base.a.note
        assert (await kb.get_run(run.id)).best_candidate_id == c.candidate_id  # 5 alike: it ranks, and leads
        calls = []

        async def progress(done, total, message):
            calls.append(message)

        again = await compare_candidates(settings, "circle_packing_26", {"candidate_id": a.candidate_id},
                                         {"candidate_id": b.candidate_id}, store=kb, progress=progress)
        assert len(calls) == 2 and again.significant, (calls, again.verdict)
        mset = await remeasure_run(settings, kb, run.id, rounds=5, candidate_ids=[b.candidate_id])
        assert mset.entries[0].settled and mset.entries[0].runs == 0  # exact: not run again
        # A finished run takes no more measurements: the verdict stands and says why nothing pooled.
        await kb.update_run(run.id, status="finished", reason="done")
        before = (await kb.get_candidate(a.candidate_id)).n_measurements
        done = await compare_candidates(settings, "circle_packing_26", {"candidate_id": a.candidate_id},
                                        {"candidate_id": b.candidate_id}, store=kb)
        assert done.significant and f"runs not pooled into the candidates: A's run {run.id} is not an active run" \
            in done.verdict, done.verdict
        assert (await kb.get_candidate(a.candidate_id)).n_measurements == before


async def test_made_up_runs_never_settle_a_program(tmp_path: Path):
    """A client may record a candidate with runs of its choosing (unverified): five made-up runs
    alike must not make its code settled, so that remeasure reports a score it never measured or
    compare stops after one run. Only the bench's own measurements count as earlier runs."""
    from evoteam.servers.bench.evaluation.compare import compare_candidates
    from evoteam.servers.knowledge.models import CandidateCreate

    settings = Settings(db=tmp_path / "kb.db")
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t")) as kb:
        run = await kb.start_run(RunCreate(goal="circles", kit="circle_packing_26", direction="maximize"))
        real = await evaluate_candidate(settings, "circle_packing_26", code=SEEDED, store=kb, run_id=run.id)
        forged = await kb.record_candidate(CandidateCreate(
            run_id=run.id, code=SEEDED + "# mine\n", status="PASSED", score=2.9, samples={"program": [2.9] * 5},
            metrics={"kit": "circle_packing_26"}))
        assert not forged.verified
        mset = await remeasure_run(settings, kb, run.id, rounds=5, candidate_ids=[forged.id])
        (entry,) = mset.entries
        assert not (entry.settled and entry.runs == 0), entry  # it ran
        assert entry.score == pytest.approx(real.score) and entry.score != 2.9, entry
        cmp = await compare_candidates(settings, "circle_packing_26", {"candidate_id": real.candidate_id},
                                       {"candidate_id": forged.id}, store=kb, repeats=5)
        assert "B ran" not in cmp.verdict and cmp.b.score == pytest.approx(real.score), cmp.verdict
        # Kept as this batch's runs alone, not as every run of both codes: the forged side's runs do
        # not count, so a record of "every run" would lack the runs later pooled into it (review).
        from evoteam.servers.knowledge.comparisons import dev_comparisons

        kept = [r for r in await dev_comparisons(kb, run.id, "circle_packing_26")
                if {r.a_candidate_id, r.b_candidate_id} == {real.candidate_id, forged.id}]
        assert kept and not kept[-1].cumulative, kept
        assert kept[-1].samples["b"] == [pytest.approx(real.score)] * 5, kept[-1]  # its five runs here, no 2.9


async def test_only_a_passing_dev_record_of_this_kits_content_settles(tmp_path: Path):
    """Earlier runs count only from the bench's own passing dev record of the kit as it is now: a
    code that failed a run keeps its passing runs (alike, they would hide the failure), a held-out
    record's runs are other workloads', and an older kit content's evaluator may score otherwise."""
    from evoteam.servers.bench.evaluation.settle import earlier_runs
    from evoteam.servers.knowledge.models import CandidateCreate

    settings = Settings(db=tmp_path / "kb.db")
    kit = find_kit(settings, "circle_packing_26")
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t")) as kb:
        run = await kb.start_run(RunCreate(goal="circles", kit="circle_packing_26", direction="maximize"))
        bench = kb.with_actor(Actor(user="u", client="t", verifier=True))

        async def recorded(n: int, **changes) -> str:
            spec = dict(run_id=run.id, code=f"x = {n}\n", status="PASSED", score=2.5, samples={"program": [2.5] * 5},
                        verified=True, metrics={"kit": kit.name, "kit_hash": kit.content_hash})
            spec.update(changes)
            return (await bench.record_candidate(CandidateCreate(**spec))).id

        assert await earlier_runs(kb, await recorded(1), kit) == [2.5] * 5
        for n, changes in enumerate(({"status": "RUNTIME_ERROR"}, {"split": "heldout"},
                                     {"metrics": {"kit": kit.name, "kit_hash": "older"}},
                                     {"metrics": {"kit": "erdos_min_overlap"}}), start=2):
            assert await earlier_runs(kb, await recorded(n, **changes), kit) == [], changes


async def test_a_programs_compare_counts_every_run_of_its_code(tmp_path: Path, monkeypatch):
    """Five runs of a stochastic program in one compare, all from its high mode, read "B is better,
    significant" over an exact program its pooled interval held (mp61): a program's runs are not
    paired with the other side's, so a compare counts every run of each code, and the verdict the
    run keeps (and reads in the trajectory, remeasure and run_report) is that one."""
    from evoteam.servers.bench.evaluation import compare, core
    from evoteam.servers.knowledge.comparisons import dev_comparisons, paired_verdict

    settings = Settings(db=tmp_path / "kb.db")
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t")) as kb:
        run = await kb.start_run(RunCreate(goal="circles", kit="circle_packing_26", direction="maximize"))
        a = await evaluate_candidate(settings, "circle_packing_26", code=SEEDED, store=kb, run_id=run.id, repeats=5)
        assert a.candidate_score == pytest.approx(1.625)
        # The program's own runs, scripted around A's exact score: three of its first five low.
        scores, real = iter([1.50, 1.51, 1.52, 1.70, 1.71] + [1.70, 1.71, 1.72, 1.71, 1.70]), core._run_program

        async def scripted(*args, **kwargs):
            e = await real(*args, **kwargs)  # A's runs as they are (its exact score); B's scripted
            return e if e.score == pytest.approx(1.625) else e.model_copy(update={"score": next(scores)})

        monkeypatch.setattr(core, "_run_program", scripted)
        monkeypatch.setattr(compare, "_run_program", scripted)
        b = await evaluate_candidate(settings, "circle_packing_26", code=UNSEEDED, store=kb, run_id=run.id,
                                     repeats=5)
        cmp = await compare.compare_candidates(settings, "circle_packing_26", {"candidate_id": a.candidate_id},
                                               {"candidate_id": b.candidate_id}, store=kb)
        assert "B ran 5 time(s)" not in cmp.verdict and not cmp.significant, cmp.verdict  # ten runs, three low
        # In a program's words: no "paired rounds", and no difference found is not one score (mp62).
        assert "paired" not in cmp.verdict and "report the two as one result" not in cmp.verdict, cmp.verdict
        assert "their runs find no significant difference, not shown to be one score: each further " \
               "bench.compare of the two by id adds runs to both and narrows it" in cmp.verdict, cmp.verdict
        assert cmp.b.score == pytest.approx(1.70) and cmp.b.score_interval[0] <= 1.52, cmp.b  # B's ten runs
        assert (await kb.get_candidate(b.candidate_id)).samples["program"] == \
            [1.50, 1.51, 1.52, 1.70, 1.71, 1.70, 1.71, 1.72, 1.71, 1.70]
        kept = paired_verdict(await dev_comparisons(kb, run.id, "circle_packing_26"), a.candidate_id, b.candidate_id)
        assert kept is not None and kept.runs == 6 and not kept.significant, kept  # A's six runs, the fewer side
