"""Every ranking agrees with the store's: the report's best, each version's best and remeasure's
finalists rank by the candidate's rank_score (the pessimistic end of its rounds' own interval),
not by the wider interval shown where rounds were unresolved; and best_candidates ranks the dev
split unless asked otherwise. (Found by review, 2026-12-03: the report and remeasure named another
best than get_run when one candidate's rounds were unresolved.)"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from evoteam import stats
from evoteam.codehash import code_hash
from evoteam.report.data import gather
from evoteam.report.finalists import finalists
from evoteam.report.remeasure import MeasurementSet, Remeasured, judge
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.models import CandidateCreate, RunCreate, WorkloadResult
from evoteam.servers.knowledge.store import Actor


def _rounds(center: float, spread: float, seed: int, n: int = 10) -> list[float]:
    rng = random.Random(seed)
    return [center + rng.uniform(-spread, spread) for _ in range(n)]


def _measured(run_id: str, code: str, samples: dict, split: str = "dev", **extra) -> CandidateCreate:
    workloads = [WorkloadResult(workload=w, status="PASSED", speedup=sorted(v)[len(v) // 2]) for w, v in samples.items()]
    return CandidateCreate(run_id=run_id, code=code, status="PASSED", score=stats.score_estimate(samples).value,
                           samples=samples, verified=True, code_hash=code_hash(code), workloads=workloads,
                           split=split, **extra)


async def test_the_report_and_remeasure_rank_as_the_store_does(tmp_path: Path):
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t", verifier=True)) as kb:
        run = await kb.start_run(RunCreate(goal="g", kit="k", direction="maximize", x0=1.0))
        # A fast kernel whose rounds were mostly below the resolution: its shown interval reaches far
        # down (what those rounds allow), its own rounds' interval does not.
        fast = {"w1": _rounds(15.0, 2.0, 1), "w2": _rounds(3.0, 0.3, 2)}
        unresolved = {0, 2, 3, 5, 6, 7, 8, 9}
        ranges = {"w1": ([v / 3 if i in unresolved else v for i, v in enumerate(fast["w1"])],
                         [v * 3 if i in unresolved else v for i, v in enumerate(fast["w1"])])}
        shown, own = stats.censored_score_estimate(fast, ranges), stats.score_estimate(fast)
        assert shown.lo < own.lo
        censored = await kb.record_candidate(_measured(run.id, "def run(x):\n    return x * 2\n", fast,
                                                       sample_ranges=ranges))
        # A steady one whose lower bound lies between the two.
        mid = (shown.lo + own.lo) / 2
        steady = await kb.record_candidate(_measured(run.id, "a = 1\n", {"w1": _rounds(mid, mid / 1000, 5),
                                                                           "w2": _rounds(mid, mid / 1000, 6)}))
        assert censored.score_interval[0] < steady.score_interval[0]  # shown: the steady one looks safer
        store_best = (await kb.get_run(run.id)).best_candidate_id
        assert store_best == censored.id
        assert [c.id for c in await kb.best_candidates(run.id, k=2)] == [censored.id, steady.id]
        assert (await gather(kb, run.id)).best_candidate_id == store_best
        assert [c.id for c in await finalists(kb, run.id)][0] == store_best


async def test_best_candidates_ranks_the_dev_split_unless_asked(tmp_path: Path):
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t", verifier=True)) as kb:
        run = await kb.start_run(RunCreate(goal="g", kit="k", direction="maximize", x0=1.0))
        code = "def run(x):\n    return x * 3\n"
        dev = await kb.record_candidate(_measured(run.id, code, {"w": _rounds(3.5, 0.1, 1)}))
        # The same code on the held-out workloads scores higher: other workloads, not a better kernel.
        held = await kb.record_candidate(_measured(run.id, code, {"h": _rounds(4.1, 0.1, 2)}, split="heldout"))
        assert [c.id for c in await kb.best_candidates(run.id)] == [dev.id]
        assert [c.id for c in await kb.best_candidates(run.id, split="heldout")] == [held.id]
        assert {c.id for c in await kb.best_candidates(run.id, split="all")} == {dev.id, held.id}


async def test_a_score_on_dev_and_held_out_workloads_together_ranks_nowhere_among_dev(tmp_path: Path):
    """A kernel evaluated on split 'all' is scored over other workloads than the dev ones: every
    reader of a run's best (get_run, the trajectory, the report and its chart, remeasure's
    finalists, the retrieval gate's run info) leaves it out, as best_candidates always did.
    (Found by review, 2026-12-04: all but best_candidates read "not held-out" as "dev".)"""
    from evoteam.report.charts import progress
    from evoteam.servers.retrieval.store import RetrievalStore
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t", verifier=True)) as kb:
        run = await kb.start_run(RunCreate(goal="g", kit="k", direction="maximize", x0=1.0))
        dev = await kb.record_candidate(_measured(run.id, "def run(x):\n    return x * 3\n", {"w": _rounds(3.5, 0.1, 1)}))
        both = await kb.record_candidate(_measured(run.id, "def run(x):\n    return x + x + x\n",
                                                   {"w": _rounds(3.6, 0.1, 3), "h": _rounds(9.0, 0.1, 4)}, split="all"))
        assert both.split == "all" and both.score_interval[0] > dev.score_interval[1]
        assert (await kb.get_run(run.id)).best_candidate_id == dev.id
        trajectory = await kb.trajectory(run.id)
        assert [p.candidate_id for p in trajectory.points] == [dev.id]
        assert trajectory.best_score == dev.score
        report = await gather(kb, run.id)
        assert report.best_candidate_id == dev.id
        assert [p.best_so_far for p in report.candidates] == [dev.score, dev.score]
        assert [row["id"] for row in progress(report)["datasets"]["points"]] == [dev.id]
        assert [c.id for c in await finalists(kb, run.id)] == [dev.id]
        assert (await RetrievalStore(kb).run_info(run.id)).best_score == dev.score


def test_remeasure_orders_by_the_rank_it_was_given():
    """judge orders by rank_score where one is known: the same rule as the store."""
    entries = [Remeasured(candidate_id="cand_a", recorded_score=6.8, recorded_interval=[3.6, 12.5],
                          rank_score_before=6.2, score=6.7, score_interval=[3.5, 12.0], rank_score_after=6.1),
               Remeasured(candidate_id="cand_b", recorded_score=4.9, recorded_interval=[4.75, 5.04],
                          rank_score_before=4.75, score=4.9, score_interval=[4.7, 5.1], rank_score_after=4.7)]
    mset = MeasurementSet(run_id="run_x", kit="k", measured_at="2026-12-03T00:00:00Z", rounds=10, splits=["dev"],
                          entries=entries)
    judge(mset)
    assert mset.order_before == mset.order_after == ["cand_a", "cand_b"]
    assert mset.changed == []


def test_finalists_that_trade_places_within_noise_have_not_changed():
    """Three equally fast finalists overlapping before and after: their order moves on noise,
    which `changed` listed in more than half of re-measurements (review, 2026-12-03). A swap counts
    only where the two were apart before or are apart after."""
    def entry(cid, before, after):
        return Remeasured(candidate_id=cid, recorded_score=sum(before) / 2, recorded_interval=before,
                          score=sum(after) / 2, score_interval=after)

    noisy = MeasurementSet(run_id="run_x", kit="k", measured_at="2026-12-03T00:00:00Z", rounds=10, splits=["dev"],
                           entries=[entry("a", [4.0, 4.6], [3.9, 4.4]), entry("b", [3.95, 4.5], [4.0, 4.5]),
                                    entry("c", [3.9, 4.4], [4.05, 4.7])])
    judge(noisy)
    assert noisy.order_before == ["a", "b", "c"] and noisy.order_after == ["c", "b", "a"]
    assert noisy.changed == []
    assert noisy.within_noise_of_top == ["b", "a"]
    # Apart after: c now clearly beats a (and only that pair is apart), so those two changed.
    clear = MeasurementSet(run_id="run_x", kit="k", measured_at="2026-12-03T00:00:00Z", rounds=10, splits=["dev"],
                           entries=[entry("a", [4.0, 4.6], [3.5, 3.9]), entry("b", [3.95, 4.5], [3.8, 4.3]),
                                    entry("c", [3.9, 4.4], [4.0, 4.7])])
    judge(clear)
    assert clear.order_after == ["c", "b", "a"] and clear.changed == ["a", "c"]


async def test_a_version_gain_over_unresolved_rounds_is_not_significant(tmp_path: Path):
    """The gain between two bests used their point rounds only: against a best whose rounds were
    unresolved (its true ratios up to three times higher) a resolved 3.0 read as a significant
    1.23x gain over 2.4, though the intervals the store shows overlap (review, 2026-12-03)."""
    from datetime import UTC, datetime

    from evoteam.report.data import VersionPoint, _version_gain

    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t", verifier=True)) as kb:
        run = await kb.start_run(RunCreate(goal="g", kit="k", direction="maximize", x0=1.0))
        before = {"w1": _rounds(2.4, 0.1, 1), "w2": _rounds(2.4, 0.1, 2)}
        ranges = {w: (before[w], [v * 3 for v in before[w]]) for w in before}
        a = await kb.record_candidate(_measured(run.id, "a = 1\n", before, sample_ranges=ranges))
        b = await kb.record_candidate(_measured(run.id, "a = 2\n", {"w1": _rounds(3.0, 0.1, 3),
                                                                       "w2": _rounds(3.0, 0.1, 4)}))
        vp = VersionPoint(version=2, at=datetime.now(UTC), roles=[], diagnosis="", spent_usd=0,
                          best_before=a.score, best_of_version=b.score)
        await _version_gain(kb, vp, a.id, b.id, "maximize")
        assert vp.gain == pytest.approx(b.score / a.score)
        assert vp.gain_interval[0] < 1 < vp.gain_interval[1] and vp.significant is False


async def test_prior_work_ranks_earlier_runs_bests_as_the_store_does(tmp_path: Path):
    from evoteam.servers.knowledge.prior import gather_prior_work

    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t", verifier=True)) as kb:
        fast = {"w1": _rounds(15.0, 2.0, 1), "w2": _rounds(3.0, 0.3, 2)}
        unresolved = {0, 2, 3, 5, 6, 7, 8, 9}
        ranges = {"w1": ([v / 3 if i in unresolved else v for i, v in enumerate(fast["w1"])],
                         [v * 3 if i in unresolved else v for i, v in enumerate(fast["w1"])])}
        shown, own = stats.censored_score_estimate(fast, ranges), stats.score_estimate(fast)
        first = await kb.start_run(RunCreate(goal="g", kit="k", direction="maximize", x0=1.0))
        censored = await kb.record_candidate(_measured(first.id, "def run(x):\n    return x * 2\n", fast,
                                                       sample_ranges=ranges))
        second = await kb.start_run(RunCreate(goal="g", kit="k", direction="maximize", x0=1.0))
        mid = (shown.lo + own.lo) / 2
        steady = await kb.record_candidate(_measured(second.id, "a = 1\n", {"w1": _rounds(mid, mid / 1000, 5),
                                                                            "w2": _rounds(mid, mid / 1000, 6)}))
        prior = await gather_prior_work(kb, "k")
        assert [c.id for c in prior.best][:2] == [censored.id, steady.id]


async def test_the_versions_chart_follows_the_ranked_best(tmp_path: Path):
    """The versions chart's running best is the one every ranking names (rank_score), not the raw
    score: a noisier 6.1 of v2 drew as the running best beside a header naming v1's steady 6.0
    (review 2026-12-04)."""
    from evoteam.report.charts import versions
    from tests.report.conftest import one_best_per_version

    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t", verifier=True)) as kb:
        run = await one_best_per_version(kb, tmp_path, {1: (6.0, {"w": _rounds(6.0, 0.01, 1)}),
                                                        2: (6.1, {"w": _rounds(6.1, 3.0, 2)})})
        report = await gather(kb, run.id)
    steady = next(v.best_candidate_id for v in report.versions if v.version == 1)
    assert report.best_candidate_id == steady
    assert report.versions[1].best_of_version > report.versions[0].best_of_version  # raw: v2 reads higher
    rows = versions(report)["datasets"]["version_points"]
    assert [r["running_best"] for r in rows] == [report.versions[0].best_of_version] * 2, rows
