"""A version's best, and the best before it, are the top by intervals unless kept paired rounds find
another of the same candidates better: v3's gain was read over a v1 kernel that a v2 kernel had
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
RETURNS_4 = "def run(x):\n    return x * 2.0\n"


async def test_paired_rounds_pick_the_best_before_a_version_and_its_own(tmp_path: Path):
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t")) as kb:
        run_id, ids = await _plan(kb, tmp_path, {
            1: [("narrow", RETURNS_1, 4.0, _few(4.0, 1, .02, 20), None),
                ("wide", RETURNS_2, 4.3, _few(4.2, 2, 2.4, 8), None)],
            2: [("v2narrow", RETURNS_3, 4.6, _few(4.6, 3, .02, 20), None),
                ("v2wide", RETURNS_4, 4.9, _few(4.9, 4, 2.4, 8), None)]})
        report = await gather(kb, run_id)
        v1, v2 = report.versions
        # By intervals alone: each version's narrow one ranks first.
        assert v1.best_candidate_id == ids["narrow"] and v2.best_candidate_id == ids["v2narrow"]
        assert v2.best_before_id == ids["narrow"]
        await _keep(kb, run_id, ids["narrow"], ids["wide"], 1.08)  # found better side by side
        await _keep(kb, run_id, ids["v2narrow"], ids["v2wide"], 1.07)
        report = await gather(kb, run_id)
        v1, v2 = report.versions
        assert v1.best_candidate_id == ids["wide"], v1
        assert v2.best_before_id == ids["wide"] and v2.best_candidate_id == ids["v2wide"], v2
        line = summarise(report).versions[1]
        assert f"over the best before it ({ids['wide']})" in line.gain, line.gain


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
