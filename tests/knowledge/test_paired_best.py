"""Where the kept paired rounds find a candidate better than the run's top by intervals, every
place that names the run's best says so, not run_report alone: get_run (Run.paired_best), the
roles' brief ("Best so far") and the hooks' run summary. A brief named the top by intervals as the
one to beat after a compare had found another kernel faster than it, significantly."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from mcp import Client

from evoteam.config import Settings
from evoteam.plugin.hooks import _summary
from evoteam.servers.knowledge.comparisons import keep_comparison, record_of
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.pairedbest import tie_clause, with_paired_best
from evoteam.servers.knowledge.server import build_server
from evoteam.servers.knowledge.store import Actor
from evoteam.servers.team.briefing import best_candidate
from evoteam.servers.team.materialise import score_line
from tests.report.test_own_style_gain import DPS_1, RETURNS_1, RETURNS_2, _few, _keep, _plan


async def _two(kb, tmp_path: Path, wide_code: str = RETURNS_2) -> tuple[str, dict[str, str]]:
    # "narrow" ranks first by its interval's pessimistic end; "wide" reads higher with a wider interval.
    return await _plan(kb, tmp_path, {1: [("narrow", RETURNS_1, 4.0, _few(4.0, 1, .02, 20), None),
                                          ("wide", wide_code, 4.3, _few(4.2, 2, 2.4, 8), None)]})


async def _get_run(kb, tmp_path: Path, run_id: str) -> dict:
    async with Client(build_server(Settings(db=tmp_path / "kb.db"), kb)) as client:
        result = await client.call_tool("get_run", {"run_id": run_id})
    assert not result.is_error, result.content[0].text
    return json.loads(result.content[0].text)


async def test_every_place_naming_the_best_names_the_one_found_better_side_by_side(tmp_path: Path):
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t")) as kb:
        run_id, ids = await _two(kb, tmp_path)
        shown = await _get_run(kb, tmp_path, run_id)
        assert shown["best_candidate_id"] == ids["narrow"] and "paired_best" not in shown, shown
        _, _, said = await _summary(kb, run_id, learnings_chars=0)
        assert "paired rounds" not in said, said
        await _keep(kb, run_id, ids["narrow"], ids["wide"], 1.08)

        shown = await _get_run(kb, tmp_path, run_id)
        # The ranking stays the intervals' (as best_candidates lists); the paired verdict is said beside it.
        assert shown["best_candidate_id"] == ids["narrow"] and shown["paired_best"] == ids["wide"], shown
        _, _, said = await _summary(kb, run_id, learnings_chars=0)
        assert f"(candidate {ids['narrow']}); the run's compares (bench.compare, bench.remeasure) find {ids['wide']} " \
               f"better than it: {ids['wide']} is the one to beat" in said, said
        run, best = await best_candidate(kb, await kb.get_run(run_id))
        assert best.id == ids["wide"] and best.code is None
        line = score_line(run, best)
        assert line.startswith(f"Best so far: {best.score:.3g} ("), line
        assert f"candidate `{ids['wide']}`" in line and f"find better than `{ids['narrow']}`, the first by " \
               "intervals (measured apart, their intervals rank this one lower)" in line, line


async def test_no_paired_best_where_the_rounds_do_not_decide_it(tmp_path: Path):
    """Not significant, the other way round, a destination-passing lead of that style's share alone,
    or pairs that leave the top out: the run's best is said alone."""
    cases = {"tie": (RETURNS_2, 1.0), "worse": (RETURNS_2, 0.9), "style share": (DPS_1, 1.08)}
    for name, (code, ratio) in cases.items():
        async with LocalKnowledgeStore.open(tmp_path / f"{name}.db", Actor(user="u", client="t")) as kb:
            run_id, ids = await _two(kb, tmp_path, code)
            await _keep(kb, run_id, ids["narrow"], ids["wide"], ratio)
            run = await with_paired_best(kb, await kb.get_run(run_id))
            assert run.best_candidate_id == ids["narrow"] and run.paired_best is None, name
            assert (await best_candidate(kb, run))[1].id == ids["narrow"], name
    async with LocalKnowledgeStore.open(tmp_path / "far.db", Actor(user="u", client="t")) as kb:
        run_id, ids = await _two(kb, tmp_path)
        # A pair with the baseline, and one of the top's rivals with the baseline: nothing beats the top.
        bench = kb.with_actor(Actor(user="u", client="t", verifier=True))
        for a, b in (("baseline", ids["narrow"]), ("baseline", ids["wide"])):
            await keep_comparison(bench, run_id, record_of(a, b, kit="k", split="dev", kind="kernel", ranges=None,
                                                           samples={"a": [4.0 + i / 1000 for i in range(30)]},
                                                           contended=False, measured_at=datetime.now(UTC)))
        run = await with_paired_best(kb, await kb.get_run(run_id))
        assert run.paired_best is None and run.best_candidate_id == ids["narrow"]


async def test_a_best_within_noise_of_the_last_new_best_is_said_one_result_with_it(tmp_path: Path):
    """A best ranked first by its interval's low end, not a new best, within noise of a last new best
    that reads higher: get_run named the lower 3.50 as the run's best beside a 3.62, and a team read
    the version's "best" as progress (mp82). get_run, the hooks' summary, the brief and team status
    say the two are one result; a best that is a new best says nothing of the kind."""
    from evoteam.servers.team.core import TeamService
    from evoteam.servers.team.store import TeamStore

    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t")) as kb:
        run_id, ids = await _two(kb, tmp_path)  # narrow, first, is the new best: no tie said
        assert "best_within_noise_of" not in await _get_run(kb, tmp_path, run_id)
    async with LocalKnowledgeStore.open(tmp_path / "tie.db", Actor(user="u", client="t")) as kb:
        # The wide one first: the narrow one leads by its low end, within noise of it.
        run_id, ids = await _plan(kb, tmp_path, {1: [("wide", RETURNS_2, 4.3, _few(4.2, 2, 2.4, 8), None),
                                                     ("narrow", RETURNS_1, 4.0, _few(4.0, 1, .02, 20), None)]})
        shown = await _get_run(kb, tmp_path, run_id)
        assert shown["best_candidate_id"] == ids["narrow"] and shown["best_within_noise_of"] == ids["wide"], shown
        _, _, said = await _summary(kb, run_id, learnings_chars=0)
        assert f"(candidate {ids['narrow']}); not told apart from {ids['wide']}, the last new best: the two are " \
               "one result" in said, said
        run, best = await best_candidate(kb, await kb.get_run(run_id))
        line = score_line(run, best)
        assert f"candidate `{ids['narrow']}`; not told apart from {ids['wide']}, the last new best: the two are one " \
               "result" in line, line
        status = await TeamService(TeamStore(kb), project_dir=tmp_path).team_status(run_id)
        assert status.best_within_noise_of == ids["wide"], status
        from evoteam.servers.knowledge.prior import gather_prior_work, render_prior  # the next engineer's start
        text = render_prior(await gather_prior_work(kb.with_actor(Actor(user="second", client="t")), "k"))
        assert f"({ids['narrow']}), one result with `{ids['wide']}`, the last new best" in text, text
        # A compare that finds no difference leaves them one result, with nothing more to compare.
        await _keep(kb, run_id, ids["narrow"], ids["wide"], 1.0)
        run, best = await best_candidate(kb, await kb.get_run(run_id))
        assert run.best_within_noise_of == ids["wide"] and "bench.compare" not in tie_clause(ids["wide"])
        # Found better side by side: the paired best is said, not the tie.
        for _ in range(3):  # pooled with the tie above
            await _keep(kb, run_id, ids["narrow"], ids["wide"], 1.08)
        run = await with_paired_best(kb, await kb.get_run(run_id))
        assert run.paired_best == ids["wide"] and run.best_within_noise_of is None, run
    async with LocalKnowledgeStore.open(tmp_path / "x0.db", Actor(user="u", client="t")) as kb:
        # Within noise of a leader never announced (no new best past x0): not "the last new best" (rev80).
        run_id, ids = await _plan(kb, tmp_path, {1: [("wide", RETURNS_2, 4.3, _few(4.2, 2, 2.4, 8), None),
                                                     ("narrow", RETURNS_1, 4.0, _few(4.0, 1, .02, 20), None)]},
                                  x0=4.1)
        shown = await _get_run(kb, tmp_path, run_id)
        assert shown["best_candidate_id"] == ids["narrow"] and "best_within_noise_of" not in shown, shown


async def test_a_second_engineer_starting_from_the_run_reads_the_one_found_better(tmp_path: Path):
    """Prior work (the session start's context, start_run's prior) names it beside the run's best."""
    from evoteam.servers.knowledge.prior import gather_prior_work, render_prior

    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t")) as kb:
        run_id, ids = await _two(kb, tmp_path)
        await _keep(kb, run_id, ids["narrow"], ids["wide"], 1.08)
        prior = await gather_prior_work(kb.with_actor(Actor(user="second", client="t")), "k")
        assert prior.runs[0].best_candidate_id == ids["narrow"] and prior.runs[0].paired_best == ids["wide"]
        text = render_prior(prior)
        said = f"({ids['narrow']}), but its compares find `{ids['wide']}` better than it"
        assert said in text, text


def test_the_same_kept_batches_are_bootstrapped_once(monkeypatch):
    """get_run reads the paired rounds each time: a pair's verdict is reused while its batches are
    the same (each bootstrap is seeded by its data), and read anew once another batch is kept."""
    import pytest

    from evoteam.servers.knowledge import comparisons

    def kept(ratio: float, at: datetime):
        return record_of("A", "B", kit="k", split="dev", kind="kernel", ranges=None, contended=False,
                         samples={"w": [ratio * (1 + (i % 5 - 2) / 200) for i in range(30)]}, measured_at=at)

    records = [kept(1.1, datetime(2026, 12, 6, 1, tzinfo=UTC))]
    first = comparisons.paired_verdict(records, "A", "B")
    turned = comparisons.paired_verdict(records, "B", "A")
    assert first.significant and first.estimate[0] > 1 > turned.estimate[0]

    def no_bootstrap(*args, **kwargs):
        raise AssertionError("bootstrapped again")

    monkeypatch.setattr(comparisons, "_estimate", no_bootstrap)
    again = comparisons.paired_verdict(records, "A", "B")
    assert again == first and again is not first
    again.estimate[0] = 0.0  # a caller's change stays its own
    assert comparisons.paired_verdict(records, "A", "B") == first
    with pytest.raises(AssertionError, match="bootstrapped again"):
        comparisons.paired_verdict(records + [kept(1.0, datetime(2026, 12, 6, 2, tzinfo=UTC))], "A", "B")


def _kept(a: str, b: str, ratio: float, at: datetime, spread: float = 200, **kw):
    return record_of(a, b, kit="k", split="dev", kind="kernel", ranges=None, contended=False, measured_at=at,
                     samples={"w": [ratio * (1 + (i % 5 - 2) / spread) for i in range(30)]}, **kw)


def test_a_cached_verdict_is_the_verdict_of_exactly_those_batches():
    """Review: the key named some fields of each batch; another busy flag, another spread, or the
    same batches listed in another order gave the first one's verdict."""
    from datetime import timedelta

    from evoteam.servers.knowledge.comparisons import paired_verdict

    at = datetime(2026, 12, 6, 3, tzinfo=UTC)
    quiet = _kept("A", "B", 1.1, at)
    assert not paired_verdict([quiet], "A", "B").contended
    assert paired_verdict([quiet.model_copy(update={"contended": True})], "A", "B").contended
    tight = paired_verdict([quiet], "A", "B")
    wide = paired_verdict([quiet.model_copy(update={"spread": 0.05, "spread_df": 2.0})], "A", "B")
    assert wide.estimate[1] < tight.estimate[1] and tight.significant and not wide.significant
    one, other = _kept("A", "B", 1.1, at, kit_hash="h1"), _kept("A", "B", 0.95, at, kit_hash="h2")
    assert paired_verdict([one, other], "A", "B") == paired_verdict([other, one], "A", "B")
    later = _kept("A", "B", 0.95, at + timedelta(seconds=1), kit_hash="h2")
    assert paired_verdict([one, later], "A", "B").estimate[0] < 1 < paired_verdict([later, one], "B", "A").estimate[0]


def test_verdicts_read_in_threads_beside_a_full_cache(monkeypatch):
    """The trajectory reads verdicts in a worker thread while get_run reads them on the loop."""
    import sys
    import threading
    from datetime import timedelta

    from evoteam.servers.knowledge import comparisons

    monkeypatch.setattr(comparisons, "_KEEP_VERDICTS", 2)
    base = datetime(2026, 12, 6, 4, tzinfo=UTC)
    batches = [[_kept(f"A{i}", f"B{i}", 1.05, base + timedelta(seconds=i))] for i in range(20)]
    errors: list[str] = []

    def read(k: int) -> None:
        try:
            for j in range(60):
                rs = batches[(j * 7 + k) % len(batches)]
                assert comparisons.paired_verdict(rs, rs[0].a_candidate_id, rs[0].b_candidate_id).significant
        except Exception as exc:  # noqa: BLE001 - collected, asserted below
            errors.append(repr(exc))

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=read, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert not errors, errors[:3]


async def test_get_run_and_run_report_name_the_same_of_two_equal_rivals(tmp_path: Path):
    """Two candidates that rank alike, both found better than the top: the earlier, as the store
    ranks ties (review: get_run took the larger id, run_report the earlier)."""
    from evoteam.report.data import gather

    same = _few(4.2, 2, 2.4, 8)
    for name in ("one", "two"):
        async with LocalKnowledgeStore.open(tmp_path / f"{name}.db", Actor(user="u", client="t")) as kb:
            run_id, ids = await _plan(kb, tmp_path, {1: [
                ("narrow", RETURNS_1, 4.0, _few(4.0, 1, .02, 20), None),
                ("b", "def run(x):\n    return x + x\n", 4.3, same, None),
                ("c", "def run(x):\n    return 2 * x\n", 4.3, same, None)]})
            for rival in ("b", "c"):
                await _keep(kb, run_id, ids["narrow"], ids[rival], 1.08)
            run = await with_paired_best(kb, await kb.get_run(run_id))
            assert run.paired_best == ids["b"] == (await gather(kb, run_id)).paired_best, (ids, run.paired_best)


async def test_a_paired_best_from_too_few_runs_is_no_lead_over_itself(tmp_path: Path):
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t")) as kb:
        run_id, ids = await _plan(kb, tmp_path, {1: [("narrow", RETURNS_1, 4.0, _few(4.0, 1, .02, 20), None),
                                                     ("few", RETURNS_2, 4.3, _few(4.3, 2, .02, 2), None)]})
        await _keep(kb, run_id, ids["narrow"], ids["few"], 1.08)
        run, best = await best_candidate(kb, await kb.get_run(run_id))
        assert [x.candidate_id for x in run.leads_from_too_few_runs] == [ids["few"]]
        line = score_line(run, best)
        assert best.id == ids["few"] and "(its runs are too few for a 95% interval)" in line, line
        assert "read better from too few runs" not in line, line


@pytest.mark.parametrize("style", ["returns", "destination passing"])
async def test_a_version_gain_at_the_level_of_its_picking_says_why_the_crown_differs(tmp_path: Path, style):
    """mp67: get_run and run_report said "crown B" (B better than v1's best side by side, at 95% as
    compare's verdict) while B's version gain, B picked from 4 candidates and so read at 98.75%,
    said "no significant difference" in the same reply, with nothing to reconcile the two. A lead of
    destination passing style's share alone, which no crown follows, says no such thing (review)."""
    import random

    from evoteam.report.data import gather
    from evoteam.report.summary import summarise

    codes = [f"def run(x):\n    return x * {k}\n" if style == "returns" else
             f"DESTINATION_PASSING_STYLE = True\n\ndef run(x, out):\n    out[:] = x * {k}\n" for k in range(2, 7)]
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t")) as kb:
        run_id, ids = await _plan(kb, tmp_path, {
            1: [("narrow", RETURNS_1, 4.0, _few(4.0, 1, .02, 20), None)],
            2: [(f"v2_{k}", code, 3.9, _few(3.9, 10 + k, 2.4, 8), None) for k, code in enumerate(codes)]})
        rng = random.Random(1)  # a marginal pair: significant at 95%, not at the 98.75% of a best of 4
        bench = kb.with_actor(Actor(user="u", client="t", verifier=True))
        v2_best = (await gather(kb, run_id)).versions[1].best_candidate_id
        await keep_comparison(bench, run_id, record_of(
            ids["narrow"], v2_best, kit="k", split="dev", kind="kernel", ranges=None, contended=False,
            samples={"w": [1.035 * (1 + rng.gauss(0, 0.03)) for _ in range(30)]}, measured_at=datetime.now(UTC)))
        run = await with_paired_best(kb, await kb.get_run(run_id))
        line = summarise(await gather(kb, run_id)).versions[1]
        assert line.significant_gain is False, line.gain
        if style != "returns":
            assert "picked from" in line.gain and run.paired_best is None, (run.paired_best, line.gain)
            assert "as one named pair" not in line.gain, line.gain
            return
        assert "picked from 4 candidates" in line.gain, line.gain
        assert run.best_candidate_id == ids["narrow"] and run.paired_best == v2_best, run
        assert "no significant difference as the best of 4; at 95%, as one named pair (compare's verdict, which " \
               "the run's crown follows), they find it better: not yet a significant gain" in line.gain, line.gain
