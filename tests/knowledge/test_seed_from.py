"""`start_run` with `seed_from`: the seed's goal and kit are the defaults, and its direction, x0
and best-known only where the new run's kit is the seed's (they say what that kit's numbers
mean: a minimise kit's direction given to a maximise kit's run would rank its worst candidate best)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.models import RunCreate
from evoteam.servers.knowledge.prior import NO_PRIOR, start_run_with_prior
from evoteam.servers.knowledge.store import Actor


def _facts(directions: dict[str, str]):
    from evoteam.servers.knowledge.prior import KitFacts

    return lambda name: KitFacts(name, directions[name]) if name in directions else None


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


async def test_a_second_active_run_of_ones_own_kit_is_pointed_out(tmp_path: Path):
    """A model told to continue its own active run may start another: prior_work's hint names the
    run to continue and how to end the new one; one ranking the other way is named as a mistake
    (which one, where the kit's direction is known here); a colleague's active run or a seed is not
    named."""
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t")) as kb:
        first = await _start(kb, goal="faster", kit="rmsnorm_cpu")
        # Nothing before it, said in words (an empty list alone left a model unsure the lookup ran).
        assert first.prior_work.runs == [] and first.prior_work.hint.endswith(NO_PRIOR)
        # A kit this server cannot read: the default direction and the missing x0 are said (a
        # minimising kit's run was started maximising, and only the first evaluate said so; mp47).
        assert first.prior_work.hint.startswith("Kit 'rmsnorm_cpu' is not found on this server, so this run ranks "
                                                "to be maximized by default and has no starting score x0"), \
            first.prior_work.hint
        known = await _start(kb, goal="faster", kit="fresh_kit", local_kit=_facts({"fresh_kit": "minimize"}))
        assert known.direction == "minimize" and known.prior_work.hint == NO_PRIOR
        given = await _start(kb, goal="faster", kit="fresh_kit_2", direction="minimize")
        assert given.prior_work.hint == NO_PRIOR  # a direction given: nothing was defaulted
        second = await _start(kb, goal="faster", kit="rmsnorm_cpu")
        assert second.prior_work.hint.startswith(f"You already have an active run of this kit: {first.id}. "), \
            second.prior_work.hint
        assert f"if {second.id} was started by mistake, knowledge.finish_run it with status failed" in second.prior_work.hint
        # The other way round, with nothing to say which is right: both are named as a possible mistake.
        wrong = await _start(kb, goal="faster", kit="rmsnorm_cpu", direction="minimize")
        assert "ranks scores the other way from this one (minimize): one of them is a mistake" in wrong.prior_work.hint
        assert "You already have" not in wrong.prior_work.hint
        # Where the kit's direction is known here, the wrong one is named as the one to end.
        right = await _start(kb, goal="faster", kit="rmsnorm_cpu", local_kit=_facts({"rmsnorm_cpu": "maximize"}))
        assert f"Your active run {wrong.id} of this kit ranks scores the other way, which the bench records nothing " \
            "in: knowledge.finish_run it" in right.prior_work.hint, right.prior_work.hint
        other = kb.with_actor(Actor(user="colleague", client="t"))
        theirs = await _start(other, goal="faster", kit="rmsnorm_cpu")
        assert any(r.id == first.id for r in theirs.prior_work.runs)  # seen, but not theirs to continue
        assert not (theirs.prior_work.hint or "").startswith(("You already have", "Your active run")), \
            theirs.prior_work.hint
        continued = await _start(kb, seed_from=second.id)  # continuing a run on purpose: not pointed at it
        named = continued.prior_work.hint.split(". Continue it")[0]
        assert first.id in named and second.id not in named, continued.prior_work.hint


async def test_a_kits_own_direction_wins_over_a_seeds_and_refuses_the_other(tmp_path: Path):
    """Where the kits are at hand (local_kit), a run of a kit has the kit's direction: a seed
    started the wrong way lends its goal, not that; an explicit wrong direction is refused."""
    from evoteam.servers.knowledge.errors import Invalid

    directions = _facts({"rmsnorm_cpu": "maximize"})
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t")) as kb:
        wrong = await kb.start_run(RunCreate(goal="faster", kit="rmsnorm_cpu", direction="minimize"))
        fixed = await _start(kb, seed_from=wrong.id, local_kit=directions)
        assert (fixed.goal, fixed.kit, fixed.direction) == ("faster", "rmsnorm_cpu", "maximize")
        with pytest.raises(Invalid, match="scores to be maximized"):
            await _start(kb, goal="g", kit="rmsnorm_cpu", direction="minimize", local_kit=directions)
        told = await _start(kb, goal="g", kit="other_kit", direction="minimize", local_kit=directions)
        assert told.direction == "minimize"


def test_a_broken_kit_folder_does_not_stop_the_direction_lookup(tmp_path: Path):
    """The lookup start_run asks over stdio reads kit folders: one whose kit.json is not an object
    is skipped as a bad manifest (also by bench list), and every other kit still answers."""
    from evoteam.config import load_settings
    from evoteam.errors import DomainError
    from evoteam.servers.bench.formats.kit import Kit
    from evoteam.servers.stdio import local_kit

    broken = tmp_path / "kits" / "broken"
    broken.mkdir(parents=True)
    (broken / "kit.json").write_text("[]")
    with pytest.raises(DomainError, match="bad manifest"):
        Kit.load(broken)
    settings = load_settings()
    settings.kits_dirs = [*settings.kits_dirs, tmp_path / "kits"]
    facts = local_kit(settings)
    assert (facts("rmsnorm_cpu").direction, facts("erdos_min_overlap").direction) == ("maximize", "minimize")
    assert facts("broken") is None and facts("no_such_kit") is None
    # A folder names the kit it holds: a run of it takes the kit's name, as the bench finds runs by it.
    assert facts(str(Path("task_kits") / "rmsnorm_cpu")).name == "rmsnorm_cpu"


async def test_earlier_runs_that_rank_nothing_do_not_point_to_a_best(tmp_path: Path):
    """The hint sent a model to "the best candidate" of earlier runs that held none (mp47)."""
    from evoteam.servers.knowledge.prior import HINT, NO_BEST

    directions = _facts({"rmsnorm_cpu": "maximize"})
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t")) as kb:
        empty = await _start(kb, goal="faster", kit="rmsnorm_cpu", local_kit=directions)
        await kb.update_run(empty.id, status="failed", reason="started the wrong way")
        after = await _start(kb, goal="faster", kit="rmsnorm_cpu", local_kit=directions)
        assert [r.id for r in after.prior_work.runs] == [empty.id] and after.prior_work.best == []
        assert after.prior_work.hint == NO_BEST and HINT not in after.prior_work.hint


async def test_a_seed_of_another_kit_leaves_the_direction_defaulted_and_says_so(tmp_path: Path):
    """The unknown-kit line asked whether a seed was given, not whether the direction was defaulted:
    a seed of another kit lends no direction, and the run was defaulted silently (review 2026-12-06)."""
    from evoteam.servers.knowledge.prior import beyond_generic

    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t")) as kb:
        seed = await kb.start_run(RunCreate(goal="smaller overlap", kit="erdos_min_overlap", direction="minimize"))
        other = await _start(kb, seed_from=seed.id, kit="some_other_kit")
        assert other.direction == "maximize" and other.prior_work.hint.startswith(
            "Kit 'some_other_kit' is not found on this server, so this run ranks to be maximized by default"), \
            other.prior_work.hint
        same = await _start(kb, seed_from=seed.id)  # the seed's own kit lends its direction: nothing defaulted
        assert "not found on this server" not in (same.prior_work.hint or "")
        # What the CLI prints on stderr: what is said of this start alone, without the generic advice.
        assert beyond_generic(other.prior_work.hint).startswith("Kit 'some_other_kit' is not found")
        assert beyond_generic(same.prior_work.hint) == beyond_generic(same.prior_work.hint).strip()


async def test_no_best_among_the_listed_runs_counts_the_older_ones(tmp_path: Path):
    from evoteam.servers.knowledge.prior import MAX_RUNS, beyond_generic

    directions = _facts({"rmsnorm_cpu": "maximize"})
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t")) as kb:
        for _ in range(MAX_RUNS + 1):
            run = await _start(kb, goal="faster", kit="rmsnorm_cpu", local_kit=directions)
            await kb.update_run(run.id, status="failed", reason="nothing ranked")
        after = await _start(kb, goal="faster", kit="rmsnorm_cpu", local_kit=directions)
        assert after.prior_work.more_runs == 1
        assert after.prior_work.hint.startswith("The earlier runs listed hold no ranked candidate (1 older run is "
                                                "not listed: knowledge.list_runs):"), after.prior_work.hint
        assert beyond_generic(after.prior_work.hint) == ""
