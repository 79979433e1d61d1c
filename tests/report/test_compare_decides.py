"""A version's gain is decided by paired rounds of its best and the best before it: bench.compare of
the two by id and every dev batch of bench.remeasure keep theirs in the run, and run_report (and
reflect, and the report page) pools them, so what the model was sent to find out is what the stop
rule counts."""

from __future__ import annotations

import asyncio
import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from evoteam import stats
from evoteam.config import Settings
from evoteam.report.data import gather
from evoteam.report.summary import summarise
from evoteam.servers.bench.evaluation.compare import compare_candidates
from evoteam.servers.knowledge.comparisons import (
    ComparisonRecord,
    ComparisonSet,
    dev_comparisons,
    keep_comparison,
    paired_verdict,
    record_of,
)
from evoteam.servers.knowledge.connect import component_store
from evoteam.servers.knowledge.errors import Forbidden
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.codehash import code_hash
from evoteam.servers.knowledge.models import ArtifactCreate, CandidateCreate, RunCreate
from evoteam.servers.knowledge.store import Actor
from evoteam.servers.team.core import TeamService
from tests.report.conftest import _design, circle_versions, one_best_per_version
from tests.report.test_significance import rounds



SOURCE_ROOT_CIRCLES = Path(__file__).parents[2] / "task_kits" / "circle_packing_26"


def _record(a: str, b: str, center: float, *, spread: float = 0.02, n: int = 30, seed: int = 0, minutes: int = 0,
            **extra) -> ComparisonRecord:
    """What a kernel compare of A and B keeps: n rounds of B's speedup over A on three workloads,
    spread about ``center`` by +-spread (relative), its verdict as compare computes it."""
    rng = random.Random(seed)
    samples = {w: [center * (1 + rng.uniform(-spread, spread)) for _ in range(n)] for w in ("w1", "w2", "w3")}
    ranges = {w: (list(rs), list(rs)) for w, rs in samples.items()}
    est = stats.censored_score_estimate(samples, ranges, "kernel")
    fields = dict(a_candidate_id=a, b_candidate_id=b, kit="k", split="dev", kind="kernel", b_over_a=est.value,
                  interval=[est.lo, est.hi], significant=stats.significant(est), contended=False,
                  measured_at=datetime.now(UTC) + timedelta(minutes=minutes), samples=samples, ranges=ranges)
    fields.update(extra)
    return ComparisonRecord(**fields)


async def _v2(kb, run_id: str):
    report = await gather(kb, run_id)
    return {v.version: v for v in report.versions}[2], {v.version: v for v in summarise(report).versions}[2]


async def test_a_kept_compare_decides_a_kernel_gain_the_bests_intervals_leave_open(tmp_path: Path):
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t")) as kb:
        # v2's best reads 9% better but the two bests' intervals overlap: not established.
        run = await one_best_per_version(kb, tmp_path, {v: (c, rounds(c, v)) for v, c in {1: 4.0, 2: 4.35}.items()})
        point, line = await _v2(kb, run.id)
        before, own = point.best_before_id, point.best_candidate_id
        assert line.significant_gain is None and f"bench.compare a_candidate_id={before} b_candidate_id={own}" in line.gain

        # Only the bench keeps a comparison: an agent cannot write the verdict it wants.
        with pytest.raises(Forbidden, match="bench.compare"):
            await kb.put_artifact(ArtifactCreate(run_id=run.id, kind="comparison", name="compare-dev-x.json",
                                                 text=_record(before, own, 2.0).model_dump_json()))
        # Another split's or another kit's compare is not this gain's.
        for other in (dict(split="heldout"), dict(kit="other")):
            assert await keep_comparison(kb, run.id, _record(before, own, 1.09, **other)) is None
        point, line = await _v2(kb, run.id)
        assert line.significant_gain is None and not point.paired_batches

        # A paired verdict with v2's best as A: B (the best before) is 0.95x of it, so v2 gains
        # about 1/0.95, significant, and the stop rule counts a gain.
        assert await keep_comparison(kb, run.id, _record(own, before, 0.95, minutes=1)) is None
        report = await gather(kb, run.id)
        point = {v.version: v for v in report.versions}[2]
        summary = summarise(report)
        line = summary.versions[1]
        assert point.paired_batches == 1 and point.gain == pytest.approx(1 / 0.95, rel=0.01)
        assert 1 < point.gain_interval[0] < point.gain < point.gain_interval[1]
        assert line.significant_gain is True and "timed side by side (a paired batch): significant" in line.gain
        assert summary.versions_without_significant_gain == 0


async def test_compares_of_one_pair_pool_so_comparing_again_until_lucky_does_not_decide(tmp_path: Path):
    """The newest compare alone would let a model compare again until one batch reads significant
    (one A/A look in twenty does); every compare of the pair is pooled instead."""
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t")) as kb:
        run = await one_best_per_version(kb, tmp_path, {v: (c, rounds(c, v)) for v, c in {1: 4.0, 2: 4.35}.items()})
        point, _ = await _v2(kb, run.id)
        before, own = point.best_before_id, point.best_candidate_id
        for seed in (1, 2):  # the same speed, twice
            await keep_comparison(kb, run.id, _record(before, own, 1.0, seed=seed, minutes=seed))
        lucky = _record(before, own, 1.06, seed=3, minutes=3)
        assert lucky.significant  # alone, the newest would have decided a gain
        await keep_comparison(kb, run.id, lucky)
        summary = summarise(await gather(kb, run.id))
        line = summary.versions[1]
        assert line.significant_gain is False, line.gain
        assert "(3 paired batches pooled): no significant difference" in line.gain
        assert summary.versions_without_significant_gain == 1


def test_what_a_pairs_compares_decide():
    """Under 95% decides nothing; a busy machine's paired rounds decide either way (load widens a
    paired interval, it does not make a difference appear: a model on a machine that stayed busy
    could never settle a tie, and the stop rule never counted it); a batch on other workloads
    than the newest (a kit that changed) is left out and counted as such."""
    few = _record("a", "b", 1.2, n=2)
    assert paired_verdict([few], "a", "b").decides is False
    busy_none = paired_verdict([_record("a", "b", 1.0, contended=True)], "a", "b")
    assert busy_none.decides and not busy_none.significant and busy_none.contended
    busy_gain = _record("a", "b", 1.2, contended=True)
    found = paired_verdict([busy_gain], "a", "b")
    assert found.decides and found.significant and found.kind == "kernel"
    # Either order of the sides: B over A, turned.
    turned = paired_verdict([busy_gain], "b", "a")
    assert turned.estimate[0] == pytest.approx(1 / found.estimate[0], rel=0.01) and turned.significant
    assert paired_verdict([busy_gain], "a", "c") is None
    older = _record("a", "b", 1.2, samples={"w1": [1.2] * 30}, ranges=None, minutes=-1)
    pooled = paired_verdict([older, busy_gain], "a", "b")
    assert pooled.batches == 1 and pooled.left_out == 1


def test_batches_that_disagree_widen_their_pooled_verdict():
    """Two paired batches of one pair, each significant and tight, one reading B 10% faster and the
    other 10% slower: pooled as one sample of rounds they read a tight "no difference" about 1.0
    that neither batch saw; widened for their disagreement, an interval that holds both readings.
    Batches that agree pool as before."""
    from evoteam import copystats
    up, down = _record("a", "b", 1.1, seed=1), _record("a", "b", 1 / 1.1, seed=2, minutes=1)
    assert up.significant and down.significant
    apart = paired_verdict([up, down], "a", "b")
    value, lo, hi = apart.estimate
    assert lo < 1 / 1.1 and hi > 1.1 and not apart.significant, apart
    alike = [_record("a", "b", 1.1, seed=s, minutes=s) for s in (3, 4)]
    together = paired_verdict(alike, "a", "b")
    rounds_only = stats.censored_score_estimate(
        {w: alike[0].samples[w] + alike[1].samples[w] for w in alike[0].samples}, None, "kernel")
    assert together.estimate[1:] == pytest.approx([rounds_only.lo, rounds_only.hi])
    assert copystats.between_measurements(rounds_only, [(r.b_over_a, *r.interval) for r in alike]) == rounds_only


def test_a_record_the_report_cannot_pool_is_refused_when_read():
    """A record with a ratio of zero, no rounds or a program side missing would crash run_report;
    it fails validation instead, and the report skips it like one of another format."""
    good = _record("a", "b", 1.1).model_dump()
    for broken in ({"samples": {"w1": [0.0] * 30}, "ranges": None}, {"samples": {}},
                   {"kind": "program", "samples": {"a": [1.0]}}, {"kind": "program", "samples": {"a": [1.0], "b": []}}):
        with pytest.raises(ValueError):
            ComparisonRecord(**{**good, **broken})


async def test_a_programs_kept_compare_reads_as_a_difference_in_the_kits_direction(tmp_path: Path):
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t")) as kb:
        run = await one_best_per_version(kb, tmp_path, {1: (2.17, {"program": [2.17]}), 2: (2.40, {"program": [2.40]})})
        point, _ = await _v2(kb, run.id)
        # A = v2's best, B = the best before: B's score minus A's is -0.23, exact (every run alike).
        await keep_comparison(kb, run.id, ComparisonRecord(
            a_candidate_id=point.best_candidate_id, b_candidate_id=point.best_before_id, kit="k", split="dev",
            kind="program", b_over_a=-0.23, interval=[-0.23, -0.23], significant=True, contended=False,
            measured_at=datetime.now(UTC), samples={"a": [2.40] * 5, "b": [2.17] * 5}))
        point, line = await _v2(kb, run.id)
        assert point.gain == pytest.approx(0.23) and line.significant_gain is True
        # It names the best it is over (a model could not tell which "the best before it" was).
        assert line.gain.startswith(f"0.23 (exact: every run alike) over the best before it ({point.best_before_id}), "
                                    "run side by side (a batch)")


async def test_compare_of_two_bests_settles_a_real_program_kits_version_gain(tmp_path: Path):
    """circle_packing_26 through the real bench: v1's initial program and v2's better one, once
    each, leave v2's gain not established; bench.compare of the two (five runs a side, exact for
    these deterministic programs) keeps its verdict in the run, and run_report's gain is it."""
    settings = Settings(db=tmp_path / "kb.db")
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t")) as kb:
        run, ids = await circle_versions(kb, settings, tmp_path)
        line = summarise(await gather(kb, run.id)).versions[1]
        assert line.significant_gain is None and "not established" in line.gain

        cmp = await compare_candidates(settings, "circle_packing_26", {"candidate_id": ids[1]},
                                       {"candidate_id": ids[2]}, store=kb)
        assert cmp.significant and cmp.verdict.startswith("B is better")
        assert f"kept in run {run.id}" in cmp.verdict
        # Where B now stands in the run, by the run's rule (a compare that made B the best said nothing; mp46).
        # Here against A itself, by these runs: this pair's verdict, said as such (review of mp70's words).
        assert f"; B in the run: the run's best, beyond noise of the run's earlier best ({ids[1]})" in cmp.verdict, \
            cmp.verdict
        # Each side names the candidate it was given as (a model lost track of A and B over three compares).
        assert (cmp.a.candidate_id, cmp.b.candidate_id) == (ids[1], ids[2])
        summary = summarise(await gather(kb, run.id))
        line = summary.versions[1]
        # A program's runs are neither paired nor timed (mp59): said in a program's words.
        assert line.significant_gain is True and "run side by side (a batch)" in line.gain, line.gain
        # The programs are deterministic: five runs alike a side make the difference exact.
        assert line.gain.startswith(f"{cmp.b_speedup_over_a:.6g} (exact: every run alike)"), line.gain
        assert summary.versions_without_significant_gain == 0
        # Compared again: a program's verdict counts every run of both codes, the first compare's
        # too, so it is the pool the run reads, and no second "pooled" verdict stands beside it
        # ("this batch alone" equal to the pool read as a bug; mp62).
        assert cmp.pooled is None
        again = await compare_candidates(settings, "circle_packing_26", {"candidate_id": ids[2]},
                                         {"candidate_id": ids[1]}, store=kb, repeats=2)
        assert again.pooled is None and "this batch alone" not in again.verdict, again.verdict
        # Read as this call's B over A (the first compare turned round): -(B - A) of the first.
        assert again.b_speedup_over_a == pytest.approx(-cmp.b_speedup_over_a)
        # The first compare's runs pooled into both candidates (5 alike each): this one ran each once and
        # its difference is exact, over every run (before, 2 runs a side: "not established").
        assert again.significant and again.rounds == 1, again.verdict
        assert "A ran 1 time(s)" in again.verdict and "B ran 1 time(s)" in again.verdict, again.verdict
        assert "not established" not in again.verdict


async def test_paired_rounds_outlast_a_newer_side_by_side_batch_and_a_busy_compare_decides(tmp_path: Path):
    """On a busy machine a gain is decided side by side; two batch intervals that overlap leave it
    open, and a verdict must not flip with every new batch (model-play, 2026-12-03: a 12-17% gain,
    significant in two paired compares, read significant, then within noise, batch by batch). The
    paired rounds decide over any batch's two intervals, older or newer, busy or not."""
    from evoteam.report.remeasure import MeasurementSet, Remeasured
    from tests.report.test_significance import BUSY

    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t")) as kb:
        run = await kb.start_run(RunCreate(goal="g", kit="k", direction="maximize", x0=1.0))
        team = TeamService(component_store("team", kb), kb=kb, write_agent_files=False, project_dir=tmp_path)
        ids = {}
        for v, center in ((1, 17.0), (2, 19.5)):
            await team.design_team(_design(run.id, f"diagnosis {v}", f"Role{v}"))
            bench = kb.with_actor(Actor(user="u", client="t", role=f"Role{v}", team_version=v, verifier=True))
            code = f"def run(x):\n    return x * {v}\n"
            ids[v] = (await bench.record_candidate(CandidateCreate(
                run_id=run.id, code=code, code_hash=code_hash(code), status="PASSED", score=center,
                samples=rounds(center, v), verified=True, metrics=BUSY))).id
        bench = kb.with_actor(Actor(user="u", client="t", verifier=True))

        async def batch(v2: tuple[float, list[float]], minutes: int) -> None:
            entries = [Remeasured(candidate_id=ids[1], score=17.0, score_interval=[15.0, 19.0]),
                       Remeasured(candidate_id=ids[2], score=v2[0], score_interval=v2[1])]
            mset = MeasurementSet(run_id=run.id, kit="k", measured_at=datetime.now(UTC) + timedelta(minutes=minutes),
                                  rounds=10, splits=["dev"], entries=entries)
            await bench.put_artifact(ArtifactCreate(run_id=run.id, kind="measurement_set", name=f"set-{minutes}.json",
                                                    text=mset.model_dump_json()))

        await batch((20.0, [18.0, 22.0]), 0)  # overlapping: open, not a stall
        summary = summarise(await gather(kb, run.id))
        assert summary.versions[1].significant_gain is None and summary.versions_without_significant_gain == 0

        # A busy compare decides too: one that found no difference is no gain (the stop rule counts
        # it); pooled with one that found a clear difference, the two decide a gain (a noisy one
        # whose interval holds the clear one's: batches that disagree beyond their intervals widen
        # the pool instead, test_batches_that_disagree_widen_their_pooled_verdict).
        await keep_comparison(kb, run.id, _record(ids[1], ids[2], 1.0, spread=0.3, contended=True, minutes=1))
        summary = summarise(await gather(kb, run.id))
        assert summary.versions[1].significant_gain is False and summary.versions_without_significant_gain == 1
        await keep_comparison(kb, run.id, _record(ids[1], ids[2], 1.14, seed=2, contended=True, minutes=2))
        line = summarise(await gather(kb, run.id)).versions[1]
        assert line.significant_gain is True and "paired batches pooled" in line.gain
        decided = line.gain

        # Newer batches, one clearing and one overlapping, do not move the paired verdict.
        for minutes, v2 in ((3, (23.0, [21.0, 25.0])), (4, (19.0, [17.5, 21.0]))):
            await batch(v2, minutes)
            line = summarise(await gather(kb, run.id)).versions[1]
            assert line.significant_gain is True and line.gain == decided


async def test_a_remeasure_batch_keeps_paired_rounds_that_settle_a_real_version_gain(tmp_path: Path):
    """bench.remeasure of circle_packing_26's two version bests (in one batch, in rotating order)
    keeps the pair's rounds in the run. Each program stops once its runs, with the one recorded
    before, are five alike (batchruns.settled): four runs a side, which settle v2's gain through the
    pooled candidates, exact and significant; a second re-measurement runs neither (both exact)
    and leaves the gain as it was. The reply carries the version gains it decided, as run_report
    says them (a model needed a second call for them; mp40)."""
    from evoteam.report.remeasure import remeasure_run
    from evoteam.report.summary import remeasure_with_gains

    settings = Settings(db=tmp_path / "kb.db")
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t")) as kb:
        run, _ = await circle_versions(kb, settings, tmp_path)
        first = await remeasure_with_gains(settings, kb, run.id, rounds=5)
        reported = summarise(await gather(kb, run.id)).versions
        assert first.version_gains == [f"v{v.version}: {v.gain}" for v in reported] and len(reported) == 2
        assert first.version_gains[1].startswith("v2: ") and first.version_gains[1].endswith(": significant")
        assert [(e.settled, e.runs) for e in first.entries] == [(True, 4), (True, 4)]
        point, line = await _v2(kb, run.id)
        # The pair kept holds every run of each code (four here and the one before): it decides (mp61).
        assert line.significant_gain is True and point.paired_batches == 1
        assert line.gain.endswith(f"(exact: every run alike) over the best before it ({point.best_before_id}), "
                                  "run side by side (a batch): significant"), line.gain
        again = await remeasure_run(settings, kb, run.id, rounds=5)
        assert [(e.settled, e.runs) for e in again.entries] == [(True, 0), (True, 0)]  # exact already: not run
        assert again.order_after == first.order_after and again.changed == []
        assert "only the run's best" not in (again.note or "")  # two finalists: a ranking to read
        assert len(await dev_comparisons(kb, run.id, "circle_packing_26")) == 1  # the first batch's pair, kept
        assert summarise(await gather(kb, run.id)).versions[1].gain == line.gain


async def test_paired_rounds_over_the_stores_limit_are_not_kept_and_nothing_fails(tmp_path: Path):
    """A re-measurement keeps every two finalists' rounds in one artifact; on a store whose
    artifact limit that exceeds, the rounds are not kept and the call says why, never fails
    after the measuring is done. Resolved rounds keep no ranges (half the size)."""
    from evoteam.servers.knowledge.comparisons import keep_comparisons, record_of

    big = record_of("a", "b", kit="k", split="dev", kind="kernel",
                    samples={f"w{i}": [1.0 + j / 1000 for j in range(100)] for i in range(20)},
                    ranges={f"w{i}": ([1.0 + j / 1000 for j in range(100)],) * 2 for i in range(20)},
                    contended=False, measured_at=datetime.now(UTC))
    assert big.ranges is None
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t"), max_artifact_bytes=10_000) as kb:
        run = await kb.start_run(RunCreate(goal="g", kit="k"))
        why = await keep_comparisons(kb, run.id, [big], "remeasure")
        assert why and "limit" in why
        assert not (await kb.list_artifacts(run.id, kind="comparison")).items


async def test_a_remeasure_whose_rounds_the_store_cannot_keep_says_so_and_still_pools(tmp_path: Path):
    """Nor does it give version gains: run_report would read them without this call's rounds, and
    they could contradict its own verdicts (review 2026-12-05)."""
    from evoteam.report.summary import remeasure_with_gains

    settings = Settings(db=tmp_path / "kb.db")
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t"), max_artifact_bytes=300) as kb:
        run, ids = await circle_versions(kb, settings, tmp_path)
        mset = await remeasure_with_gains(settings, kb, run.id, rounds=2)
        assert "paired rounds were not kept" in mset.note and "not stored in the run" in mset.note
        assert mset.version_gains == [] and "no version_gains: the run did not keep this call's rounds" in mset.note
        assert {e.n_measurements for e in mset.entries} == {2}  # pooled into both candidates all the same


def test_a_kept_record_reads_back_as_the_interval_compare_showed():
    """The bootstrap is seeded from the values: rounds kept cut to 7 digits gave a kept interval
    off the one compare showed (1.12–1.26 against 1.12–1.25), enough to flip a verdict near 1."""
    rng = random.Random(7)
    samples = {w: [1.19 * (1 + rng.gauss(0, 0.05)) for _ in range(30)] for w in ("w1", "w2", "w3")}
    ranges = {w: (list(rs), list(rs)) for w, rs in samples.items()}
    shown = stats.censored_score_estimate(samples, ranges, "kernel")  # what compare computes and shows
    from evoteam.servers.knowledge.comparisons import record_of

    kept = ComparisonRecord.model_validate_json(record_of(
        "a", "b", kit="k", split="dev", kind="kernel", samples=samples, ranges=ranges,
        contended=False, measured_at=datetime.now(UTC)).model_dump_json())
    assert paired_verdict([kept], "a", "b").estimate == [shown.value, shown.lo, shown.hi]


async def test_within_noise_of_top_heeds_the_paired_rounds_and_is_dropped_once_the_top_is_not_the_best(tmp_path):
    """remeasure listed a finalist within noise of its top by two unpaired intervals while the run's
    gain between them, from the same batch's paired rounds, read significant; and run_report kept
    echoing a set's list after another candidate became the best."""
    from evoteam.report.remeasure import MeasurementSet, Remeasured, apart_by_pairs

    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t")) as kb:
        run = await one_best_per_version(kb, tmp_path, {v: (c, rounds(c, v)) for v, c in {1: 4.0, 2: 4.35}.items()})
        point, _ = await _v2(kb, run.id)
        before, own = point.best_before_id, point.best_candidate_id

        def mset(order: list[str]) -> MeasurementSet:
            return MeasurementSet(run_id=run.id, kit="k", measured_at=datetime.now(UTC), rounds=10, splits=["dev"],
                                  entries=[Remeasured(candidate_id=c) for c in order], order_after=order,
                                  within_noise_of_top=order[1:])

        tie = mset([own, before])
        apart_by_pairs(tie, [_record(before, own, 1.0)])
        assert tie.within_noise_of_top == [before]  # paired, still a tie
        told = mset([own, before])
        apart_by_pairs(told, [_record(before, own, 1.09)])
        assert told.within_noise_of_top == []  # paired, told apart
        # Paired rounds that find the other better than the top (which its unpaired bound put
        # first): the top is not established as better, so it stays listed; and a pair whose
        # intervals were apart but whose paired rounds find no difference is listed too.
        upside = mset([own, before])
        apart_by_pairs(upside, [_record(before, own, 0.9)])
        assert upside.within_noise_of_top == [before]
        # ...and it is named as better, not left reading "within noise" (review 2026-12-04).
        assert upside.better_than_top == [before] and tie.better_than_top == told.better_than_top == []
        apart_set = mset([own, before])
        apart_set.within_noise_of_top = []
        apart_by_pairs(apart_set, [_record(before, own, 1.0)])
        assert apart_set.within_noise_of_top == [before]
        # A new top the paired rounds find better is a change, where overlapping intervals said
        # "noise" while nothing was within noise of the top (model-play 2026-12-04); the same two
        # in the order they had before, or tied by the pairs, are no change.
        for ratio, was, changed in ((1.09, [before, own], [before, own]), (1.09, [own, before], []),
                                    (1.0, [before, own], [])):
            swap = mset([own, before])
            for rank, c in enumerate(was, 1):
                next(e for e in swap.entries if e.candidate_id == c).rank_before = rank
            swap.order_before = was
            apart_by_pairs(swap, [_record(before, own, ratio)])
            assert swap.changed == changed, (ratio, was, swap.changed)

        bench = kb.with_actor(Actor(user="u", client="t", verifier=True))
        for order in ([own, before], [before, own]):
            await bench.put_artifact(ArtifactCreate(run_id=run.id, kind="measurement_set", name=f"set-{order[0]}.json",
                                                    text=mset(order).model_dump_json()))
            summary = summarise(await gather(kb, run.id))
            # The run's best is v2's (own): the set whose top it is speaks; the other's list is stale.
            assert summary.remeasure_within_noise_of_top == ([before] if order[0] == own else [])
            # A best tied with finalists says what its score then is (mp39: a top of equals reported alone).
            assert (summary.best_dev_note or "").startswith("not told apart from 1 other") == (order[0] == own)
            await asyncio.sleep(0.01)
        # Paired rounds that find a finalist better than the top: the note crowns it, not "report them as
        # one result" beside remeasure_better_than_top naming it (mp64).
        await keep_comparison(bench, run.id, _record(before, own, 0.9))
        await bench.put_artifact(ArtifactCreate(run_id=run.id, kind="measurement_set", name="set-upside.json",
                                                text=mset([own, before]).model_dump_json()))
        summary = summarise(await gather(kb, run.id))
        assert summary.best_candidate_id == own and summary.remeasure_better_than_top == [before]
        assert summary.best_dev_note.startswith(f"ranks first by intervals, but the paired rounds find {before} "
                                                f"better than it (bench.compare, bench.remeasure): crown {before}"), \
            summary.best_dev_note


async def test_a_minimising_programs_paired_gain_and_a_significantly_worse_one(tmp_path: Path):
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t")) as kb:
        run = await kb.start_run(RunCreate(goal="g", kit="k", direction="minimize", x0=10.0))
        team = TeamService(component_store("team", kb), kb=kb, write_agent_files=False, project_dir=tmp_path)
        ids = {}
        for v, score in ((1, 5.0), (2, 4.0), (3, 4.5)):
            await team.design_team(_design(run.id, f"diagnosis {v}", f"Role{v}"))
            bench = kb.with_actor(Actor(user="u", client="t", role=f"Role{v}", team_version=v, verifier=True))
            code = f"def run(x):\n    return x * {v}\n"
            ids[v] = (await bench.record_candidate(CandidateCreate(
                run_id=run.id, code=code, code_hash=code_hash(code), status="PASSED", score=score,
                samples={"program": [score]}, verified=True))).id

        def program(a: str, b: str, a_runs: list[float], b_runs: list[float]) -> ComparisonRecord:
            from evoteam.servers.knowledge.comparisons import record_of

            return record_of(a, b, kit="k", split="dev", kind="program", samples={"a": a_runs, "b": b_runs},
                             ranges=None, contended=False, measured_at=datetime.now(UTC))

        # v2 (4.0) is lower than v1 (5.0): minimising, a gain; v3 (4.5) is worse than v2.
        await keep_comparison(kb, run.id, program(ids[1], ids[2], [5.0] * 5, [4.0] * 5))
        await keep_comparison(kb, run.id, program(ids[3], ids[2], [4.5] * 5, [4.0] * 5))  # A = v3, turned
        report = await gather(kb, run.id)
        lines = {v.version: v for v in summarise(report).versions}
        points = {v.version: v for v in report.versions}
        assert points[2].gain == pytest.approx(-1.0) and lines[2].significant_gain is True
        assert points[3].gain == pytest.approx(0.5) and points[3].worse
        assert lines[3].significant_gain is False and lines[3].gain.endswith("(a batch): worse, significant")


async def test_batches_of_another_kit_content_or_timing_method_pool_apart_and_unusable_sets_are_skipped(tmp_path):
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t")) as kb:
        run = await one_best_per_version(kb, tmp_path, {v: (c, rounds(c, v)) for v, c in {1: 4.0, 2: 4.35}.items()})
        point, _ = await _v2(kb, run.id)
        before, own = point.best_before_id, point.best_candidate_id
        old = _record(before, own, 1.0, kit_hash="h1", timing_method=2, minutes=-2)
        new = _record(before, own, 1.09, kit_hash="h2", timing_method=3)
        found = paired_verdict([old, new], before, own)
        assert found.batches == 1 and found.left_out == 1 and found.significant
        # A stored set whose record cannot be pooled (a ratio of 0) is skipped, not a crash.
        bench = kb.with_actor(Actor(user="u", client="t", verifier=True))
        broken = _record(before, own, 1.09).model_dump(mode="json")
        broken["b_over_a"], broken["interval"] = 0.0, [0.0, 1.0]
        await bench.put_artifact(ArtifactCreate(run_id=run.id, kind="comparison", name="compare-dev-broken.json",
                                                text=json.dumps({"records": [broken]})))
        point, line = await _v2(kb, run.id)
        assert not point.paired_batches and line.significant_gain is None


async def test_a_set_too_large_for_the_store_is_kept_in_parts(tmp_path: Path):
    from evoteam.servers.knowledge.comparisons import keep_comparisons

    records = [_record("a", f"b{i}", 1.0 + i / 100, seed=i) for i in range(4)]
    one = len(ComparisonSet(records=records[:1]).model_dump_json())
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t"),
                                        max_artifact_bytes=int(one * 1.5)) as kb:
        run = await kb.start_run(RunCreate(goal="g", kit="k"))
        assert await keep_comparisons(kb, run.id, records, "remeasure") is None
        kept = await dev_comparisons(kb, run.id, "k")
        assert sorted(r.b_candidate_id for r in kept) == ["b0", "b1", "b2", "b3"]


def test_a_programs_few_runs_alike_read_as_not_established():
    """Two runs a side, every one alike, give a zero-width contrast from too few runs: the verdict
    says so, not "a 50% interval" of no width (model-play 2026-12-04)."""
    from types import SimpleNamespace

    from evoteam import stats
    from evoteam.servers.bench.evaluation.compare import _verdict

    est = stats.contrast_estimate({"program": [2.5, 2.5]}, {"program": [2.6, 2.6]}, "program")
    assert est.lo == est.hi and 0 < est.coverage < stats.CONFIDENCE
    passed = SimpleNamespace(status="PASSED")
    said = _verdict(passed, passed, est, "program")
    assert said.startswith("not established:") and "interval" not in said.split("(", 1)[0], said
    assert "too few runs per side (repeats=5 or more) to call the difference exact" in said
    # Three runs a side that differ, all on one side: too few to tell, not a tie.
    est = stats.contrast_estimate({"program": [2.50, 2.51, 2.49]}, {"program": [2.53, 2.54, 2.535]}, "program")
    said = _verdict(passed, passed, est, "program")
    assert said.startswith("not established:") and "no significant difference" not in said, said


def test_a_pool_too_small_for_a_95_percent_interval_is_not_called_a_tie():
    """Two compares of two runs a side pool into four, too few for a 95% interval: the clause said
    "no significant difference", a tie the run's verdicts do not make (review 2026-12-04)."""
    from evoteam.servers.bench.evaluation.compare import pooled_clause
    from evoteam.servers.knowledge.comparisons import paired_verdict

    records = [ComparisonRecord(a_candidate_id="cand_a", b_candidate_id="cand_b", kit="k", split="dev", kind="program",
                                b_over_a=0.3, interval=[0.2, 0.4], significant=False, contended=False,
                                measured_at=datetime.now(UTC) + timedelta(minutes=i),
                                samples={"a": [1.0 + i / 100, 1.02], "b": [1.3, 1.31 + i / 100]}) for i in range(2)]
    found = paired_verdict(records, "cand_a", "cand_b")
    assert found.batches == 2 and not found.decides
    clause, pooled = pooled_clause(found)
    assert "not established" in clause and "no significant difference" not in clause, clause
    assert pooled.significant is False and pooled.batches == 2
    decided = paired_verdict([_record("a", "b", 1.2, seed=s, minutes=s) for s in range(2)], "a", "b")
    assert decided.decides and decided.significant
    clause, pooled = pooled_clause(decided)
    assert clause.endswith(", significant: B is faster") and "×" in clause and pooled.significant
    # A program's difference, minimised: B's score below A's is B the better.
    lower = [ComparisonRecord(a_candidate_id="a", b_candidate_id="b", kit="k", split="dev", kind="program",
                              b_over_a=-0.2, interval=[-0.2, -0.2], significant=True, contended=False,
                              measured_at=datetime.now(UTC) + timedelta(minutes=i),
                              samples={"a": [1.0] * 5, "b": [0.8] * 5}) for i in range(2)]
    assert pooled_clause(paired_verdict(lower, "a", "b"), "minimize")[0].endswith(
        "reads: B minus A -0.2 (exact: every run alike), significant: B is better")  # as the batch's verdict says it
    assert pooled_clause(paired_verdict(lower, "a", "b"), "maximize")[0].endswith(", significant: A is better")


async def test_a_compare_across_runs_says_it_is_not_kept(tmp_path: Path):
    """A compare of a candidate with a colleague's best in another run was read as pooling like one
    within a run, and its reply said nothing (model-play 2026-12-04): it says it is not kept."""
    from evoteam.servers.bench.evaluation.core import evaluate_candidate

    settings = Settings(db=tmp_path / "kb.db")
    program = SOURCE_ROOT_CIRCLES / "examples" / "better.py"
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t")) as kb:
        theirs = await kb.start_run(RunCreate(goal="a", kit="circle_packing_26", direction="maximize"))
        mine = await kb.start_run(RunCreate(goal="b", kit="circle_packing_26", direction="maximize"))
        a = await evaluate_candidate(settings, "circle_packing_26", candidate_path=str(program), store=kb,
                                     run_id=theirs.id)
        b = await evaluate_candidate(settings, "circle_packing_26", code=program.read_text() + "\n# mine\n",
                                     store=kb, run_id=mine.id)
        cmp = await compare_candidates(settings, "circle_packing_26", {"candidate_id": a.candidate_id},
                                       {"candidate_id": b.candidate_id}, store=kb, repeats=2)
    assert f"not kept: the two are of different runs ({theirs.id}, {mine.id})" in cmp.verdict, cmp.verdict
    assert cmp.pooled is None


def _borderline(before: str, own: str) -> ComparisonRecord:
    """A kept batch whose gain is significant at 95% but not at the 97.5% the best of two is read at."""
    for center in (1.02 + 0.0025 * i for i in range(40)):
        record = _record(before, own, center, spread=0.06, n=20, seed=7)
        strict = paired_verdict([record], before, own, picked_of=2)
        if record.significant and strict.decides and not strict.significant:
            return record
    raise AssertionError("no borderline batch in the range scanned")


async def test_a_versions_gain_is_read_at_the_confidence_picking_its_best_needs(tmp_path: Path):
    """A renamed copy of v2's best, picked as v3's best of two, read a significant 1.07x from its
    paired batches where one process timed 0.994x (model-play mp38): the best of m candidates is the
    one whose noise ran highest, so its gain is read at 1 - 0.05/m (97.5% for two); a version with one
    candidate is read at 95% as before."""
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t")) as kb:
        run = await one_best_per_version(kb, tmp_path, {v: (c, rounds(c, v)) for v, c in {1: 4.0, 2: 4.35}.items()})
        point, _ = await _v2(kb, run.id)
        before, own = point.best_before_id, point.best_candidate_id
        await keep_comparison(kb, run.id, _borderline(before, own))
        point, line = await _v2(kb, run.id)
        assert point.picked_of == 1 and line.significant_gain is True, line.gain
        assert "picked from" not in line.gain

        # A second, lower candidate of v2: its best is now the better of two.
        bench = kb.with_actor(Actor(user="u", client="t", role="Role2", team_version=2, verifier=True))
        code = "def run(x):\n    return x * 22\n"
        await bench.record_candidate(CandidateCreate(run_id=run.id, code=code, code_hash=code_hash(code),
                                                     status="PASSED", score=4.1, samples=rounds(4.1, 9),
                                                     verified=True))
        point, line = await _v2(kb, run.id)
        assert point.best_candidate_id == own and point.picked_of == 2
        assert line.significant_gain is False, line.gain
        assert ("(a paired batch; its best picked from 2 candidates, so a 97.5% interval): no significant "
                "difference") in line.gain, line.gain
        lo, hi = point.gain_interval
        assert lo < 1 < hi


def test_an_interval_end_near_no_change_is_not_shown_as_it():
    """"1.07× (1–1.14): significant" read as a contradiction (mp38): an end that is not exactly 1
    (a ratio) or 0 (a difference) gets the digits that tell it from them."""
    assert stats.describe(stats.Estimate(1.071, 1.0039, 1.136, 40), "×") == "1.071× (1.004–1.136)"
    assert stats.describe(stats.Estimate(1.071, 0.9986, 1.139, 40), "×") == "1.07× (0.999–1.14)"
    assert stats.describe(stats.Estimate(4.4, 3.9, 5.0, 40), "×") == "4.40× (3.90–5.00)"
    assert stats.describe(stats.Estimate(1.05, 1.0, 1.1, 40), "×") == "1.05× (1.00–1.10)"  # exactly 1 is 1
    assert stats.picked_confidence(1) == stats.CONFIDENCE and stats.picked_confidence(2) == pytest.approx(0.975)


async def test_a_remeasures_top_picked_by_noise_is_no_change_and_stays_within_noise(tmp_path: Path):
    """A re-measurement put a renamed copy of the incumbent on top and said `changed` with the
    incumbent left out of `within_noise_of_top`, so a model crowned it (mp38): the top is the best
    of the finalists, so the pairs are read at the confidence that picking needs, and a swap that
    the paired rounds find no difference in is no change, whatever the unpaired intervals said."""
    from evoteam.report.remeasure import MeasurementSet, Remeasured, apart_by_pairs

    before, own = "cand_a", "cand_b"

    def mset() -> MeasurementSet:
        # Apart before (own's recorded interval below the incumbent's), swapped after.
        entries = [Remeasured(candidate_id=own, rank_before=2, rank_after=1, recorded_interval=[3.9, 4.1],
                              score_interval=[4.0, 4.6]),
                   Remeasured(candidate_id=before, rank_before=1, rank_after=2, recorded_interval=[4.2, 4.4],
                              score_interval=[3.9, 4.3])]
        return MeasurementSet(run_id="run_x", kit="k", measured_at=datetime.now(UTC), rounds=10, splits=["dev"],
                              entries=entries, order_before=[before, own], order_after=[own, before],
                              within_noise_of_top=[before], changed=[before, own])

    alone = mset()
    apart_by_pairs(alone, [])  # no paired rounds: the unpaired intervals' swap stands
    assert alone.changed == [before, own]
    borderline = mset()
    apart_by_pairs(borderline, [_borderline(before, own)])  # significant at 95%, not at the 97.5% of two
    assert borderline.within_noise_of_top == [before] and borderline.changed == []
    tied = mset()
    apart_by_pairs(tied, [_record(before, own, 1.0)])
    assert tied.within_noise_of_top == [before] and tied.changed == []
    told = mset()
    apart_by_pairs(told, [_record(before, own, 1.09)])
    assert told.within_noise_of_top == [] and told.changed == [before, own]


def test_a_finalist_within_noise_only_at_the_picked_confidence_is_said_so():
    """remeasure listed a finalist within noise of the top while its version gain, from the same
    paired rounds read at 95%, said "worse, significant" (mp43): a top picked of two is read at
    97.5%. Where only that keeps it listed, the note says both."""
    from evoteam.report.remeasure import MeasurementSet, Remeasured, apart_by_pairs

    def verdicts(center):
        kept = [_record("cand_other", "cand_top", center)]  # B's speedup over A: above 1, the top is faster
        return (paired_verdict(kept, "cand_other", "cand_top", picked_of=2),
                paired_verdict(kept, "cand_other", "cand_top"), kept)

    between = [c / 1000 for c in range(1000, 1100)
               if not verdicts(c / 1000)[0].significant and verdicts(c / 1000)[1].significant]
    assert between, "no effect size lies between the two confidences"
    picked, named, kept = verdicts(between[len(between) // 2])
    assert stats.favours_b(named.estimate[0], named.kind, "maximize")  # the top (B) faster than the other
    mset = MeasurementSet(run_id="r", kit="k", measured_at=datetime.now(UTC), rounds=10, splits=["dev"],
                          entries=[Remeasured(candidate_id=c) for c in ("cand_top", "cand_other")],
                          order_after=["cand_top", "cand_other"], within_noise_of_top=["cand_other"])
    apart_by_pairs(mset, kept)
    assert mset.within_noise_of_top == ["cand_other"] and mset.better_than_top == []
    assert "cand_other is within noise of the top at the 97.5%" in mset.note and "find cand_top better" in mset.note
    # Apart at 97.5% too: not listed, and nothing to explain.
    clear = MeasurementSet(run_id="r", kit="k", measured_at=datetime.now(UTC), rounds=10, splits=["dev"],
                           entries=[Remeasured(candidate_id=c) for c in ("cand_top", "cand_other")],
                           order_after=["cand_top", "cand_other"], within_noise_of_top=["cand_other"])
    apart_by_pairs(clear, [_record("cand_other", "cand_top", 1.2)])
    assert clear.within_noise_of_top == [] and clear.note is None


def test_a_programs_newest_record_of_every_run_decides_and_older_batches_still_pool():
    """A program's record holds every run of each code since 2026-12-06 (cumulative): the newest
    one decides the two, not it pooled with older ones whose runs it holds (they would count twice).
    Records kept before, each a batch's runs alone, pool as they did."""
    at = datetime(2026, 12, 6, tzinfo=UTC)

    def kept(a: list[float], b: list[float], minutes: int, cumulative: bool) -> ComparisonRecord:
        return record_of("cand_a", "cand_b", kit="circle_packing_26", split="dev", kind="program",
                         samples={"a": a, "b": b}, ranges=None, contended=False,
                         measured_at=at + timedelta(minutes=minutes), cumulative=cumulative)

    first, second = [2.0] * 5, [2.0] * 5
    older = [kept(first, [2.1, 2.2, 2.1, 2.2, 2.1], 0, False), kept(second, [2.2, 2.1, 2.2, 2.1, 2.2], 1, False)]
    assert paired_verdict(older, "cand_a", "cand_b").runs == 10  # each batch's runs, pooled
    whole = kept(first + second + [2.0], [2.1, 2.2, 2.1, 2.2, 2.1, 2.2, 2.1, 2.2, 2.1, 2.2, 1.9], 2, True)
    found = paired_verdict([*older, whole], "cand_a", "cand_b")
    assert found.runs == 11 and found.estimate[0] == pytest.approx(whole.b_over_a), found  # the newest's, once
