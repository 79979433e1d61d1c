"""`bench.evaluate` says where the recorded candidate stands in its run: a new best beyond noise,
within noise of the run's best, or below it, by the trajectory's own rule (a model compared bare
scores with the last best it remembered; model-play mp45)."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest
from mcp import Client

from evoteam.config import SOURCE_ROOT, Settings
from evoteam.servers.bench.evaluation.standing import standing_line
from evoteam.servers.bench.server import build_server
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.models import Trajectory, TrajectoryPoint
from evoteam.servers.knowledge.store import Actor

KITS = SOURCE_ROOT / "task_kits"
AT = datetime(2026, 12, 6, tzinfo=timezone.utc)


def point(cid: str, score: float, lo: float, hi: float, best: str, **standing) -> TrajectoryPoint:
    return TrajectoryPoint(candidate_id=cid, at=AT, score=score, score_interval=[lo, hi], best_so_far=None,
                           best_so_far_id=best, status="PASSED", verified=True, n_measurements=1, role=None,
                           team_version=None, **standing)


def trajectory(*points: TrajectoryPoint) -> Trajectory:
    return Trajectory(run_id="run_1", direction="maximize", points=list(points), best_score=None, ndg=None)


def test_each_standing_of_the_trajectory_is_said_in_one_line():
    a = point("cand_a", 3.2, 3.0, 3.4, "cand_a", new_best=True, decided_by="intervals")
    b = point("cand_b", 3.3, 3.1, 3.5, "cand_b", within_noise_of="cand_a", decided_by="paired rounds")
    c = point("cand_c", 1.0, 0.95, 1.05, "cand_b", worse_than="cand_b", decided_by="intervals")
    d = point("cand_d", 3.25, 3.0, 3.5, "cand_b", within_noise_of="cand_b", decided_by="intervals")
    run = trajectory(a, b, c, d)
    assert standing_line(trajectory(a), "cand_a", "×") == \
        "new best of the run: beyond noise of x0, the run's starting score (by their intervals)"
    lead = standing_line(run, "cand_b", "×")
    assert lead.startswith("leads the run's ranking but is not a new best: within noise of cand_a (by their paired "
                           "rounds)") and "bench.compare the two by id" in lead, lead
    assert standing_line(run, "cand_c", "×") == \
        "not a new best: below the run's best cand_b at 3.30× (3.10–3.50) (by their intervals)"
    assert standing_line(run, "cand_d", "×") == \
        "not a new best: within noise of the run's best cand_b at 3.30× (3.10–3.50) (by their intervals)"
    # A later new best clears the run's earlier best, not x0; measured again, its lead is no news.
    e = point("cand_e", 4.4, 4.2, 4.6, "cand_e", new_best=True, decided_by="intervals")
    later = trajectory(a, b, c, d, e)
    assert standing_line(later, "cand_e", "×").startswith("new best of the run: beyond noise of the run's earlier best")
    assert standing_line(later, "cand_e", "×", again=True).startswith("still the run's best: beyond noise")
    # Judged against a best that has since been overtaken: the verdict of then is not said as now's.
    stale = standing_line(later, "cand_c", "×")
    assert stale.startswith("not the run's best: that is cand_e at 4.40× (4.20–4.60); bench.compare the two by id"), stale
    better = point("cand_f", 3.6, 2.0, 5.0, "cand_e", better_than="cand_e", decided_by="paired rounds")
    assert "though their paired rounds find it better: bench.remeasure the two" in \
        standing_line(trajectory(a, e, better), "cand_f", "×")
    # Within noise of x0 (no best beyond it yet): compared with the kit's baseline by name.
    start = point("cand_g", 1.02, 0.95, 1.1, "cand_g", within_noise_of="x0", decided_by="intervals")
    said = standing_line(trajectory(start), "cand_g", "×")
    assert said.startswith("leads the run's ranking but is not a new best: within noise of x0, the run's starting "
                           "score") and 'a_candidate_id "baseline"' in said, said
    assert standing_line(trajectory(a), "cand_unknown") is None


@pytest.fixture
async def store(tmp_path: Path):
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="tester", client="pytest")) as kb:
        yield kb


async def test_evaluate_says_a_new_best_and_a_copy_of_the_baseline_below_it(tmp_path, store):
    """Over a real MCP client on rmsnorm_cpu: the faster example is the run's new best beyond noise
    of x0; the baseline's code, evaluated next, is below it; a held-out check is not ranked here."""
    settings = Settings(db=tmp_path / "kb.db", kits_dirs=[KITS])
    async with Client(build_server(settings, store)) as client:
        run = (await client.call_tool("evaluate", {"kit": "rmsnorm_cpu", "candidate_path": str(
            KITS / "rmsnorm_cpu" / "examples" / "better.py")})).structured_content
        assert run["status"] == "PASSED", run["message"]
        if run["contended"]:  # a busy machine widens it against x0 (3x each way): a lead, maybe not yet a new best
            assert run["standing"].startswith(("new best of the run: beyond noise of x0", "leads the run's ranking"))
        else:
            assert run["standing"] == "new best of the run: beyond noise of x0, the run's starting score (by their " \
                                      "intervals)", run["standing"]
        copy = (await client.call_tool("evaluate", {"kit": "rmsnorm_cpu", "run_id": run["run_id"], "candidate_path":
                                                    str(KITS / "rmsnorm_cpu" / "baseline.py")})).structured_content
        assert copy["status"] == "PASSED" and copy["candidate_id"] != run["candidate_id"]
        if not (run["contended"] or copy["contended"]):
            assert copy["standing"].startswith(f"not a new best: below the run's best {run['candidate_id']} at "), copy
        else:  # widened for the load: below the best, or not told apart from x0, never a lead
            assert copy["standing"].startswith("not a new best: "), copy
        held = (await client.call_tool("evaluate", {"kit": "rmsnorm_cpu", "run_id": run["run_id"], "split": "heldout",
                                                    "candidate_id": run["candidate_id"]})).structured_content
        assert held["recorded"] and held.get("standing") is None, held
