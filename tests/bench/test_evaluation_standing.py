"""`bench.evaluate` says where the recorded candidate stands in its run: a new best beyond noise,
within noise of the run's best, or worse than it, by the trajectory's own rule (a model compared bare
scores with the last best it remembered; model-play mp45)."""

from __future__ import annotations

import json

from datetime import datetime, timezone
from pathlib import Path

import pytest
from mcp import Client

from evoteam import stats
from evoteam.config import SOURCE_ROOT, Settings
from evoteam.codehash import code_hash
from evoteam.servers.bench.evaluation.standing import run_standing, standing_line
from evoteam.servers.bench.server import build_server
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.models import CandidateCreate, RunCreate
from evoteam.servers.knowledge.trajectory import Trajectory, TrajectoryPoint
from evoteam.servers.knowledge.store import Actor
from tests.bench.test_bench_server import BETTER as EINSUM  # a kernel about 2x the baseline

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
    assert lead.startswith("leads the run's ranking (by the pessimistic end of its interval over all its runs) but "
                           "is not a new best: "
                           "within noise of cand_a, the last new best (by their paired rounds)") and \
        "bench.compare cand_b and cand_a by id" not in lead, lead  # they were compared: not advice to do it again (mp53)
    assert lead.endswith("; report the two as one result (each further bench.compare of the two by id pools with "
                         "these rounds and resolves a smaller difference)"), lead
    tied = point("cand_t", 3.0, 2.8, 3.3, "cand_b", within_noise_of="cand_b", decided_by="paired rounds")
    assert standing_line(trajectory(a, b, tied), "cand_t", "×") == \
        "not a new best: within noise of the run's best cand_b at 3.30× (3.10–3.50); their paired rounds find no " \
        "difference: report the two as one result (each further bench.compare of the two by id pools with these " \
        "rounds and resolves a smaller difference)"
    assert standing_line(run, "cand_c", "×") == \
        "not a new best: worse than the run's best cand_b at 3.30× (3.10–3.50) (by their intervals)"
    assert standing_line(run, "cand_d", "×") == \
        "not a new best: within noise of the run's best cand_b at 3.30× (3.10–3.50) (by their intervals); " \
        "bench.compare cand_d and cand_b by id to tell them apart"
    # A later new best clears the run's earlier best, not x0; measured again, its lead is no news.
    e = point("cand_e", 4.4, 4.2, 4.6, "cand_e", new_best=True, decided_by="intervals")
    later = trajectory(a, b, c, d, e)
    # ...named: the last new best and the leader just before it, both cleared (mp49; "or" read as either, mp73).
    assert standing_line(later, "cand_e", "×") == \
        "new best of the run: beyond noise of the run's earlier best (cand_a, the last new best, and cand_b, the " \
        "leader before it) (by their intervals)"
    # Busy: within noise because a busy interval counts widened, which is said (a 2.3x gain read so; mp49).
    busy = point("cand_h", 3.25, 3.0, 3.5, "cand_b", within_noise_of="cand_b", decided_by="intervals",
                  contended=True)
    said = standing_line(trajectory(a, b, busy), "cand_h", "×")
    # With the interval as it counts: "widened 3x each way" alone could not be checked (mp73).
    assert "(this one measured on a busy machine: its interval counts as its low end ÷3 to its high end ×3, 1.00–10.5); bench.compare " \
        "cand_h and cand_b by id" in said, said
    assert "busy machine" not in standing_line(run, "cand_d", "×")
    # A score from too few runs is never widened (measurements.widened_for_load): no numbers said for it.
    few = point("cand_h", 3.25, 3.0, 3.5, "cand_b", within_noise_of="cand_b", decided_by="intervals",
                contended=True, runs=2)
    said = standing_line(trajectory(a, b, few), "cand_h", "×")
    assert "(this one measured on a busy machine: its interval counts as its low end ÷3 to its high end ×3);" in said, said
    # A quiet evaluation within noise of a busy best: the busy interval named, not "its" (mp64).
    busy_b = point("cand_b", 3.3, 3.1, 3.5, "cand_b", within_noise_of="cand_a", decided_by="paired rounds",
                   contended=True)
    quiet = point("cand_q", 3.25, 3.0, 3.5, "cand_b", within_noise_of="cand_b", decided_by="intervals")
    said = standing_line(trajectory(a, busy_b, quiet), "cand_q", "×")
    assert "(cand_b measured on a busy machine: its interval counts as its low end ÷3 to its high end ×3, 1.03–10.5)" in said, said
    # Apart only by load's widening: not "within noise", which read as a tie of 2.75x with 4.12x (mp66).
    far = point("cand_f", 2.75, 2.43, 3.03, "cand_b", within_noise_of="cand_b", contended=True)
    said = standing_line(trajectory(a, b, far), "cand_f", "×")
    # Below the best by its own interval, kept from "worse" by the widening alone: set aside with no compare
    # asked for (a 1.5x under a 14.9x best was sent to one the model saw no need for; mp70).
    # And no compare named in it either: "no compare needed (... bench.compare measures that)" read as a
    # contradiction (mp73).
    assert said == ("not a new best: it reads below the run's best cand_b at 3.30× (3.10–3.50); set it aside, no "
                    "compare needed (a separate score's interval on a busy machine counts as its low end ÷3 to its high "
                    "end ×3, so it is not called worse)"), said
    # Reading above the best, apart only by that widening: a compare tells them apart.
    above = point("cand_g", 4.0, 3.8, 4.2, "cand_b", within_noise_of="cand_b", contended=True)
    said = standing_line(trajectory(a, b, above), "cand_g", "×")
    assert said.startswith("not a new best: not told apart from the run's best cand_b at 3.30× (3.10–3.50) (this one "
                           "measured on a busy machine: its interval counts as its low end ÷3 to its high end ×3, 1.27–12.6); "
                           "bench.compare cand_g and cand_b by id to tell them apart") and "within noise" not in said, said
    # Leading so, apart as measured: "not told apart" too, not "within noise" beside two intervals apart (mp79);
    # overlapping as measured, it is within noise.
    lead = point("cand_l", 4.0, 3.8, 4.2, "cand_l", within_noise_of="cand_b", contended=True)
    said = standing_line(trajectory(a, b, lead), "cand_l", "×")
    assert said.startswith("leads the run's ranking (by the pessimistic end of its interval over all its runs) but is "
                           "not a new best: not told apart from cand_b, ") and "within noise" not in said, said
    near = point("cand_l", 3.6, 3.4, 3.8, "cand_l", within_noise_of="cand_b", decided_by="intervals", contended=True)
    assert "not a new best: within noise of cand_b, " in standing_line(trajectory(a, b, near), "cand_l", "×")
    # By the intervals as measured, not by a missing decided_by: a busy run with no x0 has none either way (rev79).
    meets = point("cand_l", 3.6, 3.4, 3.8, "cand_l", within_noise_of="cand_b", contended=True)
    assert "not a new best: within noise of cand_b, " in standing_line(trajectory(a, b, meets), "cand_l", "×")
    # A former best measured again on a busy machine, now below the leader as measured: set aside as any other
    # (it read "within noise ... to tell them apart" where the ordinary path said "reads below"; rev79).
    was = point("cand_w", 2.4, 2.3, 2.5, "cand_b", within_noise_of="cand_b", contended=True)
    said = standing_line(trajectory(a, b, was), "cand_w", "×", again=True, prior_best="cand_w")
    assert said.startswith("no longer the run's best: cand_b at 3.30× (3.10–3.50) now leads; it reads below the run's "
                           "best cand_b at 3.30× (3.10–3.50); set it aside, no compare needed"), said
    assert standing_line(later, "cand_e", "×", again=True).startswith("the run's best, beyond noise")
    # Judged against a best that has since been overtaken: the verdict of then is not said as now's.
    stale = standing_line(later, "cand_c", "×")
    # Both named: after a compare of A and B, "the two" in B's line read as A and B (mp55).
    assert stale.startswith("not the run's best: that is cand_e at 4.40× (4.20–4.60); bench.compare cand_c and cand_e "
                            "by id"), stale
    better = point("cand_f", 3.6, 2.0, 5.0, "cand_e", better_than="cand_e", decided_by="paired rounds")
    assert "though their paired rounds find it better: it is the better of the two; bench.remeasure with " \
        "candidate_ids [cand_e, cand_f] on a quiet machine lets the ranking follow" in \
        standing_line(trajectory(a, e, better), "cand_f", "×")
    # Within noise of x0 (no best beyond it yet): compared with the kit's baseline by name.
    start = point("cand_g", 1.02, 0.95, 1.1, "cand_g", within_noise_of="x0", decided_by="intervals")
    said = standing_line(trajectory(start), "cand_g", "×")
    assert said.startswith("leads the run's ranking but is not a new best: within noise of x0, the run's starting "
                           "score") and 'a_candidate_id "baseline"' in said, said
    assert standing_line(trajectory(a), "cand_unknown") is None
    # Before anything is announced past x0, the one a lead is within noise of is the leader it passed,
    # not "the last new best" (mp54: named one whose own standing said "not a new best").
    x = point("cand_x", 1.2, 0.9, 1.5, "cand_x", within_noise_of="x0", decided_by="intervals")
    y = point("cand_y", 1.3, 1.0, 1.6, "cand_y", within_noise_of="cand_x", decided_by="paired rounds")
    said = standing_line(trajectory(x, y), "cand_y", "×")
    assert "within noise of cand_x, the leader before it (none is announced past x0 yet)" in said, said
    # Placed against x0 by compares with the baseline: said so, and no busy clause (paired rounds are not widened).
    past = point("cand_p", 2.07, 1.98, 2.17, "cand_p", new_best=True, decided_by="paired rounds with the baseline",
                 contended=True)
    assert standing_line(trajectory(past), "cand_p", "×") == \
        "new best of the run: beyond noise of x0, the run's starting score (by its paired rounds with the baseline)"
    level = point("cand_l", 1.02, 0.9, 1.2, "cand_l", within_noise_of="x0",
                  decided_by="paired rounds with the baseline", contended=True)
    assert standing_line(trajectory(level), "cand_l", "×") == \
        "leads the run's ranking but is not a new best: its paired rounds with the baseline find no difference from " \
        "x0, the run's starting score (bench.compare with repeats above its default, 3, resolves a smaller one)"


@pytest.fixture
async def store(tmp_path: Path):
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="tester", client="pytest")) as kb:
        yield kb


async def test_evaluate_says_a_new_best_and_a_copy_of_the_baseline_below_it(tmp_path, store):
    """Over a real MCP client on rmsnorm_cpu: the faster example is the run's new best beyond noise
    of x0; the baseline's code, evaluated next, is worse than it; a held-out check is not ranked here."""
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
            assert copy["standing"].startswith(f"not a new best: worse than the run's best {run['candidate_id']} at "), \
                copy
        else:  # widened for the load: worse than the best, or not told apart from x0, never a lead
            assert copy["standing"].startswith("not a new best: "), copy
        held = (await client.call_tool("evaluate", {"kit": "rmsnorm_cpu", "run_id": run["run_id"], "split": "heldout",
                                                    "candidate_id": run["candidate_id"]})).structured_content
        assert held["recorded"] and held.get("standing") is None, held


# The store's own rule, read back (review 2026-12-06): the cases hand-made points above cannot show.

def measured(run_id: str, code: str, speed: float, spread: float = 0.03, rounds: int = 10) -> CandidateCreate:
    step = 2 * spread / (rounds - 1)
    samples = {"w": [speed * (1 - spread + i * step) for i in range(rounds)]}
    return CandidateCreate(run_id=run_id, code=code, code_hash=code_hash(code), status="PASSED", score=speed,
                           samples=samples, verified=True)


@pytest.fixture
async def verifier(tmp_path: Path):
    async with LocalKnowledgeStore.open(tmp_path / "v.db", Actor(user="tester", verifier=True)) as kb:
        yield kb


async def test_a_pooled_candidate_that_takes_the_lead_names_the_best_it_passed(verifier):
    run = await verifier.start_run(RunCreate(goal="g", kit="k", direction="maximize", x0=1.0))
    a = await verifier.record_candidate(measured(run.id, "a = 1\n", 1.5))
    assert (await run_standing(verifier, a, "kernel")).startswith("new best of the run: beyond noise of x0")
    b = await verifier.record_candidate(measured(run.id, "b = 1\n", 2.0))
    assert (await run_standing(verifier, b, "kernel")).startswith(
        "new best of the run: beyond noise of the run's earlier best")
    prior = (await verifier.get_run(run.id)).best_candidate_id
    assert prior == b.id
    # Six more: a code that read 1.5 once and 3.0 since has its interval widened for that drift
    # (copystats.between_measurements); three left its pessimistic end below b's.
    for _ in range(6):
        a = await verifier.record_candidate(measured(run.id, "a = 1\n", 3.0))
    assert a.n_measurements == 7 and (await verifier.get_run(run.id)).best_candidate_id == a.id
    said = await run_standing(verifier, a, "kernel", prior_best=prior)
    assert said.startswith(f"now leads the run's ranking, ahead of {b.id}, the best before this measurement"), said
    assert "x0" not in said


async def test_worded_for_a_minimised_score_and_a_run_without_x0(verifier):
    low = await verifier.start_run(RunCreate(goal="g", kit="k", direction="minimize", x0=0.5))
    best = await verifier.record_candidate(measured(low.id, "best = 1\n", 0.42, spread=0.01))
    above = await verifier.record_candidate(measured(low.id, "above = 1\n", 0.46, spread=0.01))
    said = await run_standing(verifier, above, "program")
    assert said.startswith(f"not a new best: worse than the run's best {best.id}") and "below" not in said, said
    bare = await verifier.start_run(RunCreate(goal="g", direction="maximize"))
    first = await verifier.record_candidate(measured(bare.id, "first = 1\n", 2.0))
    said = await run_standing(verifier, first, "kernel")
    assert said == "new best of the run: the first ranked candidate of a run with no starting score x0", said


async def test_a_leader_worse_than_x0_is_not_good_news(verifier):
    run = await verifier.start_run(RunCreate(goal="g", kit="k", direction="maximize", x0=1.0))
    slow = await verifier.record_candidate(measured(run.id, "slow = 1\n", 0.5, spread=0.02))
    said = await run_standing(verifier, slow, "kernel")
    assert said.startswith("leads the run's ranking but is worse than x0, the run's starting score"), said
    assert said.endswith("not a new best")


class FailingTrajectory:
    """A store whose trajectory read fails after the record was made (a version skew over HTTP)."""

    def __init__(self, error: Exception | None = None):
        self.error, self.read = error, False

    async def trajectory(self, run_id: str):
        self.read = True
        raise self.error or ValueError("a reply this client cannot parse")


async def test_a_failed_read_costs_the_line_not_the_result_and_unranked_records_read_nothing(verifier):
    run = await verifier.start_run(RunCreate(goal="g", kit="k", direction="maximize", x0=1.0))
    saved = await verifier.record_candidate(measured(run.id, "c = 1\n", 2.0))
    failing = FailingTrajectory()
    assert await run_standing(failing, saved, "kernel") is None and failing.read
    for update in ({"split": "heldout"}, {"status": "FAILED"}, {"flagged": True}, {"verified": False}):
        untouched = FailingTrajectory()
        assert await run_standing(untouched, saved.model_copy(update=update), "kernel") is None
        assert not untouched.read, update


def test_a_best_from_runs_all_alike_is_said_as_such_not_as_no_interval():
    exact = TrajectoryPoint(candidate_id="cand_x", at=AT, score=0.382181, score_interval=[0.382181, 0.382181],
                            best_so_far=None, best_so_far_id="cand_x", status="PASSED", verified=True,
                            n_measurements=2, role=None, team_version=None, new_best=True, decided_by="intervals")
    one = TrajectoryPoint(candidate_id="cand_y", at=AT, score=0.39, score_interval=[0.39, 0.39], best_so_far=None,
                          best_so_far_id="cand_x", status="PASSED", verified=True, n_measurements=1, runs=1,
                          role=None, team_version=None, too_few_runs=True)
    said = standing_line(trajectory(exact, one), "cand_y")
    assert said == "not told apart from the run's best cand_x at 0.382181 (5+ runs, the middle ones alike): this " \
                   "one is from 1 run, too few for a 95% interval", said


def test_a_program_measured_again_past_the_best_it_cleared_is_not_sent_to_compare():
    """A program measured again (5 runs) took the lead from the best its point cleared by their
    intervals, an exact 2.54 over 2.51-2.52, and its line said to compare the two "to tell them
    apart" (mp59): the point's verdict is the news. Only a best newer than its point is compared."""
    lattice = point("cand_l", 2.5, 2.5, 2.5, "cand_l", new_best=True, decided_by="intervals")
    rows = point("cand_r", 2.537692, 2.537692, 2.537692, "cand_r", new_best=True, decided_by="intervals")
    said = standing_line(trajectory(lattice, rows), "cand_r", again=True, prior_best="cand_l")
    assert said == "the run's best, beyond noise of the run's earlier best (cand_l) (by their intervals)", said
    # made after it, the best until this measurement pooled into cand_r
    newer = point("cand_n", 2.52, 2.51, 2.53, "cand_r", worse_than="cand_r", decided_by="intervals")
    rows = point("cand_r", 2.537692, 2.537692, 2.537692, "cand_r", new_best=True, decided_by="intervals")
    said = standing_line(trajectory(lattice, rows, newer), "cand_r", again=True, prior_best="cand_n")
    assert said.startswith("now leads the run's ranking, ahead of cand_n, the best before this measurement; "
                           "bench.compare cand_r and cand_n by id"), said
    # A new best past the last announced one that overlaps the leader before this measurement: compared.
    first = point("cand_l", 2.0, 1.98, 2.02, "cand_l", new_best=True, decided_by="intervals")
    leader = point("cand_n", 2.05, 2.0, 2.1, "cand_n", within_noise_of="cand_l", decided_by="intervals")
    close = point("cand_c", 2.08, 2.03, 2.13, "cand_c", new_best=True, decided_by="intervals")
    said = standing_line(trajectory(first, leader, close), "cand_c", again=True, prior_best="cand_n")
    assert said.startswith("now leads the run's ranking, ahead of cand_n") and "bench.compare cand_c and cand_n" \
        in said, said


def test_the_same_exact_score_as_the_best_is_one_result_not_a_compare():
    """A rewrite of a deterministic program scored the best's exact 2.5 and was told to compare the
    two to tell them apart, which a compare of runs all alike cannot (mp59)."""
    best = point("cand_b", 2.5, 2.5, 2.5, "cand_b", new_best=True, decided_by="intervals")
    for decided_by in ("intervals", "paired rounds"):
        same = TrajectoryPoint(candidate_id="cand_s", at=AT, score=2.5, score_interval=None, best_so_far=None,
                               best_so_far_id="cand_b", status="PASSED", verified=True, n_measurements=1, runs=1,
                               role=None, team_version=None, within_noise_of="cand_b", decided_by=decided_by)
        said = standing_line(trajectory(best, same), "cand_s")
        # One run at the exact best's score: a stochastic program's may (review): not one result yet.
        assert said == "not a new best: the same score as the run's best cand_b at 2.5 (5+ runs, the middle ones " \
                       "alike), from one run (repeats 4 tell whether every run gives it)", said
        alike = same.model_copy(update={"score_interval": [2.5, 2.5], "runs": None, "n_measurements": 2})
        assert standing_line(trajectory(best, alike), "cand_s") == "not a new best: the same score as the run's " \
            "best cand_b at 2.5 (5+ runs, the middle ones alike): report the two as one result"
    near = point("cand_s", 2.5, 2.49, 2.51, "cand_b", within_noise_of="cand_b", decided_by="intervals")
    assert "to tell them apart" in standing_line(trajectory(best, near), "cand_s")  # a spread: a compare can


async def test_a_best_that_loses_the_lead_is_told_so(verifier):
    """Re-measured slower, or failing once, the run's best is no longer it: said, not a bare
    "within noise" or nothing (review 2026-12-06)."""
    run = await verifier.start_run(RunCreate(goal="g", kit="k", direction="maximize", x0=1.0))
    p = await verifier.record_candidate(measured(run.id, "p = 1\n", 3.0))
    q = await verifier.record_candidate(measured(run.id, "q = 1\n", 2.9))
    assert (await verifier.get_run(run.id)).best_candidate_id == p.id
    for _ in range(3):
        p = await verifier.record_candidate(measured(run.id, "p = 1\n", 2.0))
    said = await run_standing(verifier, p, "kernel", prior_best=p.id)
    assert (await verifier.get_run(run.id)).best_candidate_id == q.id
    assert said.startswith(f"no longer the run's best: {q.id} at ") and " now leads" in said, said
    failing = measured(run.id, "q = 1\n", 2.9).model_copy(update={"status": "RUNTIME_ERROR", "score": None,
                                                                 "samples": {}})
    q = await verifier.record_candidate(failing)
    said = await run_standing(verifier, q, "kernel", prior_best=q.id)
    assert said.startswith("no longer ranked: a measurement of its code RUNTIME_ERROR") and \
        f"the run's best is now {p.id} at " in said, said
    assert await run_standing(verifier, q, "kernel") is None  # not the best before: a failure is no news here


async def test_a_pooled_lead_below_x0_and_a_compare_that_asks_about_the_same_two(verifier):
    run = await verifier.start_run(RunCreate(goal="g", kit="k", direction="maximize", x0=1.0))
    c = await verifier.record_candidate(measured(run.id, "c = 1\n", 0.7, spread=0.02))
    p = await verifier.record_candidate(measured(run.id, "p = 1\n", 0.8, spread=0.02))
    for _ in range(5):  # fewer leave c's interval, widened for its drift from 0.7, below p's
        c = await verifier.record_candidate(measured(run.id, "c = 1\n", 0.9, spread=0.02))
    assert (await verifier.get_run(run.id)).best_candidate_id == c.id
    said = await run_standing(verifier, c, "kernel", prior_best=p.id)
    assert said.startswith(f"now leads the run's ranking, ahead of {p.id}, the best before this measurement; it is "
                           "worse than x0, the run's starting score"), said
    asked = await run_standing(verifier, c, "kernel", prior_best=p.id, compared_with=p.id)
    assert "the verdict above is what their paired rounds say" in asked and "bench.compare" not in asked, asked


async def test_a_busy_kernel_is_placed_against_x0_by_its_compares_with_the_baseline(fast_settings, store,
                                                                                    monkeypatch):
    """A kernel measured on a busy machine counts against x0 widened 3x each way, so a real 2x stayed
    "within noise of x0" after the compare with the baseline that its standing advised (the compare
    was not kept) and after a quiet evaluation (it pools with the busy rounds) (mp53). Over a real MCP
    client: the compare is kept in the candidate's run, and the trajectory reads it against x0."""
    from evoteam.servers.bench.measurement import machine
    from evoteam.servers.bench.models import BASELINE_ID
    from evoteam.servers.knowledge.standing import BASELINE

    assert BASELINE_ID == BASELINE  # the bench's name for the baseline side is the one the trajectory reads
    monkeypatch.setattr(machine.os, "getloadavg", lambda: (40.0, 40.0, 40.0))
    async with Client(build_server(fast_settings, store)) as client:
        run = (await client.call_tool("evaluate", {"kit": "rmsnorm_fast", "code": EINSUM})).structured_content
        assert run["status"] == "PASSED" and run["contended"] is True, run["message"]
        cmp = (await client.call_tool("compare", {"kit": "rmsnorm_fast", "a_candidate_id": "baseline",
                                                  "b_candidate_id": run["candidate_id"], "repeats": 10})).structured_content
    assert f"kept in run {run['run_id']}: its compares with the baseline pool, and place {run['candidate_id']} " \
           "against x0 where a busy measurement's widened interval leaves it open" in cmp["verdict"], cmp["verdict"]
    point = next(p for p in (await store.trajectory(run["run_id"])).points if p.candidate_id == run["candidate_id"])
    if run["standing"].startswith("new best of the run: beyond noise of x0"):  # even widened 3x: nothing left open
        assert point.new_best and point.decided_by == "intervals", point
        return
    assert point.contended and point.decided_by == "paired rounds with the baseline", repr((point.model_dump(), cmp))
    faster = cmp["significant"] and cmp["b_speedup_over_a"] > 1
    assert point.new_best is faster and (point.within_noise_of == "x0") is (not cmp["significant"]), (point, cmp)
    if faster:
        assert f"{run['candidate_id']} in the run: the run's best, beyond noise of x0, the run's starting " \
               "score (by its paired rounds with the baseline)" in cmp["verdict"], cmp["verdict"]


async def test_a_busy_evaluation_is_placed_against_x0_by_its_own_paired_rounds(tmp_path, store, monkeypatch):
    """Its reply said "faster than the baseline, beyond noise in these paired rounds", then sent the
    model to bench.compare it with the baseline for rounds of the same kind, which it read as a
    contradiction and paid 14 s for (mp56). The evaluation's own rounds are kept in the run as that
    compare's would be, and place it against x0; with repeats (copies) they are not (their interval
    holds the processes' spread, which rounds alone do not)."""
    from evoteam.servers.bench.measurement import machine
    from evoteam.servers.knowledge.comparisons import dev_comparisons
    from tests.bench.conftest import KITS, steady_kit_at

    kit = steady_kit_at(tmp_path)  # ten rounds: a full 95% interval
    settings = Settings(db=tmp_path / "state" / "kb.db", kits_dirs=[kit.parent, KITS])
    monkeypatch.setattr(machine.os, "getloadavg", lambda: (40.0, 40.0, 40.0))
    async with Client(build_server(settings, store)) as client:
        reply = await client.call_tool("evaluate", {"kit": "rmsnorm_steady", "code": EINSUM})
        run = reply.structured_content
        assert run["status"] == "PASSED" and run["contended"] is True, run["message"]
        # The reasons are the message's contention line: the text a model reads holds them once (mp78).
        reasons = run["metrics"]["contention"]["reasons"]
        assert reasons and all(r in run["message"] for r in reasons), (reasons, run["message"])
        shown = json.loads(reply.content[0].text)
        assert "reasons" not in shown["metrics"]["contention"] and shown["metrics"]["contention"]["contended"], shown
        kept = await dev_comparisons(store, run["run_id"], "rmsnorm_steady")
        assert [(r.a_candidate_id, r.b_candidate_id, r.contended) for r in kept] == \
            [("baseline", run["candidate_id"], True)], kept
        assert abs(kept[0].b_over_a - run["score"]) <= 1e-6 * run["score"], (kept[0], run["score"])
        point = next(p for p in (await store.trajectory(run["run_id"])).points
                     if p.candidate_id == run["candidate_id"])
        lo, hi = run["score_interval"]
        if stats.load_widened(stats.Estimate(run["score"], lo, hi, 10)).lo <= 1 and (lo > 1 or hi < 1):
            # what load left open, its own paired rounds decide, as the reply says
            assert f"; these rounds, kept in {run['run_id']}, place it against x0 too: no compare with the baseline " \
                "needed" in run["message"], run["message"]
            assert point.decided_by == "paired rounds with the baseline", point
            assert point.new_best is (lo > 1), (point, run["score_interval"])
            assert "bench.compare" not in run["standing"], run["standing"]
        copied = (await client.call_tool("evaluate", {"kit": "rmsnorm_steady", "code": EINSUM + "\n# copies\n",
                                                      "repeats": 2})).structured_content
        assert copied["contended"] is True and copied["run_id"] == run["run_id"], copied["message"]
        assert "kept in" not in copied["message"], copied["message"]  # nothing kept: not said
        # The busy rule is the standing's to apply: each recorded reply says it no more, and points to it once.
        for reply in (run, copied):
            assert reply["standing"] and machine.BUSY_RULE not in reply["message"], reply["message"]
            assert reply["message"].count("`standing` says where") == 1, reply["message"]
            assert "contended machine (" in reply["message"], reply["message"]
    assert len(await dev_comparisons(store, run["run_id"], "rmsnorm_steady")) == 1


async def test_compares_with_the_baseline_that_find_no_difference_or_a_slower_kernel_say_so(store):
    """Kept paired rounds with the baseline decide a busy kernel's place against x0 either way: no
    difference (within noise of x0) or slower (worse than x0), whatever its widened interval says;
    where x0 is not the baseline's speedup (1) they decide nothing against it."""
    from evoteam.servers.knowledge.comparisons import keep_comparison, record_of

    for x0, ratio, expect in ((1.0, 1.0, {"within_noise_of": "x0"}), (1.0, 0.8, {"worse_than": "x0"}),
                              (2.0, 1.0, {})):
        run = await store.start_run(RunCreate(goal="g", kit="k", direction="maximize", x0=x0))
        busy = {"contention": {"contended": True}}
        bench = store.with_actor(Actor(user="tester", client="pytest", verifier=True))
        samples = {"w": [1.5 + i / 100 for i in range(10)]}  # 1.5x, widened 3x each way: holds 1 and 2
        c = await bench.record_candidate(CandidateCreate(run_id=run.id, code="a = 1\n", code_hash=code_hash("a = 1\n"),
                                                         status="PASSED", score=1.5, samples=samples, verified=True,
                                                         metrics=busy))
        assert (await store.trajectory(run.id)).points[0].within_noise_of == "x0"  # the widened interval alone
        ratios = {"w": [ratio * (1 + (i % 5 - 2) / 200) for i in range(30)]}
        await keep_comparison(bench, run.id, record_of("baseline", c.id, kit="k", split="dev", kind="kernel",
                                                       samples=ratios, ranges=None, contended=True, measured_at=AT))
        point = (await store.trajectory(run.id)).points[0]
        if expect:
            assert point.decided_by == "paired rounds with the baseline" and not point.new_best, point
            assert {k: getattr(point, k) for k in expect} == expect, point
        else:
            assert point.decided_by == "intervals" and point.within_noise_of == "x0", point


async def test_an_unclear_compare_with_the_baseline_does_not_take_back_a_quiet_best(store):
    """The baseline's paired rounds settle only what load left open: a quiet 2.0x whose own interval
    clears x0 stays the new best beside a busy compare that found no clear difference (review
    2026-12-06: it took the best back, and with it the chain later candidates are judged by)."""
    from evoteam.servers.knowledge.comparisons import keep_comparison, record_of

    run = await store.start_run(RunCreate(goal="g", kit="k", direction="maximize", x0=1.0))
    bench = store.with_actor(Actor(user="tester", client="pytest", verifier=True))
    c = await bench.record_candidate(CandidateCreate(run_id=run.id, code="b = 1\n", code_hash=code_hash("b = 1\n"),
                                                     status="PASSED", score=2.0, verified=True,
                                                     samples={"w": [2.0 + i / 200 for i in range(10)]}))
    assert (await store.trajectory(run.id)).points[0].new_best
    wide = {"w": [1.3 * (0.3 + i / 10) for i in range(10)]}  # 0.39x to 1.56x: no clear difference
    record = record_of("baseline", c.id, kit="k", split="dev", kind="kernel", samples=wide, ranges=None,
                       contended=True, measured_at=AT)
    assert not record.significant
    await keep_comparison(bench, run.id, record)
    point = (await store.trajectory(run.id)).points[0]
    assert point.new_best and point.decided_by == "intervals", point


async def test_a_compare_on_other_kit_content_is_not_kept_in_the_run(store):
    """Rounds timed on a kit whose content differs from the run's (an edited kit, a look-alike) are
    refused by evaluate; a compare's were kept all the same and decided standings (review 2026-12-06)."""
    from types import SimpleNamespace

    from evoteam.servers.bench.evaluation.compare import _keep
    from evoteam.servers.bench.measurement.method import TIMING_METHOD

    run = await store.start_run(RunCreate(goal="g", kit="k", direction="maximize", x0=1.0))
    bench = store.with_actor(Actor(user="tester", client="pytest", verifier=True))
    busy = {"contention": {"contended": True}, "kit_hash": "sha256:" + "1" * 64, "timing_method": TIMING_METHOD}
    c = await bench.record_candidate(CandidateCreate(run_id=run.id, code="c = 1\n", code_hash=code_hash("c = 1\n"),
                                                     status="PASSED", score=1.5, verified=True, metrics=busy,
                                                     samples={"w": [1.5 + i / 200 for i in range(10)]}))
    edited = SimpleNamespace(name="k", root=Path("/nowhere/k"), content_hash="sha256:" + "2" * 64,
                             manifest=SimpleNamespace(kind="kernel", direction="maximize"))
    ratios = {"w": [1.5 * (1 + (i % 5 - 2) / 200) for i in range(30)]}
    kept, pooled, _ = await _keep(bench, edited, {"candidate_id": "baseline"}, {"candidate_id": c.id}, "dev",
                                  "kernel", True, ratios, None, None)
    assert kept.startswith(f"; not kept in run {run.id}: it was measured on other kit content"), kept
    point = (await store.trajectory(run.id)).points[0]
    assert point.decided_by != "paired rounds with the baseline" and not point.new_best, point
    # The same content is kept; in a finished run too, which is said (its verdicts still move; mp54).
    await store.update_run(run.id, status="finished", reason="done")
    same = SimpleNamespace(name="k", root=Path("/nowhere/k"), content_hash="sha256:" + "1" * 64,
                           manifest=SimpleNamespace(kind="kernel", direction="maximize"))
    kept, _, _ = await _keep(bench, same, {"candidate_id": "baseline"}, {"candidate_id": c.id}, "dev",
                             "kernel", True, ratios, None, None)
    assert kept.startswith(f"; kept in run {run.id}: its compares with the baseline pool") and \
        "(the run is finished: its verdicts move all the same)" in kept, kept
    point = (await store.trajectory(run.id)).points[0]
    assert point.new_best and point.decided_by == "paired rounds with the baseline", point


def test_compare_times_the_baseline_that_speedups_are_over():
    """A compare's "baseline" side is the first usable baseline entry, the one every speedup is
    over: a GPU kit's flashinfer entry is skipped where flashinfer is missing, as evaluate skips it
    (it took the first entry whatever it needed; review 2026-12-06)."""
    import importlib.util

    from evoteam.servers.bench.evaluation.compare import _baseline_file
    from evoteam.servers.bench.formats.kits import find_kit

    settings = Settings(kits_dirs=[KITS])
    for name in ("rmsnorm_cpu", "mla_paged_decode_h16_ckv512_kpe64_ps1"):
        kit = find_kit(settings, name)
        solution, label = kit.baseline_solution()
        assert Path(_baseline_file(kit)).name == label.partition("::")[0], (name, label)
    if importlib.util.find_spec("flashinfer") is None:
        assert Path(_baseline_file(find_kit(settings, "mla_paged_decode_h16_ckv512_kpe64_ps1"))).name != \
            "baseline_flashinfer.py"


def test_only_a_returning_kernel_behind_a_passing_best_is_sent_to_its_own_style():
    """A returning kernel that reads ahead of a destination-passing best, within noise, may still be
    found faster by a compare of the two (the style's share only flatters the passing side): its
    advice stays that compare; one that reads behind is sent to a kernel of its own style (review)."""
    best = point("c1", 3.3, 3.0, 3.5, "c1", new_best=True, decided_by="intervals")
    styles = {"c1": "dps", "c2": "returns"}
    ahead = point("c2", 3.4, 2.9, 3.8, "c1", within_noise_of="c1", decided_by="intervals")
    said = standing_line(trajectory(best, ahead), "c2", "×", styles=styles)
    assert said.endswith("bench.compare c2 and c1 by id to tell them apart; if c2 and c1 are twins (one arithmetic "
                         "in both output styles), they are one result: no compare"), said
    behind = point("c2", 3.2, 2.9, 3.5, "c1", within_noise_of="c1", decided_by="intervals")
    said = standing_line(trajectory(best, behind), "c2", "×", styles=styles)
    assert said.endswith("compare it with a kernel of its own style"), said
    # In the reply to that very compare (A returns its outputs too): not asked again (mp75).
    said = standing_line(trajectory(best, behind), "c2", "×", styles={**styles, "c0": "returns"}, compared_with="c0")
    assert said.endswith("; the compare above, with a kernel of its own style, is what tells its kernel"), said
    # Busy and apart as measured: it reads below the best, not "within noise" of it (mp75).
    busy = point("c2", 2.5, 2.4, 2.6, "c1", within_noise_of="c1", contended=True)
    said = standing_line(trajectory(best, busy), "c2", "×", styles=styles)
    assert said.startswith("not a new best: it reads below the run's best c1 at 3.30× (3.00–3.50) (this one measured "
                           "on a busy machine"), said


def test_a_compare_named_between_two_styles_is_none_for_twins():
    """A passing twin of a returning best, within noise of it, was sent to "bench.compare c2 and c1 by
    id to tell them apart", which kernel-loop's rule 1 says to skip for twins: a model following rule 2
    ("the compare the standing names") ran it (mp81). Every compare the standing names between two of
    different styles says the twins' case; one between two of the same style, or of a style unknown,
    says nothing of twins."""
    # Conditional, the two named: a bare "no compare for twins" read as said of every such pair (mp83).
    twins = "; if c2 and c1 are twins (one arithmetic in both output styles), they are one result: no compare"
    best = point("c1", 2.36, 2.22, 2.64, "c1", new_best=True, decided_by="intervals")
    for styles, said_twins in (({"c1": "returns", "c2": "dps"}, True), ({"c1": "dps", "c2": "dps"}, False),
                               ({"c1": "returns"}, False)):
        child = point("c2", 2.32, 2.12, 2.60, "c1", within_noise_of="c1", decided_by="intervals")
        said = standing_line(trajectory(best, child), "c2", "×", styles=styles)
        assert said.startswith("not a new best: within noise of the run's best c1") and \
            said.endswith("bench.compare c2 and c1 by id to tell them apart" + (twins if said_twins else "")), said
        busy = point("c2", 2.40, 2.30, 2.50, "c1", within_noise_of="c1", contended=True)
        said = standing_line(trajectory(best, busy), "c2", "×", styles=styles)
        assert said.startswith("not a new best: not told apart from the run's best c1") and \
            said.endswith("(side by side, load touches both)" + (twins if said_twins else "")), said
        # Leading the ranking, within noise of the last new best: its compare says the twins' case too.
        ahead = point("c2", 2.70, 2.50, 2.90, "c2", within_noise_of="c1", decided_by="intervals")
        said = standing_line(trajectory(best, ahead), "c2", "×", styles=styles)
        assert said.startswith("leads the run's ranking") and "(bench.compare c2 and c1 by id)" in said \
            and said.endswith(twins) == said_twins, said


def test_a_returning_kernel_far_behind_a_passing_best_is_not_sent_to_a_style_compare():
    """A busy 1.65x behind a 4.31x best that passes destination style was told "a compare of the two
    cannot tell kernels apart within destination passing style's share; compare it with a kernel of
    its own style" (mp71): its gap, by their intervals as measured, is far beyond that share (1.30x
    at most). Within the share, the style's words stay."""
    a = point("cand_a", 4.31, 3.88, 4.75, "cand_a", new_best=True, decided_by="intervals")
    styles = {"cand_a": "dps", "cand_far": "returns", "cand_near": "returns"}
    far = point("cand_far", 1.65, 1.44, 1.86, "cand_a", within_noise_of="cand_a", contended=True)
    said = standing_line(trajectory(a, far), "cand_far", "×", styles=styles)
    assert said.startswith("not a new best: it reads below the run's best cand_a at 4.31× (3.88–4.75); set it "
                           "aside, no compare needed") and "style" not in said, said
    near = point("cand_near", 3.9, 3.5, 4.3, "cand_a", within_noise_of="cand_a", decided_by="intervals")
    said = standing_line(trajectory(a, near), "cand_near", "×", styles=styles)
    assert "a compare of the two cannot tell kernels apart within destination passing style's share" in said, said


def test_where_b_stands_in_the_run_is_not_read_as_the_pairs_verdict():
    """After "no significant difference", "B in the run: the run's best, beyond noise of the run's
    earlier best (cand_c)" read as B winning the pair (mp70): a line about others says it is not this
    pair's verdict; one about A, or against the baseline, is that verdict and says nothing more."""
    from evoteam.servers.bench.evaluation.standing import stands_in_run

    assert stands_in_run("B", "cand_a", "the run's best, beyond noise of the run's earlier best (cand_c)") == \
        "; B in the run, from all its measurements, not this pair's verdict: the run's best, beyond noise of the " \
        "run's earlier best (cand_c)"
    about_a = "not a new best: within noise of the run's best cand_a; their paired rounds find no difference"
    assert stands_in_run("B", "cand_a", about_a) == f"; B in the run: {about_a}"
    assert stands_in_run("cand_b", "baseline", "the run's best") == "; cand_b in the run: the run's best"


async def test_two_named_to_tell_apart_are_told_what_their_kept_paired_rounds_found(verifier):
    """c2 measured again was told "bench.compare c2 and c4 by id to tell them apart" minutes after a
    compare of the two had found no difference: neither's point was judged against the other, so the
    trajectory's verdicts did not hold it (mp76). The line reads the run's kept rounds of the two it
    names, and says what they found; with none kept, the compare is still the advice."""
    from evoteam.servers.knowledge.comparisons import keep_comparison, record_of

    run = await verifier.start_run(RunCreate(goal="g", kit="k", direction="maximize", x0=1.0))
    a = await verifier.record_candidate(measured(run.id, "a = 1\n", 2.0))
    await verifier.record_candidate(measured(run.id, "r = 1\n", 3.0))
    t = await verifier.record_candidate(measured(run.id, "t = 1\n", 3.05))
    assert (await verifier.get_run(run.id)).best_candidate_id == t.id
    a = await verifier.record_candidate(measured(run.id, "a = 1\n", 2.1))  # measured again, behind t
    plain = await run_standing(verifier, a, "kernel", again=True, prior_best=t.id)
    assert plain.startswith(f"not the run's best: that is {t.id}") and \
        f"bench.compare {a.id} and {t.id} by id to tell them apart" in plain, plain

    async def kept(ratio: float) -> None:  # t over a, 30 paired rounds of each workload
        record = record_of(a.id, t.id, kit="k", split="dev", kind="kernel",
                           samples={"w": [ratio * (1 + (i % 5 - 2) / 200) for i in range(30)]}, ranges=None,
                           contended=False, measured_at=datetime.now(timezone.utc))
        assert await keep_comparison(verifier, run.id, record) is None

    await kept(1.0)
    tied = await run_standing(verifier, a, "kernel", again=True, prior_best=t.id)
    assert tied.startswith(f"not the run's best: that is {t.id}") and f"; with {t.id}, their paired rounds find no " \
        "difference: report the two as one result" in tied and "to tell them apart" not in tied, tied
    # In a program's words, its runs are not paired: said so.
    assert "their runs find no significant difference" in \
        (await run_standing(verifier, a, "program", again=True, prior_best=t.id)), "program"
    # Pooled with a second batch that finds t faster: a is worse than t, said as such.
    for _ in range(3):
        await kept(1.3)
    worse = await run_standing(verifier, a, "kernel", again=True, prior_best=t.id)
    assert worse.endswith(f"; their paired rounds find it worse than {t.id}"), worse


def test_the_styles_share_between_the_best_and_a_passing_one_is_said_the_way_round_it_is():
    """A returning leader whose paired rounds find a passing candidate ahead of it by destination
    passing style's share alone (within its noise by that share): the passing one's line read "that
    is R, ahead of it by no more than that share", the other way round (rev76)."""
    d = point("cand_d", 3.7, 3.4, 4.1, "cand_d", new_best=True, decided_by="intervals")
    r = point("cand_r", 3.8, 3.5, 4.0, "cand_r", within_noise_of="cand_d",
              decided_by="destination passing style's share")
    run = trajectory(d, r)
    line = standing_line(run, "cand_d", "×", again=True, styles={"cand_d": "dps", "cand_r": "returns"})
    assert line.startswith("not the run's best: that is cand_r") and line.endswith(
        "; it is ahead of that one side by side by no more than destination passing style's share (no faster "
        "kernel)"), line
    line = standing_line(run, "cand_d", "×", again=True, styles={"cand_d": "returns", "cand_r": "dps"})
    assert line.endswith(", ahead of it by no more than destination passing style's share (no faster kernel)"), line
    assert "bench.compare" not in line, line


def test_one_that_took_the_lead_is_told_what_kept_rounds_found_with_the_best_it_passed():
    """Measured again, c1 took the lead from c2: kept rounds that find it better said "c2, which ranks
    above it" and asked for a re-measurement; ones that find it worse did not say c2 is the better of
    the two (rev76)."""
    from evoteam.servers.knowledge.standing import trajectory_points
    from tests.knowledge.test_trajectory_rules import _row

    rows = [_row(1, 1.6, 1.5, 1.7), _row(2, 1.55, 1.45, 1.65)]
    for side, then in (("better", "; their paired rounds find it better than c2 too"),
                       ("worse", "; their paired rounds find it worse than c2, the better of the two: bench.remeasure "
                                 "with candidate_ids [c1, c2] on a quiet machine lets the ranking follow")):
        pairs = {("c2", "c1"): side, ("c1", "c2"): {"better": "worse", "worse": "better"}[side]}
        points, best = trajectory_points(rows, "maximize", 1.0, lambda a, b: pairs.get((a, b)))
        run = Trajectory(run_id="r", direction="maximize", points=points, best_score=best["score"], ndg=None)
        line = standing_line(run, "c1", "×", again=True, prior_best="c2", paired=lambda a, b: pairs.get((a, b)))
        assert line == "now leads the run's ranking, ahead of c2, the best before this measurement" + then, line

