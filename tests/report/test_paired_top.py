"""The best before a version is the top by intervals unless kept paired rounds find another of the
same candidates better: v3's gain was read over a v1 kernel that a v2 kernel had
beaten side by side, significantly, because the v2 kernel's wider interval (two quiet measurements
apart, the others busy) ranked it below (mp64)."""

from __future__ import annotations

from pathlib import Path

from evoteam.report.data import gather
from evoteam.report.summary import summarise
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.store import Actor
from tests.report.test_own_style_gain import RETURNS_1, RETURNS_2, DPS_1, _few, _keep, _plan

RETURNS_3 = "def run(x):\n    return 2 * x\n"


async def test_paired_rounds_pick_the_best_before_a_version(tmp_path: Path):
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t")) as kb:
        run_id, ids = await _plan(kb, tmp_path, {
            1: [("narrow", RETURNS_1, 4.0, _few(4.0, 1, .02, 20), None),
                ("wide", RETURNS_2, 4.3, _few(4.2, 2, 2.4, 8), None)],
            2: [("v2", RETURNS_3, 4.6, _few(4.6, 3, .02, 20), None)]})
        summary = summarise(report := await gather(kb, run_id))
        v1, v2 = report.versions
        # By intervals alone: the narrow one is v1's best and the best before v2, which clears it.
        assert v1.best_candidate_id == ids["narrow"] and v2.best_before_id == ids["narrow"] and v2.significant
        assert summary.best_dev_note is None
        await _keep(kb, run_id, ids["narrow"], ids["wide"], 1.08)  # found better side by side
        summary = summarise(report := await gather(kb, run_id))
        v1, v2 = report.versions
        # v1's best stays the top by intervals; the best before v2 is the one that beats it side by side.
        assert v1.best_candidate_id == ids["narrow"] and v2.best_before_id == ids["wide"], v2
        # Its wide interval cannot tell v2 from it: open, not a stall (a compare that found a better kernel
        # turned a significant gain into a counted stall; review), and the compare that decides it named.
        line = summary.versions[1]
        assert line.significant_gain is None and summary.versions_without_significant_gain == 0, line.gain
        assert f"over the best before it ({ids['wide']}): not established: that best beats {ids['narrow']}" \
            in line.gain and f"b_candidate_id={ids['v2']}" in line.gain, line.gain
        await _keep(kb, run_id, ids["wide"], ids["v2"], 1.10)
        line = summarise(await gather(kb, run_id)).versions[1]
        assert line.significant_gain is True and "timed side by side" in line.gain, line.gain


async def test_the_runs_best_names_a_candidate_found_better_side_by_side(tmp_path: Path):
    """get_run's best is the top by intervals; run_report says which candidate the paired rounds find
    better, after a compare alone too (review: only a re-measurement's better_than_top was said)."""
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t")) as kb:
        run_id, ids = await _plan(kb, tmp_path, {
            1: [("narrow", RETURNS_1, 4.0, _few(4.0, 1, .02, 20), None),
                ("wide", RETURNS_2, 4.3, _few(4.2, 2, 2.4, 8), None)]})
        await _keep(kb, run_id, ids["narrow"], ids["wide"], 1.08)
        summary = summarise(await gather(kb, run_id))
        assert summary.best_candidate_id == ids["narrow"], summary
        assert summary.best_dev_note.startswith(f"ranks first by intervals, but the paired rounds find {ids['wide']} "
                                                f"better than it"), summary.best_dev_note


async def test_verdicts_in_a_circle_name_no_best():
    from datetime import UTC, datetime

    from evoteam.servers.knowledge.pairedbest import paired_top
    from evoteam.servers.knowledge.comparisons import record_of

    def kept(a: str, b: str, ratio: float):
        return record_of(a, b, kit="k", split="dev", kind="kernel", ranges=None, contended=False,
                         samples={"w": [ratio * (1 + (i % 5 - 2) / 200) for i in range(30)]},
                         measured_at=datetime.now(UTC))

    line = [kept("A", "B", 1.5), kept("B", "C", 1.5)]
    assert await paired_top(None, ["A", "B", "C"], line, "maximize") == "C"
    circle = line + [kept("C", "A", 1.5)]
    for ranked in (["A", "B", "C"], ["B", "C", "A"], ["C", "A", "B"]):
        assert await paired_top(None, ranked, circle, "maximize") == ranked[0], ranked


async def test_a_lead_of_destination_passing_styles_share_picks_no_best(tmp_path: Path):
    """A destination-passing rewrite found faster side by side by no more than that style's share is
    no better kernel: the returning one stays the best before the next version; beyond it, it is one."""
    for ratio, picked in ((1.08, "narrow"), (1.6, "dps")):
        async with LocalKnowledgeStore.open(tmp_path / f"kb{ratio}.db", Actor(user="u", client="t")) as kb:
            run_id, ids = await _plan(kb, tmp_path, {
                1: [("narrow", RETURNS_1, 4.0, _few(4.0, 1, .02, 20), None),
                    ("dps", DPS_1, 4.3, _few(4.2, 2, 2.4, 8), None)],
                2: [("v2", RETURNS_2, 4.6, _few(4.6, 3, .02, 20), None)]})
            assert (await gather(kb, run_id)).versions[1].best_before_id == ids["narrow"]
            await _keep(kb, run_id, ids["narrow"], ids["dps"], ratio)
            v2 = (await gather(kb, run_id)).versions[1]
            assert v2.best_before_id == ids[picked], (ratio, v2)
