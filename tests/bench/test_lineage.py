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
