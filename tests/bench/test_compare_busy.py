"""What a compare measured on a busy machine says about repeating it: repeats of the same two
candidates pool only where the compare is kept (both of one run)."""

from __future__ import annotations

import pytest

from evoteam.servers.bench.evaluation.compare import compare_candidates
from evoteam.servers.bench.evaluation.core import evaluate_candidate
from evoteam.servers.bench.measurement import machine
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.models import RunCreate
from evoteam.servers.knowledge.store import Actor
from tests.bench.conftest import RMSNORM

# The same work written another way: a second candidate (identical code would pool into one, and so
# would a copy whose locals alone are renamed: codehash.py).
RENAMED = RMSNORM.replace("np.mean(x * x", "np.mean(np.square(x)")


@pytest.fixture
def busy(monkeypatch):
    real = machine.Contention.finish

    def finish(self, *args, **kwargs):
        found = real(self, *args, **kwargs)
        return dict(found, contended=True, reasons=["made busy by the test"])

    monkeypatch.setattr(machine.Contention, "finish", finish)


@pytest.mark.parametrize("same_run", [True, False], ids=["one run", "two runs"])
async def test_a_busy_compare_suggests_pooling_only_where_it_is_kept(same_run, busy, fast_kit, fast_settings):
    """Beside "not kept: the two are of different runs" the busy clause told a model to repeat
    the compare so that it pools (model-play mp34, 2026-12-05)."""
    async with LocalKnowledgeStore.open(fast_settings.db, Actor(user="u", client="t")) as kb:
        first = await kb.start_run(RunCreate(goal="a", kit=fast_kit.name, direction="maximize"))
        second = first if same_run else await kb.start_run(RunCreate(goal="b", kit=fast_kit.name,
                                                                     direction="maximize"))
        ids = []
        for run, code, note in ((first, RMSNORM, "the plain one"), (second, RENAMED, "renamed " + "word " * 40)):
            e = await evaluate_candidate(fast_settings, str(fast_kit), code=code, store=kb, run_id=run.id, notes=note)
            assert e.status == "PASSED", e.message
            ids.append(e.candidate_id)
        cmp = await compare_candidates(fast_settings, str(fast_kit), {"candidate_id": ids[0]},
                                       {"candidate_id": ids[1]}, store=kb, repeats=1)
    assert cmp.contended and "measured on a busy machine (contended: made busy by the test)" in cmp.verdict
    assert ids[0] != ids[1]
    # Each recorded side says what it is, not only its id (a model swapped two learnings; mp34).
    assert cmp.a.note == "the plain one"
    assert cmp.b.note.startswith("renamed word word") and cmp.b.note.endswith(" …") and len(cmp.b.note) <= 122
    # The hint belongs to "no significant difference" (an A/A pair: nearly always), and to one run.
    assert ("pool into a narrower one" in cmp.verdict) is (same_run and not cmp.significant), cmp.verdict
    assert (f"kept in run {first.id}" in cmp.verdict) is same_run, cmp.verdict


async def test_a_compare_of_a_returning_and_a_destination_passing_side_says_so(fast_kit, fast_settings):
    """"B is faster, 1.15x" of the same arithmetic, one side writing into the harness's output slots,
    read as a faster kernel (mp37, 2026-12-05): the verdict says which side's outputs are allocated
    outside the clock. The baseline side says what it is."""
    from tests.bench.test_call_path import DPS

    in_place = "SKIP = False\n" + DPS
    cmp = await compare_candidates(fast_settings, str(fast_kit), {"candidate_id": "baseline"}, {"code": in_place},
                                   repeats=1)
    assert cmp.b.status == "PASSED", cmp.b.message
    assert "; B writes its outputs into slots allocated outside the clock (destination passing), A allocates" \
        in cmp.verdict, cmp.verdict
    # Its score is over the baseline's own rounds: an A/A check, said so (1.08x read as a gain; mp76).
    assert cmp.a.note == ("the kit's baseline, timed beside its own rounds: an A/A check, whose interval holds 1 "
                          "in a fair batch") and cmp.b.note is None
    # Said once, in the verdict: B's own message against the baseline leaves its clause out.
    assert "destination passing" not in (cmp.b.message or "") and "destination passing" not in (cmp.a.message or "")
    # Each side's speedup is this batch's, not the candidate's own score, which pools its evaluations:
    # a model read a compare's side interval beside its remeasure interval as a contradiction (mp63).
    assert cmp.a.message.startswith("in this batch, ") and cmp.b.message.startswith("in this batch, "), cmp.b.message
    same = await compare_candidates(fast_settings, str(fast_kit), {"code": RMSNORM}, {"code": RENAMED}, repeats=1)
    assert "destination passing" not in same.verdict, same.verdict
    # Both in destination passing style: alike, so the verdict has no such clause.
    both = await compare_candidates(fast_settings, str(fast_kit), {"code": in_place},
                                    {"code": in_place + "\n# renamed\n"}, repeats=1)
    assert both.b.status == "PASSED", both.b.message
    assert "destination passing" not in both.verdict, both.verdict


def test_a_sides_own_style_clause_is_left_to_the_verdict_and_the_advice_kept():
    """Unit: a short message, not cut at the limit (the end-to-end case above is cut anyway). The
    candidate's "writes into slots" clause goes where the verdict says it; what a returning side
    is told against a baseline that writes into given outputs stays (it says what to do)."""
    from evoteam.servers.bench.evaluation.compare import _brief
    from evoteam.servers.bench.measurement.batch import _styles_apart
    from evoteam.servers.bench.models import Evaluation

    def side(label_dps: bool, base_dps: bool):
        clause = _styles_apart({"baseline": base_dps, "c": label_dps}, "c")
        return Evaluation(kit="k", kind="kernel", split="dev", status="PASSED", score=1.2, direction="maximize",
                          passed=1, total=1, workloads=[],
                          message=f"all 1 workloads correct; 1.2×; {clause}")

    in_place = side(True, False)
    assert "the candidate writes its outputs" in _brief(in_place).message
    kept = _brief(in_place, styles_in_verdict=True).message
    assert kept == "all 1 workloads correct; 1.2×" and not kept.endswith("…")
    returning = _brief(side(False, True), styles_in_verdict=True).message
    assert returning.endswith("gives that back") and "the baseline writes its outputs" in returning



def test_a_compare_reply_opens_with_its_verdict_and_the_pooled_one():
    """mp67 read this batch's `significant: false`, near the top of the reply, as the answer where
    the pooled rounds (what the run reads, in `pooled` and the verdict) were significant."""
    from evoteam.servers.bench.models import Comparison

    assert list(Comparison.model_fields)[:4] == ["kit", "split", "verdict", "pooled"]
