"""A candidate's parent is checked before anything is measured: any run of the same project,
never another project."""

from __future__ import annotations

import pytest

from evoteam.errors import DomainError
from evoteam.servers.bench.evaluation import core
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.models import CandidateCreate, RunCreate
from evoteam.servers.knowledge.store import Actor


async def test_a_parent_of_another_project_is_refused_before_measuring(bench_settings):
    async with LocalKnowledgeStore.open(bench_settings.db, Actor(user="tester")) as store:
        mine = await store.start_run(RunCreate(goal="mine", kit="rmsnorm_cpu", project="a"))
        theirs = await store.start_run(RunCreate(goal="theirs", kit="rmsnorm_cpu", project="b"))
        parent = await store.record_candidate(CandidateCreate(run_id=theirs.id, code="p"))
        # Broken code would come back as a COMPILE_ERROR evaluation if it were measured.
        with pytest.raises(DomainError, match="another project"):
            await core.evaluate_candidate(bench_settings, "rmsnorm_cpu", code="def broken(:\n", store=store,
                                          run_id=mine.id, parent_id=parent.id)
        assert (await store.list_candidates(mine.id)).total == 0


async def test_a_copy_of_a_parent_in_another_run_is_said_to_be_a_candidate_of_its_own(fast_kit, fast_settings):
    """Identical code pools within a run only: a second engineer's copy of a colleague's best, its
    parent, became a new candidate without a word (model-play mp34, 2026-12-05)."""
    from tests.bench.conftest import RMSNORM

    async with LocalKnowledgeStore.open(fast_settings.db, Actor(user="tester")) as store:
        theirs = await store.start_run(RunCreate(goal="theirs", kit=fast_kit.name))
        mine = await store.start_run(RunCreate(goal="mine", kit=fast_kit.name))
        first = await core.evaluate_candidate(fast_settings, str(fast_kit), code=RMSNORM, store=store, run_id=theirs.id)
        copy = await core.evaluate_candidate(fast_settings, str(fast_kit), code=RMSNORM + "\n# my copy\n", store=store,
                                             run_id=mine.id, parent_id=first.candidate_id)
        other = await core.evaluate_candidate(fast_settings, str(fast_kit), code=RMSNORM.replace("x * x", "x ** 2"),
                                              store=store, run_id=mine.id, parent_id=first.candidate_id)
    assert first.status == copy.status == other.status == "PASSED", (first.message, copy.message, other.message)
    assert copy.candidate_id != first.candidate_id and copy.n_measurements == 1
    said = f"the same code as its parent {first.candidate_id} (run {theirs.id}): measurements pool within a run only"
    assert said in copy.message, copy.message
    assert "the same code as its parent" not in other.message, other.message


def test_bench_run_records_a_parent_and_notes(tmp_path):
    """A colleague's run seeded from the command line had candidates without notes, so prior_work's
    best showed ids and scores only (mp36): `bench run --parent --notes` keeps both."""
    import json

    from click.testing import CliRunner

    from evoteam.cli import main
    from evoteam.config import SOURCE_ROOT

    env = {"HOME": str(tmp_path), "EVOTEAM_DB": str(tmp_path / "kb.db")}
    folder = SOURCE_ROOT / "task_kits" / "circle_packing_26"
    first = CliRunner().invoke(main, ["bench", "run", "circle_packing_26", str(folder / "initial_program.py"),
                                      "--json", "--notes", "the kit's starting point"], env=env)
    assert first.exit_code == 0, first.output
    parent = json.loads(first.output)["candidate_id"]
    second = CliRunner().invoke(main, ["bench", "run", "circle_packing_26", str(folder / "examples" / "better.py"),
                                       "--json", "--parent", parent, "--notes", "rows of circles"], env=env)
    assert second.exit_code == 0, second.output
    child = json.loads(second.output)["candidate_id"]

    async def read():
        async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="tester")) as store:
            return await store.get_candidate(parent), await store.get_candidate(child)

    import asyncio

    got_parent, got_child = asyncio.run(read())
    assert got_parent.notes == "the kit's starting point"
    assert got_child.parent_id == parent and got_child.notes == "rows of circles"
    refused = CliRunner().invoke(main, ["bench", "run", "circle_packing_26", str(folder / "initial_program.py"),
                                        "--no-record", "--notes", "x"], env=env)
    assert refused.exit_code == 2 and "drop --no-record" in refused.output


def test_notes_over_the_record_limit_are_refused_before_measuring(tmp_path):
    """`bench run --notes` longer than the record takes failed after the evaluation had run, so its
    measurement was lost: the limit is now checked first, in one line, and nothing is recorded."""
    from click.testing import CliRunner

    from evoteam.cli import main
    from evoteam.config import SOURCE_ROOT
    from evoteam.servers.knowledge.models import CandidateCreate

    limit = next(m.max_length for m in CandidateCreate.model_fields["notes"].metadata if hasattr(m, "max_length"))
    env = {"HOME": str(tmp_path), "EVOTEAM_DB": str(tmp_path / "kb.db")}
    # Broken code: were it measured, it would come back as a COMPILE_ERROR evaluation, not a refusal.
    broken = tmp_path / "broken.py"
    broken.write_text("def run(:\n")
    got = CliRunner().invoke(main, ["bench", "run", "circle_packing_26", str(broken), "--json",
                                    "--notes", "n" * (limit + 1)], env=env)
    assert got.exit_code != 0
    assert f"notes: String should have at most {limit} characters (given: {limit + 1:,}); nothing was measured" \
        in got.output, got.output
    assert "Traceback" not in got.output and "COMPILE_ERROR" not in got.output
    assert len(got.output.strip().splitlines()) == 1, got.output
    ok = CliRunner().invoke(main, ["bench", "run", "circle_packing_26",
                                   str(SOURCE_ROOT / "task_kits" / "circle_packing_26" / "initial_program.py"),
                                   "--json", "--notes", "n" * limit], env=env)
    assert ok.exit_code == 0, ok.output[-500:]


async def test_too_many_documents_used_are_refused_before_measuring(bench_settings):
    async with LocalKnowledgeStore.open(bench_settings.db, Actor(user="tester")) as store:
        run = await store.start_run(RunCreate(goal="g", kit="rmsnorm_cpu"))
        with pytest.raises(DomainError, match=r"documents_used: List should have at most 50 items .*given: 51"):
            await core.evaluate_candidate(bench_settings, "rmsnorm_cpu", code="def broken(:\n", store=store,
                                          run_id=run.id, documents_used=[f"doc_{i}" for i in range(51)])
        assert (await store.list_candidates(run.id)).total == 0
