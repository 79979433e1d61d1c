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

# The same kernel under another name: a second candidate (identical code would pool into one).
RENAMED = RMSNORM.replace("x = hidden_states", "h = hidden_states").replace("x / np.sqrt(np.mean(x * x",
                                                                             "h / np.sqrt(np.mean(h * h")


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
        for run, code, note in ((first, RMSNORM, "the plain one"), (second, RENAMED, "renamed " + "word " * 30)):
            e = await evaluate_candidate(fast_settings, str(fast_kit), code=code, store=kb, run_id=run.id, notes=note)
            assert e.status == "PASSED", e.message
            ids.append(e.candidate_id)
        cmp = await compare_candidates(fast_settings, str(fast_kit), {"candidate_id": ids[0]},
                                       {"candidate_id": ids[1]}, store=kb, repeats=1)
    assert cmp.contended and "measured on a busy machine (contended: made busy by the test)" in cmp.verdict
    assert ids[0] != ids[1]
    # Each recorded side says what it is, not only its id (a model swapped two learnings; mp34).
    assert cmp.a.note == "the plain one"
    assert cmp.b.note.startswith("renamed word word") and cmp.b.note.endswith(" …") and len(cmp.b.note) <= 82
    # The hint belongs to "no significant difference" (an A/A pair: nearly always), and to one run.
    assert ("pool into a narrower one" in cmp.verdict) is (same_run and not cmp.significant), cmp.verdict
    assert (f"kept in run {first.id}" in cmp.verdict) is same_run, cmp.verdict
