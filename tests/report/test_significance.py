"""Team decisions carry significance: each version's gain over the best before it has an interval,
and the count of versions in a row without a significant gain (the stop rule's input) can fire."""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime
from pathlib import Path

from evoteam.codehash import code_hash
from evoteam.report.data import gather
from evoteam.report.summary import summarise
from evoteam.servers.knowledge.connect import component_store
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.models import CandidateCreate, RunCreate
from evoteam.servers.knowledge.store import Actor
from evoteam.servers.team.core import TeamService
from tests.report.conftest import _design


def rounds(center: float, seed: int, spread: float = 0.3, n: int = 10) -> dict[str, list[float]]:
    rng = random.Random(seed)
    return {w: [center * (1 + rng.uniform(-spread, spread) / 4) for _ in range(n)] for w in ("a", "b", "c")}


async def test_version_gains_have_intervals_and_the_stop_rule_counts(tmp_path: Path):
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t")) as kb:
        run = await kb.start_run(RunCreate(goal="g", kit="k", direction="maximize", x0=1.0))
        team = TeamService(component_store("team", kb), kb=kb, write_agent_files=False, project_dir=tmp_path)
        plan = {1: [4.0], 2: [4.05], 3: [6.0], 4: [6.02]}  # v2: noise; v3: real progress; v4: noise
        for v, centers in plan.items():
            await team.design_team(_design(run.id, f"diagnosis {v}", f"Role{v}"))
            bench = kb.with_actor(Actor(user="u", client="t", role=f"Role{v}", team_version=v, verifier=True))
            for i, c in enumerate(centers):
                code = f"def run(x):\n    return x * {v}{i}\n"
                await bench.record_candidate(CandidateCreate(run_id=run.id, code=code, code_hash=code_hash(code),
                                                             status="PASSED", score=c, samples=rounds(c, v),
                                                             verified=True))
        summary = summarise(await gather(kb, run.id))
        lines = {v.version: v for v in summary.versions}
        assert lines[1].gain == "first ranked result" and lines[1].significant_gain is None
        assert lines[2].significant_gain is False and "within noise" in lines[2].gain
        assert lines[3].significant_gain is True and "significant" in lines[3].gain and "×" in lines[3].gain
        assert lines[4].significant_gain is False
        assert all(v.best_interval and v.best_interval[0] <= v.best_dev_score <= v.best_interval[1]
                   for v in summary.versions)
        assert summary.versions_without_significant_gain == 1
        # One more version that finds nothing: the count grows, so "k in a row" can fire.
        await team.design_team(_design(run.id, "diagnosis 5", "Role5"))
        assert summarise(await gather(kb, run.id)).versions_without_significant_gain == 2


BUSY = {"contention": {"load_average": 5.0, "contended": True, "reasons": ["load average 5.0 on 2 cores"]}}


async def test_a_gain_measured_only_on_a_busy_machine_is_settled_side_by_side(tmp_path: Path):
    """A version's best that clears the best before it, where either was measured only on a
    contended machine, is not a significant gain (separate evaluations there move by more than
    their intervals): the stop rule counts it, and the text says why and what to do. A
    re-measurement that timed both in one batch decides it: significant where the version's best
    cleared the other there, not where they overlapped."""
    from evoteam.report.remeasure import KIND, MeasurementSet, Remeasured
    from evoteam.servers.knowledge.models import ArtifactCreate

    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t")) as kb:
        run = await kb.start_run(RunCreate(goal="g", kit="k", direction="maximize", x0=1.0))
        team = TeamService(component_store("team", kb), kb=kb, write_agent_files=False, project_dir=tmp_path)
        ids = {}
        for v, center in ((1, 4.0), (2, 6.0)):  # far apart: on a quiet machine v2 would be significant
            await team.design_team(_design(run.id, f"diagnosis {v}", f"Role{v}"))
            bench = kb.with_actor(Actor(user="u", client="t", role=f"Role{v}", team_version=v, verifier=True))
            code = f"def run(x):\n    return x * {v}\n"
            ids[v] = (await bench.record_candidate(CandidateCreate(
                run_id=run.id, code=code, code_hash=code_hash(code), status="PASSED", score=center,
                samples=rounds(center, v), verified=True, metrics=BUSY if v == 2 else {}))).id
        line = summarise(await gather(kb, run.id)).versions[1]
        assert line.significant_gain is False and "not established" in line.gain and "contended" in line.gain
        assert summarise(await gather(kb, run.id)).versions_without_significant_gain == 1

        async def remeasured(scores: dict[int, tuple[float, list[float]]]) -> None:
            entries = [Remeasured(candidate_id=ids[v], score=s, score_interval=iv) for v, (s, iv) in scores.items()]
            mset = MeasurementSet(run_id=run.id, kit="k", measured_at=datetime.now(UTC), rounds=10,
                                  splits=["dev"], entries=entries)
            await kb.put_artifact(ArtifactCreate(run_id=run.id, kind=KIND, name=f"set-{scores[2][0]}.json",
                                                 text=mset.model_dump_json()))

        await remeasured({1: (4.0, [3.8, 4.2]), 2: (4.1, [3.9, 4.4])})  # side by side: the same speed
        line = summarise(await gather(kb, run.id)).versions[1]
        assert line.significant_gain is False and "not established" in line.gain
        await asyncio.sleep(0.01)  # the newest set decides
        await remeasured({1: (4.0, [3.8, 4.2]), 2: (5.9, [5.6, 6.2])})  # side by side: clearly faster
        summary = summarise(await gather(kb, run.id))
        assert summary.versions[1].significant_gain is True and "side by side" in summary.versions[1].gain
        assert summary.versions_without_significant_gain == 0
