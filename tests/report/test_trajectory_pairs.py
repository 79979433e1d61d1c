"""The trajectory reads a lead as the version gain does: where the paired rounds of the lead and
the best before it decide, they say new_best or within_noise_of (two model-plays read "the best
never moved" while run_report called the same gain significant from those rounds)."""

from __future__ import annotations

from pathlib import Path

from mcp import Client

from evoteam.config import load_settings
from evoteam.report.data import gather
from evoteam.report.summary import summarise
from evoteam.servers.knowledge.comparisons import keep_comparison
from evoteam.codehash import code_hash
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.models import CandidateCreate, RunCreate
from evoteam.servers.knowledge.server import build_server
from evoteam.servers.knowledge.store import Actor
from tests.knowledge.conftest import held
from tests.report.conftest import one_best_per_version
from tests.report.test_compare_decides import _record
from tests.report.test_significance import BUSY, rounds


def _points(trajectory) -> dict:
    return {p.candidate_id: p for p in trajectory.points}


async def test_paired_rounds_announce_a_lead_the_intervals_leave_open_and_run_report_agrees(tmp_path: Path):
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t")) as kb:
        run = await one_best_per_version(kb, tmp_path, {v: (c, rounds(c, v)) for v, c in {1: 4.0, 2: 4.35}.items()})
        first, second = (await kb.trajectory(run.id)).points
        assert second.best_so_far_id == second.candidate_id  # it leads, by its pessimistic end
        # The two intervals overlap, and no paired rounds are kept yet: within noise.
        assert not second.new_best and second.within_noise_of == first.candidate_id

        # Two compares that time both side by side find it better: announced, as run_report says.
        for minutes in (1, 2):
            await keep_comparison(kb, run.id, _record(first.candidate_id, second.candidate_id, 1.09, seed=minutes,
                                                      minutes=minutes))
        lead = _points(await kb.trajectory(run.id))[second.candidate_id]
        assert lead.new_best and lead.within_noise_of is None and lead.too_few_runs is None
        assert summarise(await gather(kb, run.id)).versions[1].significant_gain is True


async def test_paired_rounds_that_find_no_difference_take_back_an_interval_clearing(tmp_path: Path):
    """Two intervals that clear each other keep a difference between processes; the pair's
    rounds, side by side, decide over them (one verdict everywhere)."""
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t")) as kb:
        run = await one_best_per_version(kb, tmp_path, {v: (c, rounds(c, v, spread=0.04)) for v, c in
                                                         {1: 4.0, 2: 4.6}.items()})
        first, second = (await kb.trajectory(run.id)).points
        assert second.new_best  # cleared, interval against interval
        await keep_comparison(kb, run.id, _record(second.candidate_id, first.candidate_id, 1.0, minutes=1))
        lead = _points(await kb.trajectory(run.id))[second.candidate_id]
        assert not lead.new_best and lead.within_noise_of == first.candidate_id
        assert summarise(await gather(kb, run.id)).versions[1].significant_gain is False

        # Found worse side by side (another run of the same two): neither progress nor "within noise".
        run = await one_best_per_version(kb, tmp_path, {v: (c, rounds(c, v, spread=0.04)) for v, c in
                                                         {1: 4.0, 2: 4.6}.items()})
        first, second = (await kb.trajectory(run.id)).points
        await keep_comparison(kb, run.id, _record(second.candidate_id, first.candidate_id, 1.3, minutes=2, seed=5))
        lead = _points(await kb.trajectory(run.id))[second.candidate_id]
        assert not lead.new_best and lead.within_noise_of is None


async def test_a_busy_lead_is_announced_by_its_paired_rounds_through_the_tool(tmp_path: Path):
    """A lead measured on a busy machine is never announced by intervals; paired rounds decide
    busy or not (load widens them, it does not make a difference appear), so the model's
    trajectory call shows the best moving once compares find it."""
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t")) as kb:
        run = await kb.start_run(RunCreate(goal="g", kit="k", direction="maximize", x0=1.0))
        bench = kb.with_actor(Actor(user="u", client="t", verifier=True))
        ids = []
        for v, center in ((1, 4.0), (2, 4.6)):
            code = f"def run(x):\n    return x * {v}\n"
            ids.append((await bench.record_candidate(CandidateCreate(
                run_id=run.id, code=code, code_hash=code_hash(code), status="PASSED", score=center,
                samples=rounds(center, v, spread=0.04), verified=True, metrics=BUSY))).id)
        async with held(Client(build_server(load_settings(), kb))) as client:
            async def lead() -> dict:
                points = (await client.call_tool("trajectory", {"run_id": run.id})).structured_content["points"]
                assert [p["candidate_id"] for p in points] == ids and points[1]["best_so_far_id"] == ids[1]
                return points[1]

            busy = await lead()
            assert busy["contended"] and not busy["new_best"] and busy["within_noise_of"] == ids[0]
            # A pair's batch that decides nothing yet (two rounds), then two busy ones, pooled.
            await keep_comparison(kb, run.id, _record(ids[0], ids[1], 1.15, n=2, contended=True))
            assert not (await lead())["new_best"]
            for minutes, center in ((1, 1.0), (2, 1.14)):
                await keep_comparison(kb, run.id, _record(ids[0], ids[1], center, spread=0.05, seed=minutes,
                                                          minutes=minutes, contended=True))
            moved = await lead()
            assert moved["new_best"] and moved["within_noise_of"] is None


async def test_paired_rounds_decide_for_a_candidate_that_does_not_lead(tmp_path: Path):
    """A candidate behind the best stayed "within noise" of it after its paired rounds found it
    significantly worse, while run_report said "worse, significant" (model-play 2026-12-04); and
    one whose interval sits apart but whose paired rounds find no difference is within noise."""
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t")) as kb:
        run = await one_best_per_version(kb, tmp_path, {v: (c, rounds(c, v)) for v, c in {1: 4.0, 2: 3.8}.items()})
        first, behind = (await kb.trajectory(run.id)).points
        assert behind.best_so_far_id == first.candidate_id and behind.within_noise_of == first.candidate_id
        await keep_comparison(kb, run.id, _record(first.candidate_id, behind.candidate_id, 0.9, minutes=1))
        point = _points(await kb.trajectory(run.id))[behind.candidate_id]
        assert point.within_noise_of is None and not point.new_best
        assert summarise(await gather(kb, run.id)).versions[1].significant_gain is False

        run = await one_best_per_version(kb, tmp_path, {v: (c, rounds(c, v, spread=0.04)) for v, c in
                                                         {1: 4.6, 2: 4.0}.items()})
        first, behind = (await kb.trajectory(run.id)).points
        assert behind.within_noise_of is None  # the intervals sit apart
        await keep_comparison(kb, run.id, _record(first.candidate_id, behind.candidate_id, 1.0, minutes=2))
        point = _points(await kb.trajectory(run.id))[behind.candidate_id]
        assert point.within_noise_of == first.candidate_id and not point.new_best


async def test_a_significant_win_over_the_best_before_announces_though_that_one_was_not(tmp_path: Path):
    """A new best clears the last announced best; where only the best just before it (itself
    within noise of that one) was compared with it, a significant win in their paired rounds
    announces it, as run_report's version gain reads the same rounds."""
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t")) as kb:
        run = await one_best_per_version(kb, tmp_path, {v: (c, rounds(c, v)) for v, c in
                                                         {1: 4.0, 2: 4.1, 3: 4.2}.items()})
        v1, v2, v3 = (await kb.trajectory(run.id)).points
        assert v1.new_best and [v2.best_so_far_id, v3.best_so_far_id] == [v2.candidate_id, v3.candidate_id]
        # By intervals, each is within noise of v1, the last announced.
        assert (v2.within_noise_of, v3.within_noise_of) == (v1.candidate_id, v1.candidate_id)
        assert not v2.new_best and not v3.new_best
        await keep_comparison(kb, run.id, _record(v2.candidate_id, v3.candidate_id, 1.05, minutes=1))
        points = _points(await kb.trajectory(run.id))
        assert points[v3.candidate_id].new_best and points[v3.candidate_id].within_noise_of is None
        assert not points[v2.candidate_id].new_best
        assert summarise(await gather(kb, run.id)).versions[2].significant_gain is True
        # The same rounds finding no difference leave v3 within noise of the one it was compared with.
        run = await one_best_per_version(kb, tmp_path, {v: (c, rounds(c, v)) for v, c in
                                                         {1: 4.0, 2: 4.1, 3: 4.2}.items()})
        v1, v2, v3 = (await kb.trajectory(run.id)).points
        await keep_comparison(kb, run.id, _record(v2.candidate_id, v3.candidate_id, 1.0, minutes=2))
        point = _points(await kb.trajectory(run.id))[v3.candidate_id]
        assert not point.new_best and point.within_noise_of == v2.candidate_id
