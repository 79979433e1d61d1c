"""`start_run` with `seed_from`: the seed's goal and kit are the defaults, and its direction, x0
and best-known only where the new run's kit is the seed's (they say what that kit's numbers
mean: a minimise kit's direction given to a maximise kit's run would rank its worst candidate best)."""

from __future__ import annotations

from pathlib import Path

from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.models import RunCreate
from evoteam.servers.knowledge.prior import start_run_with_prior
from evoteam.servers.knowledge.store import Actor


async def _start(store, **kw):
    args = dict(goal=None, kit=None, direction=None, x0=None, best_known=None, budget_usd=None, project=None,
                seed_from=None)
    return await start_run_with_prior(store, **{**args, **kw})


async def test_a_seed_of_the_same_kit_lends_its_direction_and_numbers(tmp_path: Path):
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t")) as kb:
        seed = await kb.start_run(RunCreate(goal="smaller overlap", kit="erdos_min_overlap", direction="minimize",
                                            x0=0.5, best_known=0.38))
        same = await _start(kb, seed_from=seed.id)
        assert (same.kit, same.direction, same.x0, same.best_known) == ("erdos_min_overlap", "minimize", 0.5, 0.38)
        named = await _start(kb, seed_from=seed.id, kit="erdos_min_overlap")
        assert named.direction == "minimize"


async def test_a_seed_of_another_kit_lends_its_goal_but_not_what_its_numbers_mean(tmp_path: Path):
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t")) as kb:
        seed = await kb.start_run(RunCreate(goal="smaller overlap", kit="erdos_min_overlap", direction="minimize",
                                            x0=0.5, best_known=0.38))
        other = await _start(kb, seed_from=seed.id, kit="circle_packing_26")
        assert other.goal == "smaller overlap" and other.kit == "circle_packing_26"
        assert (other.direction, other.x0, other.best_known) == ("maximize", None, None)
        told = await _start(kb, seed_from=seed.id, kit="circle_packing_26", direction="maximize", x0=2.0)
        assert (told.direction, told.x0) == ("maximize", 2.0)
