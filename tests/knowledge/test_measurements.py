"""Identical code is one candidate, and rankings use the pessimistic end of each interval
(knowledge/measurements.py), on the embedded file and the shared server alike (see conftest)."""

from __future__ import annotations

import random

import pytest

from evoteam.codehash import code_hash
from evoteam.servers.knowledge.models import CandidateCreate, RunCreate, WorkloadResult
from tests.knowledge.conftest import BEFORE_SPREAD_UNKNOWN

CODE = "def run(x):\n    return x * 2\n"


def rounds(center: float, spread: float, n: int = 10, seed: int = 0) -> list[float]:
    rng = random.Random(seed)
    return [center + rng.uniform(-spread, spread) for _ in range(n)]


def measured(run_id: str, code: str, samples: dict, status: str = "PASSED", **kw) -> CandidateCreate:
    score = None
    if status == "PASSED":
        from evoteam import stats
        score = stats.score_estimate(samples).value
    wl = [WorkloadResult(workload=w, status=status, speedup=sorted(v)[len(v) // 2]) for w, v in samples.items()]
    return CandidateCreate(run_id=run_id, code=code, status=status, score=score, samples=samples, verified=True,
                           code_hash=code_hash(code), workloads=wl, **kw)


async def new_run(store, direction="maximize"):
    return await store.start_run(RunCreate(goal="g", kit="k", direction=direction, x0=1.0))


async def test_identical_code_pools_into_one_candidate(store, verifier):
    run = await new_run(store)
    draws = []
    for i in range(5):
        samples = {"w1": rounds(4.0, 1.5, seed=i), "w2": rounds(2.0, 0.6, seed=10 + i)}
        # The same code, reformatted and commented: still the same candidate.
        code = CODE if i % 2 == 0 else "# again\n" + CODE.replace("x * 2", "x*2") + "\n\n"
        c = await verifier.record_candidate(measured(run.id, code, samples))
        draws.append(c.score if i == 0 else None)
        from evoteam import stats
        draws[-1] = stats.score_estimate(samples).value
    page = await store.list_candidates(run.id)
    assert page.total == 1
    (only,) = page.items
    assert only.n_measurements == 5
    full = await verifier.get_candidate(only.id)
    assert len(full.samples["w1"]) == 50 and len(full.samples["w2"]) == 50
    # The pooled score is the statistic of all rounds, never the luckiest of the five draws.
    assert only.score < max(draws)
    lo, hi = only.score_interval
    assert lo < only.score < hi
    got = await store.get_run(run.id)
    assert got.best_candidate_id == only.id and got.best_interval == only.score_interval


async def test_code_retyped_with_another_docstring_pools_into_one_candidate(store, verifier):
    """A model re-typed the best candidate with a new module docstring: a second candidate whose
    lucky draw became a team version's best. Docstrings do not make other code (codehash.py)."""
    run = await new_run(store)
    first = '"""Doubles x."""\n' + CODE.replace("return", '"""Twice x."""\n    return')
    retyped = '"""Doubles x, re-typed: now the best."""\n' + CODE
    a = await verifier.record_candidate(measured(run.id, first, {"w": rounds(3.0, 0.2, seed=1)}))
    b = await verifier.record_candidate(measured(run.id, retyped, {"w": rounds(3.0, 0.2, seed=2)}))
    assert b.id == a.id
    (only,) = (await store.list_candidates(run.id)).items
    assert only.n_measurements == 2 and only.code_hash == code_hash(CODE)


async def test_a_lucky_wide_candidate_does_not_outrank_a_steady_one(store, verifier):
    run = await new_run(store)
    steady = await verifier.record_candidate(measured(run.id, "def run(x):\n    return x\n",
                                                      {"w": rounds(4.0, 0.05, seed=1)}))
    lucky = await verifier.record_candidate(measured(run.id, "def run(x):\n    return x + 0\n",
                                                     {"w": rounds(5.0, 3.0, seed=2)}))
    assert lucky.score > steady.score  # a higher point estimate...
    assert lucky.score_interval[0] < steady.score_interval[0]  # ...with a lower pessimistic end
    best = await store.best_candidates(run.id, k=2)
    assert [c.id for c in best] == [steady.id, lucky.id]
    assert (await store.get_run(run.id)).best_candidate_id == steady.id
    traj = await store.trajectory(run.id)
    assert traj.points[0].new_best and traj.points[0].best_so_far_id == steady.id
    assert traj.points[1].within_noise_of == steady.id and not traj.points[1].new_best


async def test_minimising_ranks_by_the_upper_end(store, verifier):
    run = await new_run(store, direction="minimize")
    steady = await verifier.record_candidate(measured(run.id, "a = 1\n", {"program": [0.40, 0.40, 0.41]}))
    wide = await verifier.record_candidate(measured(run.id, "a = 2\n", {"program": [0.30, 0.39, 0.50]}))
    assert wide.score < steady.score
    best = await store.best_candidates(run.id, k=2)
    assert [c.id for c in best] == [steady.id, wide.id]


async def test_new_best_only_when_the_interval_clears(store, verifier):
    run = await new_run(store)
    first = await verifier.record_candidate(measured(run.id, "a = 1\n", {"w": rounds(2.0, 0.1, seed=3)}))
    close = await verifier.record_candidate(measured(run.id, "a = 2\n", {"w": rounds(2.04, 0.1, seed=4)}))
    far = await verifier.record_candidate(measured(run.id, "a = 3\n", {"w": rounds(3.0, 0.1, seed=5)}))
    traj = await store.trajectory(run.id)
    by_id = {p.candidate_id: p for p in traj.points}
    assert by_id[first.id].new_best
    # Better by its pessimistic end, but inside the noise of the first: best so far, not progress.
    assert by_id[close.id].best_so_far_id == close.id and not by_id[close.id].new_best
    assert by_id[close.id].within_noise_of == first.id
    assert by_id[far.id].new_best and by_id[far.id].within_noise_of is None


async def test_the_first_is_a_new_best_only_where_it_clears_the_starting_score(store, verifier):
    """A copy of a kernel kit's baseline was announced as a new best ("progress, not noise") for
    being first (model-play 2026-12-04): the first clears the run's starting score, or is not one."""
    run = await new_run(store)  # x0 1.0: the baseline's speedup
    copy = await verifier.record_candidate(measured(run.id, "a = 1\n", {"w": rounds(1.0, 0.05, seed=1)}))
    better = await verifier.record_candidate(measured(run.id, "a = 2\n", {"w": rounds(3.4, 0.2, seed=2)}))
    by_id = {p.candidate_id: p for p in (await store.trajectory(run.id)).points}
    assert by_id[copy.id].best_so_far_id == copy.id and not by_id[copy.id].new_best
    # It says where it stands: within the noise of the starting score (a bare new_best false read
    # as "worse" to a model; model-play 2026-12-04).
    assert by_id[copy.id].within_noise_of == "x0" and by_id[copy.id].too_few_runs is None
    assert by_id[better.id].new_best
    # Without a starting score, the first ranked result is the first best, as before.
    bare = await store.start_run(RunCreate(goal="g", kit="k", direction="maximize"))
    first = await verifier.record_candidate(measured(bare.id, "a = 1\n", {"w": rounds(1.0, 0.05, seed=1)}))
    assert (await store.trajectory(bare.id)).points[0].candidate_id == first.id
    assert (await store.trajectory(bare.id)).points[0].new_best


async def test_a_new_best_clears_the_last_one_announced_not_only_the_one_before(store, verifier):
    """Review 2026-12-04: a second candidate below the starting score was announced for clearing a
    first that did not reach it either; and a chain of leads, each within noise of the one before,
    hid a gain over the last announced best that their intervals show plainly."""
    run = await new_run(store)  # x0 1.0
    ids, est = [], {}
    for i, (center, spread) in enumerate([(0.8, 0.02), (0.95, 0.02), (2.0, 0.1), (2.1, 0.1), (2.25, 0.1)]):
        c = await verifier.record_candidate(measured(run.id, f"a = {i}\n", {"w": rounds(center, spread, seed=i + 1)}))
        ids.append(c.id)
        est[c.id] = c.score_interval
    below, still_below, a, b, c = ids
    # The preconditions, from the intervals themselves: each leads by its lower end; still_below
    # clears below, yet not 1.0; b overlaps a; c overlaps b but clears a.
    assert est[still_below][0] > est[below][1] and est[still_below][1] < 1.0
    assert est[a][0] < est[b][0] <= est[a][1] and est[b][0] < est[c][0] <= est[b][1] and est[c][0] > est[a][1]
    points = {p.candidate_id: p for p in (await store.trajectory(run.id)).points}
    assert [points[i].best_so_far_id for i in ids] == ids  # each takes the lead
    assert not points[below].new_best and not points[still_below].new_best
    assert points[still_below].within_noise_of is None  # apart from the first, short of the start
    assert points[below].worse_than == points[still_below].worse_than == "x0"
    assert points[a].new_best  # the first to clear the starting score
    assert not points[b].new_best and points[b].within_noise_of == a
    assert points[c].new_best and points[c].within_noise_of is None


async def test_a_programs_single_runs_are_never_announced_as_progress(store, verifier):
    """A program's score from one run (or a few alike) says nothing of how much it moves: the
    trajectory keeps it as the best so far, within noise of the best before it, until enough
    runs agree on it (pooled, on every backend: the query counts them where the interval is a point)."""
    run = await new_run(store)
    first = await verifier.record_candidate(measured(run.id, "a = 1\n", {"program": [2.0]}))
    second = await verifier.record_candidate(measured(run.id, "a = 2\n", {"program": [2.5]}))
    by_id = {p.candidate_id: p for p in (await store.trajectory(run.id)).points}
    # One run above the starting score (x0 1.0) is not known to be progress either.
    assert not by_id[first.id].new_best and by_id[first.id].too_few_runs
    assert by_id[second.id].best_so_far_id == second.id and not by_id[second.id].new_best
    # Not "within noise" (a model read that as no progress): not known yet, and said so.
    assert by_id[second.id].too_few_runs and by_id[second.id].within_noise_of is None
    for code in ("a = 1\n", "a = 2\n"):  # four more runs each, alike: now each value is exact
        await verifier.record_candidate(measured(run.id, code, {"program": [2.0 if code == "a = 1\n" else 2.5] * 4}))
    by_id = {p.candidate_id: p for p in (await store.trajectory(run.id)).points}
    assert by_id[first.id].new_best and by_id[first.id].too_few_runs is None
    assert by_id[second.id].new_best and by_id[second.id].within_noise_of is None
    assert by_id[second.id].too_few_runs is None


async def test_a_programs_single_run_behind_the_best_is_not_called_noise(store, verifier):
    """A one-run score behind a one-run best, with another value, is not known to be worse, and
    not "within noise" either (a model read a program at 0.5 behind a best at 0.386 as noise):
    too_few_runs, until both have run 5 times alike, when it is worse_than the best."""
    run = await new_run(store)
    best = await verifier.record_candidate(measured(run.id, "a = 1\n", {"program": [2.5]}))
    behind = await verifier.record_candidate(measured(run.id, "a = 2\n", {"program": [2.0]}))
    same = await verifier.record_candidate(measured(run.id, "a = 3\n", {"program": [2.5]}))
    by_id = {p.candidate_id: p for p in (await store.trajectory(run.id)).points}
    assert by_id[behind.id].best_so_far_id == best.id
    assert by_id[behind.id].too_few_runs and by_id[behind.id].within_noise_of is None
    assert by_id[behind.id].worse_than is None and by_id[behind.id].decided_by is None
    assert by_id[same.id].within_noise_of == best.id and by_id[same.id].too_few_runs is None
    for code, value in (("a = 1\n", 2.5), ("a = 2\n", 2.0)):
        await verifier.record_candidate(measured(run.id, code, {"program": [value] * 4}))
    by_id = {p.candidate_id: p for p in (await store.trajectory(run.id)).points}
    assert by_id[behind.id].worse_than == best.id and by_id[behind.id].too_few_runs is None


async def test_a_failed_measurement_stops_the_code_ranking(store, verifier):
    run = await new_run(store)
    ok = await verifier.record_candidate(measured(run.id, CODE, {"w": rounds(3.0, 0.2)}))
    assert (await store.get_run(run.id)).best_candidate_id == ok.id
    failed = await verifier.record_candidate(measured(run.id, CODE, {}, status="INCORRECT_NUMERICAL"))
    assert failed.id == ok.id and failed.status == "INCORRECT_NUMERICAL" and failed.n_measurements == 2
    assert (await store.get_run(run.id)).best_candidate_id is None
    assert await store.best_candidates(run.id) == []


async def test_claims_and_other_splits_do_not_pool(store, verifier):
    run = await new_run(store)
    a = await verifier.record_candidate(measured(run.id, CODE, {"w": rounds(3.0, 0.2)}))
    held = await verifier.record_candidate(measured(run.id, CODE, {"w": rounds(2.5, 0.2)}, split="heldout"))
    claim = await store.record_candidate(CandidateCreate(run_id=run.id, code=CODE, status="PASSED", score=99.0))
    assert len({a.id, held.id, claim.id}) == 3
    assert claim.code_hash == a.code_hash == code_hash(CODE)
    assert (await store.get_run(run.id)).best_candidate_id == a.id
    # Summaries carry what tells candidates apart without fetching each one.
    (summary,) = [c for c in (await store.list_candidates(run.id)).items if c.id == a.id]
    assert summary.code_hash and summary.n_measurements == 1
    noted = await verifier.record_candidate(measured(run.id, "b = 1\n", {"w": [1.0, 1.1]},
                                                     notes="blocked rows of 64\nmore detail"))
    assert noted.note == "blocked rows of 64"


async def test_pooled_measurements_survive_export_and_import(tmp_path, verifier):
    from evoteam.servers.knowledge.export import export_run, import_run
    from evoteam.servers.knowledge.local import LocalKnowledgeStore
    from evoteam.servers.knowledge.store import Actor

    run = await new_run(verifier)
    for i in range(3):
        c = await verifier.record_candidate(measured(run.id, CODE, {"w": rounds(3.0, 0.3, seed=i)}))
    await export_run(verifier, run.id, tmp_path / "out")
    async with LocalKnowledgeStore.open(tmp_path / "copy.db", Actor(user="x", verifier=True)) as other:
        await import_run(other, tmp_path / "out", trust_scores=True)
        got = await other.get_candidate(c.id)
        assert got.n_measurements == 3 and got.score_interval == pytest.approx(c.score_interval)
        assert got.samples == (await verifier.get_candidate(c.id)).samples
        assert (await other.get_run(run.id)).best_candidate_id == c.id


async def test_each_measurement_says_whether_its_machine_was_contended(store, verifier):
    """The history of a pooled candidate keeps, per measurement, what the bench said about the
    machine (metrics.contention.contended), so a reader can tell a quiet measurement from a busy one."""
    run = await new_run(store)
    for i, busy in enumerate((True, False, True)):
        samples = {"w1": rounds(4.0, 0.2, seed=i)}
        await verifier.record_candidate(measured(run.id, CODE, samples, metrics={
            "contention": {"load_average": 3.0 if busy else 0.2, "contended": busy}}))
    (only,) = (await store.list_candidates(run.id)).items
    history = (await verifier.get_candidate(only.id)).metrics["measurements"]
    assert [m["contended"] for m in history] == [True, False, True]
    # ... and counts them: two of the three measurements were taken on a busy machine.
    assert only.n_measurements == 3 and only.contended_measurements == 2


BUSY = {"contention": {"load_average": 5.0, "contended": True, "reasons": ["load average 5.0 on 2 cores"]}}
QUIET = {"contention": {"load_average": 0.3, "contended": False, "reasons": []}}


async def test_a_busy_machine_never_announces_a_new_best(store, verifier):
    """Separate evaluations on a contended machine move by more than their intervals, so a
    candidate measured only there may become the best so far but is never announced as a new
    best, and neither is one said to clear an incumbent measured only there; a quiet
    measurement of the same code lets the announcement through again."""
    run = await new_run(store)
    first = await verifier.record_candidate(measured(run.id, "a = 1\n", {"w": rounds(2.0, 0.1, seed=3)},
                                                     metrics=QUIET))
    busy = await verifier.record_candidate(measured(run.id, "a = 2\n", {"w": rounds(3.0, 0.1, seed=4)},
                                                    metrics=BUSY))
    traj = await store.trajectory(run.id)
    by_id = {p.candidate_id: p for p in traj.points}
    assert by_id[first.id].new_best and by_id[first.id].contended is None
    # Clears the first by far, and is the best so far; measured only on a busy machine: not announced.
    assert by_id[busy.id].best_so_far_id == busy.id and by_id[busy.id].contended
    assert not by_id[busy.id].new_best and by_id[busy.id].within_noise_of == first.id
    assert busy.contended_measurements == 1 and busy.n_measurements == 1 and first.contended_measurements is None
    # Nor is the first candidate of a run measured only on a busy machine at 2x against a
    # starting score of 1.5: its interval widened for the load holds x0 ...
    other = await store.start_run(RunCreate(goal="g", kit="k", direction="maximize", x0=1.5))
    alone = await verifier.record_candidate(measured(other.id, "a = 1\n", {"w": rounds(2.0, 0.1, seed=3)},
                                                     metrics=BUSY))
    (point,) = (await store.trajectory(other.id)).points
    assert point.best_so_far_id == alone.id and point.contended and not point.new_best
    assert point.within_noise_of == "x0"
    # ... but a busy kernel's interval counts widened 3x each way (stats.BUSY_SPREAD): a
    # first one at 10x clears x0 = 1 even so and is announced, and a busy copy of the baseline is
    # within noise of x0, not of a best it is far apart from.
    wide = await new_run(store)
    lead = await verifier.record_candidate(measured(wide.id, "a = 1\n", {"w": rounds(10.0, 0.3, seed=3)},
                                                    metrics=BUSY))
    copy = await verifier.record_candidate(measured(wide.id, "a = 5\n", {"w": rounds(1.0, 0.1, seed=9)},
                                                    metrics=BUSY))
    points = {p.candidate_id: p for p in (await store.trajectory(wide.id)).points}
    assert points[lead.id].new_best and points[lead.id].contended and points[lead.id].decided_by == "intervals"
    assert points[copy.id].within_noise_of == "x0" and not points[copy.id].worse_than
    # A busy candidate apart from the best and beyond x0, both widened, is not told apart from the
    # best (no decided_by).
    mid = await verifier.record_candidate(measured(wide.id, "a = 6\n", {"w": rounds(4.0, 0.1, seed=10)},
                                                   metrics=BUSY))
    point = {p.candidate_id: p for p in (await store.trajectory(wide.id)).points}[mid.id]
    assert point.within_noise_of == lead.id and point.decided_by is None and not point.worse_than
    # A quiet candidate beyond the busy incumbent is announced by what it clears: the last
    # announced best (the first, quiet), never the busy one, whose interval is not trusted.
    after = await verifier.record_candidate(measured(run.id, "a = 3\n", {"w": rounds(4.0, 0.1, seed=5)},
                                                     metrics=QUIET))
    point = {p.candidate_id: p for p in (await store.trajectory(run.id)).points}[after.id]
    assert point.best_so_far_id == after.id and point.new_best and not point.contended
    assert point.within_noise_of is None
    # A quiet measurement of the busy one's code pools into it, but its score still holds the
    # busy rounds: still contended (a quiet re-measurement does not launder them).
    again = await verifier.record_candidate(measured(run.id, "a = 2\n", {"w": rounds(3.0, 0.1, seed=6)},
                                                     metrics=QUIET))
    assert again.id == busy.id and again.n_measurements == 2 and again.contended_measurements == 1
    top = await verifier.record_candidate(measured(run.id, "a = 4\n", {"w": rounds(5.0, 0.1, seed=7)},
                                                   metrics=QUIET))
    points = {p.candidate_id: p for p in (await store.trajectory(run.id)).points}
    assert points[busy.id].contended
    # The next clear step up from the quiet best is announced.
    assert points[top.id].new_best and points[top.id].within_noise_of is None


async def test_contended_counts_survive_export_and_import(tmp_path, verifier):
    from evoteam.servers.knowledge.export import export_run, import_run
    from evoteam.servers.knowledge.local import LocalKnowledgeStore
    from evoteam.servers.knowledge.store import Actor

    run = await new_run(verifier)
    for i, metrics in enumerate((BUSY, QUIET, BUSY)):
        c = await verifier.record_candidate(measured(run.id, CODE, {"w": rounds(3.0, 0.3, seed=i)},
                                                     metrics=metrics))
    await export_run(verifier, run.id, tmp_path / "out")
    async with LocalKnowledgeStore.open(tmp_path / "copy.db", Actor(user="x", verifier=True)) as other:
        await import_run(other, tmp_path / "out", trust_scores=True)
        got = await other.get_candidate(c.id)
        assert (got.n_measurements, got.contended_measurements) == (3, 2)


def _run_sql(where, statements: list[str]) -> None:
    """Statements straight on the database (a SQLite path or a PostgreSQL URL): a store taken back
    to an older schema."""
    if not isinstance(where, str):
        import sqlite3
        with sqlite3.connect(where) as conn:
            for sql in statements:
                conn.execute(sql)
        return
    import psycopg
    with psycopg.connect(where, autocommit=True) as conn:
        for sql in statements:
            conn.execute(sql)


@pytest.mark.parametrize("before", [1, 2])
@pytest.mark.parametrize("backend", ["local", "postgres"])
async def test_rows_from_before_count_their_contended_measurements(backend, before, request, tmp_path):
    """The migration that adds the count fills it for rows already there: a candidate whose first
    measurement or pooled history says contended counts, one from before the timing method was
    recorded (its contention rule misread quiet machines) does not, nor a quiet one."""
    from evoteam.servers.knowledge.local import LocalKnowledgeStore
    from evoteam.servers.knowledge.store import Actor

    where = tmp_path / "kb.db" if backend == "local" else request.getfixturevalue("postgres_url")
    method = {"timing_method": 3}
    async with LocalKnowledgeStore.open(where, Actor(user="t", verifier=True)) as kb:
        run = await new_run(kb)
        busy = await kb.record_candidate(measured(run.id, "a = 1\n", {"w": [2.0, 2.1]}, metrics={**BUSY, **method}))
        pooled = await kb.record_candidate(measured(run.id, "a = 2\n", {"w": [2.0, 2.1]}, metrics={**QUIET, **method}))
        await kb.record_candidate(measured(run.id, "a = 2\n", {"w": [2.0, 2.1]}, metrics={**BUSY, **method}))
        quiet = await kb.record_candidate(measured(run.id, "a = 3\n", {"w": [2.0, 2.1]}, metrics={**QUIET, **method}))
        old_rule = await kb.record_candidate(measured(run.id, "a = 4\n", {"w": [2.0, 2.1]}, metrics=BUSY))
    # Back to the schema before the count (knowledge.measurements 1), or to the first evoteam
    # that had the count, without the backfill (2).
    # (Without the later steps' columns either: an older store has none of them.)
    undo = (["ALTER TABLE candidates DROP COLUMN contended_measurements",
             *BEFORE_SPREAD_UNKNOWN, "ALTER TABLE candidates DROP COLUMN sample_ranges",
             "UPDATE schema_versions SET version = 1 WHERE component = 'knowledge.measurements'"] if before == 1 else
            ["UPDATE candidates SET contended_measurements = 0",
             *BEFORE_SPREAD_UNKNOWN, "ALTER TABLE candidates DROP COLUMN sample_ranges",
             "UPDATE schema_versions SET version = 2 WHERE component = 'knowledge.measurements'"])
    _run_sql(where, undo)
    async with LocalKnowledgeStore.open(where, Actor(user="t")) as kb:
        got = {c.id: c.contended_measurements for c in (await kb.list_candidates(run.id)).items}
    assert got == {busy.id: 1, pooled.id: 1, quiet.id: None, old_rule.id: None}, got


@pytest.mark.parametrize("backend", ["local", "postgres"])
async def test_rows_from_before_rank_after_those_with_a_95_percent_interval(backend, request, tmp_path):
    """The migration that adds spread_unknown marks the rows already there (knowledge.measurements
    6 and 7): a program's single run stored before ranks after five runs that span it, and says
    its runs; the five-run candidate and a kernel's rounds stay as they were."""
    from evoteam.servers.knowledge.local import LocalKnowledgeStore
    from evoteam.servers.knowledge.store import Actor

    where = tmp_path / "kb.db" if backend == "local" else request.getfixturevalue("postgres_url")
    async with LocalKnowledgeStore.open(where, Actor(user="t", verifier=True)) as kb:
        run = await new_run(kb, direction="minimize")
        steady = await kb.record_candidate(measured(run.id, "a = 1\n", {"program": [0.44, 0.45, 0.45, 0.46, 0.45]}))
        lucky = await kb.record_candidate(measured(run.id, "a = 2\n", {"program": [0.40]}))
        kernels = await new_run(kb)
        timed = await kb.record_candidate(measured(kernels.id, "a = 3\n", {"w": rounds(2.0, 0.1)}))
    undo = [*BEFORE_SPREAD_UNKNOWN,
            "UPDATE schema_versions SET version = 5 WHERE component = 'knowledge.measurements'"]
    _run_sql(where, undo)
    async with LocalKnowledgeStore.open(where, Actor(user="t")) as kb:
        ranked = await kb.best_candidates(run.id, k=2)
        assert [c.id for c in ranked] == [steady.id, lucky.id] and [c.runs for c in ranked] == [None, 1]
        assert (await kb.get_run(run.id)).best_candidate_id == steady.id
        assert (await kb.get_candidate(timed.id)).runs is None


async def test_an_older_bundle_gets_the_count_the_migration_would_give(tmp_path):
    """A bundle exported before the count existed carries none: the import derives it from the
    recorded metrics, as the migration does for a store upgraded in place."""
    import json

    from evoteam.servers.knowledge.export import export_run, import_run
    from evoteam.servers.knowledge.local import LocalKnowledgeStore
    from evoteam.servers.knowledge.store import Actor

    async with LocalKnowledgeStore.open(tmp_path / "a.db", Actor(user="x", verifier=True)) as kb:
        run = await new_run(kb)
        busy = await kb.record_candidate(measured(run.id, "a = 1\n", {"w": [2.0, 2.1]},
                                                  metrics={**BUSY, "timing_method": 3}))
        quiet = await kb.record_candidate(measured(run.id, "a = 2\n", {"w": [2.0, 2.1]},
                                                   metrics={**QUIET, "timing_method": 3}))
        await export_run(kb, run.id, tmp_path / "out")
    import hashlib

    manifest_path = tmp_path / "out" / "MANIFEST.json"
    manifest = json.loads(manifest_path.read_text())
    for path in (tmp_path / "out" / "candidates").glob("*.json"):  # as an older evoteam wrote it: no count
        data = json.loads(path.read_text())
        data.pop("contended_measurements")
        path.write_text(json.dumps(data, indent=2))
        manifest["files"][f"candidates/{path.name}"] = hashlib.sha256(path.read_bytes()).hexdigest()
    manifest_path.write_text(json.dumps(manifest, indent=2))
    async with LocalKnowledgeStore.open(tmp_path / "b.db", Actor(user="x", verifier=True)) as other:
        await import_run(other, tmp_path / "out", trust_scores=True)
        assert (await other.get_candidate(busy.id)).contended_measurements == 1
        assert (await other.get_candidate(quiet.id)).contended_measurements is None


async def test_a_first_measurement_keeps_the_rounds_pooling_keeps(store, verifier):
    """The interval is computed inside the write: a first record keeps the newest MAX_ROUNDS_KEPT
    rounds per workload, as pooling does, however many it brought."""
    from evoteam.servers.knowledge.measurements import MAX_ROUNDS_KEPT

    run = await new_run(store)
    many = {"w1": rounds(4.0, 0.5, n=MAX_ROUNDS_KEPT + 600, seed=3), "w2": rounds(2.0, 0.2, n=50, seed=4)}
    c = await verifier.record_candidate(measured(run.id, CODE, many))
    full = await verifier.get_candidate(c.id)
    assert full.samples["w1"] == many["w1"][-MAX_ROUNDS_KEPT:] and full.samples["w2"] == many["w2"]
    lo, hi = c.score_interval
    assert lo < c.score < hi


async def test_the_intervals_are_computed_off_the_event_loop(tmp_path, monkeypatch):
    """A pooled write bootstraps up to 400 rounds per workload (~40 ms): never on the event loop,
    where every other request of a shared server would wait for it."""
    import threading

    from evoteam.servers.knowledge import measurements
    from evoteam.servers.knowledge.local import LocalKnowledgeStore
    from evoteam.servers.knowledge.store import Actor

    threads: list[threading.Thread] = []
    real = measurements.estimate
    monkeypatch.setattr(measurements, "estimate", lambda *args: threads.append(threading.current_thread())
                        or real(*args))
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t", verifier=True)) as kb:
        run = await new_run(kb)
        for i in range(2):  # a new candidate, then one more measurement pooled into it
            await kb.record_candidate(measured(run.id, CODE, {"w1": rounds(4.0, 1.0, seed=i)}))
        assert (await kb.list_candidates(run.id)).items[0].n_measurements == 2
    assert len(threads) >= 2 and threading.main_thread() not in threads, threads


def censored(samples: dict, unresolved: dict[str, set[int]], spread: float = 3.0) -> dict:
    """Ranges for the rounds named in ``unresolved``: from a third to three times their value."""
    return {w: ([v / spread if i in idx else v for i, v in enumerate(samples[w])],
                [v * spread if i in idx else v for i, v in enumerate(samples[w])]) for w, idx in unresolved.items()}


async def test_rounds_below_the_resolution_widen_the_stored_interval_as_the_bench_does(store, verifier):
    """The bench widens a score's interval to cover the rounds whose time it could not resolve;
    the store computed its own from the ratios alone, so the candidate's interval (which ranks
    it) was narrower than the measurement's: [12.8, 18.0] against [12.8, 209] in one evaluation.
    Both now follow one rule, and pooling keeps it for the old rounds."""
    from evoteam import stats

    run = await new_run(store)
    first = {"w1": rounds(15.0, 2.0, seed=1), "w2": rounds(3.0, 0.3, seed=2)}
    ranges = censored(first, {"w1": {0, 2, 3, 5, 6, 7, 8, 9}})
    want = stats.censored_score_estimate(first, ranges)
    plain = stats.score_estimate(first)
    assert want.hi > plain.hi * 1.5  # the case is one where it matters
    c = await verifier.record_candidate(measured(run.id, CODE, first, sample_ranges=ranges))
    assert c.score_interval == pytest.approx([want.lo, want.hi])
    # It ranks by the rounds' own interval: ranked by the covering one, a kernel the harness could
    # not resolve under load fell below a resolved copy of the baseline.
    middle = (want.lo + plain.lo) / 2  # above the covering lower bound, below the rounds' own
    steady = await verifier.record_candidate(measured(run.id, "a = 1\n", {"w1": rounds(middle, middle / 1000, seed=5),
                                                                          "w2": rounds(middle, middle / 1000, seed=6)}))
    assert want.lo < steady.score_interval[0] < plain.lo
    assert (await verifier.get_run(run.id)).best_candidate_id == c.id != steady.id
    assert (await verifier.get_candidate(c.id)).sample_ranges["w1"][1][0] == pytest.approx(first["w1"][0] * 3)
    second = {"w1": rounds(15.0, 2.0, seed=3), "w2": rounds(3.0, 0.3, seed=4)}  # all resolved
    pooled = await verifier.record_candidate(measured(run.id, CODE, second))
    both = {w: first[w] + second[w] for w in first}
    both_ranges = {"w1": (ranges["w1"][0] + second["w1"], ranges["w1"][1] + second["w1"])}
    again = stats.censored_score_estimate(both, both_ranges)
    assert pooled.id == c.id and pooled.n_measurements == 2
    assert pooled.score_interval == pytest.approx([again.lo, again.hi])
    assert again.hi > stats.score_estimate(both).hi
    # Each workload's pooled interval too: w1's as wide as its unresolved rounds allow.
    w1 = next(w for w in (await verifier.get_candidate(c.id)).workloads if w.workload == "w1")
    assert w1.speedup_interval[1] >= stats.ratio_interval(both_ranges["w1"][1]).hi


def test_ranges_must_fit_their_samples():
    samples = {"w1": [2.0, 3.0]}
    with pytest.raises(ValueError, match="a low and a high for each"):
        CandidateCreate(run_id="r", samples=samples, sample_ranges={"w1": ([1.0], [4.0])})
    with pytest.raises(ValueError, match="a low and a high for each"):
        CandidateCreate(run_id="r", samples=samples, sample_ranges={"w2": ([1.0, 1.0], [4.0, 4.0])})
    with pytest.raises(ValueError, match="hold its sample"):
        CandidateCreate(run_id="r", samples=samples, sample_ranges={"w1": ([2.5, 1.0], [4.0, 4.0])})


async def test_a_pooled_candidates_summary_shows_no_first_measurements_message(tmp_path):
    """After pooling, the summary showed the first measurement's message ("18.3× (16.3–22.9)")
    beside the pooled score and interval; and a one-line note twice (note and notes)."""
    from evoteam.servers.knowledge.local import LocalKnowledgeStore
    from evoteam.servers.knowledge.store import Actor

    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t", verifier=True)) as kb:
        run = await new_run(kb)
        first = measured(run.id, CODE, {"w1": rounds(4.0, 1.0, seed=1)}, notes="one matmul",
                         metrics={"message": "geomean speedup 4.1× (3.5–4.6)"})
        first.workloads[0].message = "time not resolved in 1 of 10 rounds"
        one = await kb.record_candidate(first)
        alone = (await kb.get_candidate(one.id)).summary()
        assert alone.metrics["message"].startswith("geomean") and alone.workloads[0].message
        assert alone.notes == "one matmul" and alone.note is None  # said once
        await kb.record_candidate(measured(run.id, CODE, {"w1": rounds(4.0, 1.0, seed=2)}))
        full = await kb.get_candidate(one.id)
        pooled = full.summary()
    assert pooled.n_measurements == 2
    assert "message" not in pooled.metrics and all(w.message is None for w in pooled.workloads)
    assert full.metrics["message"].startswith("geomean")  # detail keeps the record


async def test_a_busy_interval_is_compared_widened_not_ignored(store, verifier):
    """A busy kernel's interval is compared with another evaluation's widened by BUSY_SPREAD each
    way (separate evaluations moved by up to 2.5x under load): a quiet 10x after a busy first 1.5x
    is a new best (ignoring busy intervals, it read "within noise" of it, "decided by intervals";
    review 2026-12-04), a busy 1.6x is not, nor is a busy 4x; behind a busy best, a quiet copy of
    the baseline is worse than it, and a few-rounds 2x is too few, not within noise of x0."""
    from evoteam.stats import BUSY_SPREAD

    assert BUSY_SPREAD >= 2.5  # the largest gap measured between a busy and a quiet evaluation
    run = await new_run(store)

    async def add(code: str, center: float, metrics: dict, n: int = 10, spread: float | None = None) -> str:
        spread = center * 0.03 if spread is None else spread
        return (await verifier.record_candidate(measured(run.id, code, {"w": rounds(center, spread, n=n, seed=n)},
                                                         metrics=metrics))).id

    first = await add("a = 1\n", 1.5, BUSY)
    far_busy = await add("a = 3\n", 4.0, BUSY)
    close = await add("a = 2\n", 4.2, BUSY)
    points = {p.candidate_id: p for p in (await store.trajectory(run.id)).points}
    # 1.5x busy: within noise of x0 widened; 4x busy clears it even widened; 4.2x busy does not
    # clear that 4x widened (their own intervals overlap too: decided by them).
    assert not points[first].new_best and points[first].within_noise_of == "x0"
    assert points[far_busy].new_best and points[far_busy].decided_by == "intervals"
    assert not points[close].new_best and points[close].within_noise_of == far_busy
    # Behind the busy best (4.2x): a quiet copy of the baseline is apart even widened; a 2x from
    # three rounds is not known either way.
    copy = await add("a = 5\n", 1.0, QUIET)
    few = await add("a = 6\n", 2.0, BUSY, n=3)
    # A quiet 10x is apart from the busy 4x but within its widened interval: not told apart; a
    # quiet 15x clears it (ignoring busy intervals, a quiet 10x after a busy 1.5x read "within
    # noise" of it, "decided by intervals"; review 2026-12-04).
    ten = await add("a = 7\n", 10.0, QUIET)
    fifteen = await add("a = 4\n", 15.0, QUIET)
    points = {p.candidate_id: p for p in (await store.trajectory(run.id)).points}
    assert points[copy].best_so_far_id == close
    assert points[copy].worse_than == close and points[copy].decided_by == "intervals", points[copy]
    assert points[few].too_few_runs and points[few].within_noise_of is None, points[few]
    assert not points[ten].new_best and points[ten].within_noise_of == far_busy and points[ten].decided_by is None
    assert points[fifteen].new_best and points[fifteen].decided_by == "intervals"


async def test_a_pooled_candidates_summary_says_whether_any_measurement_was_busy(tmp_path):
    """The summary's contention was the first measurement's: "contended": false beside
    contended_measurements 1 (model-play 2026-12-04). Pooled, it is whether any was."""
    from evoteam.servers.knowledge.local import LocalKnowledgeStore
    from evoteam.servers.knowledge.store import Actor

    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="u", client="t", verifier=True)) as kb:
        run = await new_run(kb)
        one = await kb.record_candidate(measured(run.id, CODE, {"w1": rounds(4.0, 1.0, seed=1)}, metrics=QUIET))
        assert (await kb.get_candidate(one.id)).summary().metrics["contention"] == {"contended": False}
        await kb.record_candidate(measured(run.id, CODE, {"w1": rounds(4.0, 1.0, seed=2)}, metrics=BUSY))
        full = await kb.get_candidate(one.id)
    assert full.contended_measurements == 1 and full.summary().metrics["contention"] == {"contended": True}
    assert full.metrics["contention"]["contended"] is False  # detail keeps the first measurement's readings


async def test_a_runs_exact_best_is_read_with_its_runs_everywhere(store, verifier):
    """get_run says how many runs stand behind a best with a zero-width interval (best_runs), and
    the session's context reads it as the brief does: all its digits and its runs, not "0.381 (no
    interval)" beside a version gain called significant (review 2026-12-04)."""
    from evoteam.plugin.hooks import _summary

    run = await new_run(store, direction="minimize")
    await verifier.record_candidate(measured(run.id, "a = 1\n", {"program": [0.38100] * 5}))
    best = await verifier.record_candidate(measured(run.id, "a = 2\n", {"program": [0.38085] * 5}))
    got = await store.get_run(run.id)
    assert got.best_candidate_id == best.id and got.best_interval == [0.38085, 0.38085] and got.best_runs == 5
    _, _, context = await _summary(store, run.id, learnings_chars=0)
    # Every one of the five alike: exact, as evaluate and the brief say (the page said "the middle
    # ones alike" beside the tools' "exact"; model-play 2026-12-04).
    assert got.best_exact and "best so far 0.38085 (exact: every run alike)" in context, context
    one = await new_run(store, direction="minimize")
    await verifier.record_candidate(measured(one.id, "a = 1\n", {"program": [0.38100]}))
    assert (await store.get_run(one.id)).best_runs == 1
    # Said only where true: "best_exact": false on every run, exact or not, read as a claim
    # about the run (model-play 2026-12-04).
    assert (await store.get_run(one.id)).best_exact is None and (await store.get_run(run.id)).best_exact is True
    _, _, context = await _summary(store, one.id, learnings_chars=0)
    assert "best so far 0.381 (one measurement, no interval)" in context, context
    # Two runs apart: their range is no 95% interval, and the context says so.
    two = await new_run(store, direction="minimize")
    await verifier.record_candidate(measured(two.id, "a = 1\n", {"program": [0.38100, 0.38120]}))
    assert (await store.get_run(two.id)).best_runs == 2
    _, _, context = await _summary(store, two.id, learnings_chars=0)
    assert "best so far 0.3811 (0.381–0.3812, 2 runs: too few for a 95% interval)" in context, context


async def test_a_candidates_search_hit_reads_as_it_stands_now(store, verifier):
    """The search index keeps the title a candidate was recorded with; a hit shows its status and
    score as they stand after pooling (a failed re-measurement left "candidate PASSED score 8.99"
    on a candidate that no longer ranked; review 2026-12-04)."""
    run = await new_run(store)
    first = await verifier.record_candidate(measured(run.id, CODE, {"w": rounds(9.0, 0.3)}, notes="zebra tiling"))
    hit = (await store.search("zebra tiling", run_id=run.id, kinds=["candidate"])).items[0]
    assert hit.id == first.id and hit.title.startswith("candidate PASSED score 9")
    await verifier.record_candidate(measured(run.id, CODE, {}, status="INCORRECT_NUMERICAL"))
    hit = (await store.search("zebra tiling", run_id=run.id, kinds=["candidate"])).items[0]
    assert hit.id == first.id and hit.title.startswith("candidate INCORRECT_NUMERICAL"), hit.title


async def test_held_out_rounds_pool_only_within_one_held_out_set(store, verifier):
    """Two evaluation services (two secrets) draw other shapes under the same held-out workload
    names: the same code checked on each is two records, each set's rounds in its own interval;
    a second check on the same set pools (review 2026-12-04: they mixed into one interval)."""
    run = await new_run(store)
    def held(center, seed, held_set):
        return measured(run.id, CODE, {"heldout-1": rounds(center, 0.05, seed=seed)}, split="heldout",
                        metrics={"heldout_set": held_set})
    first = await verifier.record_candidate(held(2.0, 1, "hs_service"))
    other = await verifier.record_candidate(held(6.0, 2, "hs_local"))
    again = await verifier.record_candidate(held(2.0, 3, "hs_service"))
    assert other.id != first.id and again.id == first.id
    assert again.n_measurements == 2 and max(again.score_interval) < 3.0
    assert (await store.get_candidate(other.id)).n_measurements == 1 and min(other.score_interval) > 5.0


async def test_a_programs_few_runs_apart_are_too_few_for_a_95_percent_interval(store, verifier):
    """Two runs of a program that differ give [min, max], which covers 50%: read as a 95%
    interval, a second run of the same program was announced as a new best one time in six
    (review 2026-12-04). Under 5 runs the trajectory says too_few_runs, and so does its text; and
    it ranks after every candidate with a 95% interval, though its range is narrower and better
    (it ranked first by it: measuring more would have lost rank)."""
    run = await new_run(store, direction="minimize")
    steady = await verifier.record_candidate(measured(run.id, "a = 1\n", {"program": [0.44, 0.45, 0.45, 0.46, 0.45]}))
    two = await verifier.record_candidate(measured(run.id, "a = 2\n", {"program": [0.430, 0.432]}))
    assert two.score_interval == [0.430, 0.432] and two.score_interval[1] < steady.score_interval[0]
    assert two.runs == 2 and steady.runs is None
    by_id = {p.candidate_id: p for p in (await store.trajectory(run.id)).points}
    assert by_id[steady.id].new_best  # five runs below x0 (1.0): a new best
    assert by_id[two.id].best_so_far_id == steady.id and by_id[two.id].runs == 2
    assert not by_id[two.id].new_best and by_id[two.id].too_few_runs, by_id[two.id]
    assert (await store.get_run(run.id)).best_candidate_id == steady.id
    assert [c.id for c in await store.best_candidates(run.id, k=2)] == [steady.id, two.id]
    for _ in range(3):  # three more runs: five in all, and now a 95% interval
        await verifier.record_candidate(measured(run.id, "a = 2\n", {"program": [0.431]}))
    by_id = {p.candidate_id: p for p in (await store.trajectory(run.id)).points}
    assert by_id[two.id].new_best and by_id[two.id].too_few_runs is None and by_id[two.id].runs is None
    assert (await store.get_run(run.id)).best_candidate_id == two.id


@pytest.mark.parametrize("direction", ["maximize", "minimize"])
async def test_a_runs_best_is_read_from_an_index_in_rank_order(direction, tmp_path):
    """Rankings order by spread_unknown, then rank_score: an index in that order per direction
    keeps a run's best an index read, not a sort of the whole run (the index of rank_score alone
    made it about 100x slower at 40k candidates; review 2026-12-04). SQLite's plan, checked here;
    PostgreSQL's uses the same indexes (benchmarks/bench_scale.py times both)."""
    import sqlite3

    from evoteam.servers.knowledge import readsql
    from evoteam.servers.knowledge.local import LocalKnowledgeStore
    from evoteam.servers.knowledge.store import Actor

    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="t", verifier=True)) as kb:
        run = await new_run(kb, direction=direction)
        for i in range(20):
            await kb.record_candidate(measured(run.id, f"a = {i}\n", {"program": [1.0 + i / 100] * (1 + i % 5)}))
    with sqlite3.connect(tmp_path / "kb.db") as conn:
        listing = (f"SELECT * FROM candidates WHERE run_id = ? AND {readsql.RANKED} AND split = 'dev' "
                   f"ORDER BY {readsql.rank_order(direction)} LIMIT 5")
        for sql in (readsql.best_ranked(direction), listing):
            plan = " | ".join(r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + sql, (run.id,)))
            assert f"candidates_rank_{direction[:3]}" in plan and "TEMP B-TREE FOR ORDER BY" not in plan, plan


async def test_a_kernels_rounds_too_few_for_an_interval_rank_after_one_that_has_it(store, verifier):
    """A kernel's stored interval reads as 95%, but its own rounds may be too few for one: one round
    whose time was below the resolution stored [1.2, 4.0] and ranked first by its 2.3, ahead of ten
    rounds at 2.0 (review 2026-12-04). Its rounds decide the mark, as a program's runs do, and the
    trajectory reads two rounds apart from the best as too few runs, not as an interval that cleared."""
    run = await new_run(store)
    ten = await verifier.record_candidate(measured(run.id, "a = 1\n", {"w": rounds(2.0, 0.02, n=10)}))
    unresolved = await verifier.record_candidate(measured(run.id, "a = 2\n", {"w": [2.3]},
                                                          sample_ranges={"w": ([1.2], [4.0])}))
    two = await verifier.record_candidate(measured(run.id, "a = 3\n", {"w": [2.4, 2.5]}))
    assert unresolved.score_interval[0] < unresolved.score_interval[1] and unresolved.runs == 1 and ten.runs is None
    assert two.runs == 2  # a kernel counts its rounds
    assert [c.id for c in await store.best_candidates(run.id, k=3)][0] == ten.id
    assert (await store.get_run(run.id)).best_candidate_id == ten.id
    points = {p.candidate_id: p for p in (await store.trajectory(run.id)).points}
    assert points[unresolved.id].within_noise_of == ten.id  # the range its unresolved round allows covers 2.0
    assert points[two.id].too_few_runs and not points[two.id].new_best


async def test_get_run_names_single_runs_that_read_beyond_its_measured_best(store, verifier):
    """A program's single run better than the measured best ranks after it: best_candidates and
    get_run's best did not show it, and a supervisor counted the version a stall (model-play
    2026-12-04). get_run names such candidates, best first, and the session's context says so."""
    from evoteam.plugin.hooks import _summary

    run = await new_run(store, direction="minimize")
    best = await verifier.record_candidate(measured(run.id, "a = 1\n", {"program": [0.45, 0.44, 0.46, 0.45, 0.45]}))
    assert (await store.get_run(run.id)).leads_from_too_few_runs == []
    worse = await verifier.record_candidate(measured(run.id, "a = 2\n", {"program": [0.47]}))
    lead = await verifier.record_candidate(measured(run.id, "a = 3\n", {"program": [0.40]}))
    closer = await verifier.record_candidate(measured(run.id, "a = 4\n", {"program": [0.43]}))
    got = await store.get_run(run.id)
    assert got.best_candidate_id == best.id
    # Each with its score and runs: listed as bare ids, each cost a model a get_candidate (mp29).
    assert [(x.candidate_id, x.score, x.runs) for x in got.leads_from_too_few_runs] == [(lead.id, 0.40, 1),
                                                                                         (closer.id, 0.43, 1)]
    assert worse.id not in [x.candidate_id for x in got.leads_from_too_few_runs]
    # A bundle or server from before leads had scores gives bare ids: they still read, and are said as ids.
    from evoteam.servers.knowledge.models import Run

    old = Run.model_validate(got.model_dump() | {"leads_from_too_few_runs": [lead.id]})
    assert old.leads_from_too_few_runs[0].candidate_id == lead.id and old.leads_from_too_few_runs[0].score is None
    _, _, context = await _summary(store, run.id, learnings_chars=0)
    assert f"{lead.id} 0.4 (1 run), {closer.id} 0.43 (1 run) read better from too few runs" in context, context
    # best_candidates names those it does not list (k=2 hid the run's true best; mp28, 2026-12-04).
    from mcp import Client

    from evoteam.config import load_settings
    from evoteam.servers.knowledge.server import build_server

    async with Client(build_server(load_settings(), store)) as client:
        for k, hidden in ((1, [lead.id, closer.id]), (2, [closer.id]), (4, [])):
            listed = (await client.call_tool("best_candidates", {"run_id": run.id, "k": k})).structured_content
            assert [c["id"] for c in listed["items"]][:1] == [best.id]
            assert [x["candidate_id"] for x in listed.get("leads_from_too_few_runs", [])] == hidden, (k, listed)
            # Those left out below the k listed are said too (five of seven came back silently; mp73).
            more = len(listed["items"]) == k and k < 4
            assert listed.get("note") == (f"the {k} best; more rank below them (k up to 50 lists them)" if more
                                          else None), (k, listed)
        # A run none of whose candidates ranks says so, not a bare {"run_id": ...} (mp53).
        failed = await new_run(store)
        await verifier.record_candidate(measured(failed.id, CODE, {"w": [1.0]}, status="RUNTIME_ERROR"))
        empty = (await client.call_tool("best_candidates", {"run_id": failed.id})).structured_content
        assert empty["items"] == [] and empty["note"].startswith("no candidate of this run ranks"), empty


async def test_measurements_of_one_code_that_drift_apart_widen_its_interval(store, verifier):
    """Identical code read 3.79x (3.50-4.92), then 2.69x (2.53-3.01), on a quiet machine (mp47):
    the rounds pooled as one sample gave an interval between the two that neither process showed,
    and its lower end ranked the code. Separate measurements that differ by more than their own
    intervals allow now widen the pooled interval to their random-effects interval, and the rank
    follows it; a third that agrees with one of them narrows it again."""
    from evoteam.servers.knowledge import measurements
    run = await new_run(store)
    fast = {"w1": rounds(3.8, 0.1, 20, seed=1), "w2": rounds(3.8, 0.1, 20, seed=2)}
    slow = {"w1": rounds(2.7, 0.05, 20, seed=3), "w2": rounds(2.7, 0.05, 20, seed=4)}
    first = await verifier.record_candidate(measured(run.id, CODE, fast))
    assert first.score_interval[0] > 3.6  # its own, tight
    both = await verifier.record_candidate(measured(run.id, CODE, slow))
    full = await verifier.get_candidate(both.id)
    as_one_sample = measurements.estimate(full.samples)
    lo, hi = both.score_interval
    assert both.n_measurements == 2 and lo < 2.7 and hi > 3.8, both.score_interval  # each read lies inside
    assert lo < as_one_sample.lo and hi > as_one_sample.hi and both.score == pytest.approx(as_one_sample.value)
    assert both.rank_score == pytest.approx(lo)
    assert [h["interval"] is not None for h in full.metrics["measurements"]] == [True, True]
    assert full.metrics["measurements_disagree"] is True  # the bench's reply says why the interval grew
    third = await verifier.record_candidate(measured(run.id, CODE, {"w1": rounds(2.75, 0.05, 20, seed=5),
                                                                     "w2": rounds(2.75, 0.05, 20, seed=6)}))
    assert third.n_measurements == 3 and third.score_interval[1] - third.score_interval[0] < hi - lo


async def test_measurements_that_agree_keep_the_pooled_rounds_interval(store, verifier):
    """Within what each measurement's interval allows, separate measurements are one sample of
    rounds, as before: their pooled interval is the rounds', not widened."""
    from evoteam.servers.knowledge import measurements
    run = await new_run(store)
    for seed in range(3):
        c = await verifier.record_candidate(measured(run.id, CODE, {"w1": rounds(4.0, 0.4, 20, seed=seed)}))
    full = await verifier.get_candidate(c.id)
    own = measurements.estimate(full.samples)
    assert c.n_measurements == 3 and c.score_interval == pytest.approx([own.lo, own.hi])
    assert "measurements_disagree" not in full.metrics


async def test_a_programs_runs_pool_as_its_samples_however_they_differ(store, verifier):
    """A program's runs are its scores, each one a draw already: measurements far apart are what
    its interval over runs says, with nothing added."""
    from evoteam.servers.knowledge import measurements
    run = await new_run(store)
    await verifier.record_candidate(measured(run.id, CODE, {"program": [0.40, 0.41, 0.40, 0.41, 0.40]}))
    c = await verifier.record_candidate(measured(run.id, CODE, {"program": [0.60, 0.61, 0.60, 0.61, 0.60]}))
    full = await verifier.get_candidate(c.id)
    own = measurements.estimate(full.samples)
    assert c.n_measurements == 2 and c.score_interval == pytest.approx([own.lo, own.hi])


async def test_a_drifting_candidate_ranks_alike_after_export_and_import(tmp_path, verifier):
    """The import re-ranks a candidate from its rounds: it reads the drift between its measurements
    from their kept history too, so it does not rank above where it ranked at home."""
    from evoteam.servers.knowledge.export import export_run, import_run
    from evoteam.servers.knowledge.local import LocalKnowledgeStore
    from evoteam.servers.knowledge.store import Actor

    run = await new_run(verifier)
    for center, seed in ((3.8, 1), (2.7, 2)):
        c = await verifier.record_candidate(measured(run.id, CODE, {"w": rounds(center, 0.05, 20, seed=seed)}))
    from evoteam.servers.knowledge import measurements
    as_one_sample = measurements.estimate((await verifier.get_candidate(c.id)).samples)
    assert c.rank_score < as_one_sample.lo  # widened for the drift at home
    await export_run(verifier, run.id, tmp_path / "out")
    async with LocalKnowledgeStore.open(tmp_path / "copy.db", Actor(user="x", verifier=True)) as other:
        await import_run(other, tmp_path / "out", trust_scores=True)
        got = await other.get_candidate(c.id)
        assert got.rank_score == pytest.approx(c.rank_score) and got.score_interval == pytest.approx(c.score_interval)


async def test_a_busy_measurement_does_not_place_the_drift_widening(store, verifier):
    """Load widens a busy measurement's interval where it counts (3x each way); it does not pull
    the pooled interval toward its reading: a busy 39.5x beside a quiet 15.9x is left out of the
    drift between measurements, and two quiet ones that agree keep their rounds' interval."""
    from evoteam.servers.knowledge import measurements
    run = await new_run(store)
    quiet = {"w": rounds(15.9, 0.2, 20, seed=1)}
    await verifier.record_candidate(measured(run.id, CODE, quiet))
    busy = measured(run.id, CODE, {"w": rounds(39.5, 0.5, 20, seed=2)}, metrics={"contention": {"contended": True}})
    c = await verifier.record_candidate(busy)
    full = await verifier.get_candidate(c.id)
    own = measurements.estimate(full.samples)
    assert c.n_measurements == 2 and c.score_interval == pytest.approx([own.lo, own.hi])
    assert [bool(h["contended"]) for h in full.metrics["measurements"]] == [False, True]
    assert "measurements_disagree" not in full.metrics


async def test_the_disagreement_mark_follows_the_measurements_and_a_row_without_history_gives_none(store, verifier):
    """The mark is read afresh at every pooled write: a failed measurement clears it (the candidate
    no longer ranks), as does a history that no longer disagrees. A row measured more than once
    whose history is gone (an older bundle) has no interval of its first measurement to weigh."""
    import json

    from evoteam.servers.knowledge import measurements
    run = await new_run(store)
    await verifier.record_candidate(measured(run.id, CODE, {"w": rounds(3.8, 0.05, 20, seed=1)}))
    c = await verifier.record_candidate(measured(run.id, CODE, {"w": rounds(2.7, 0.05, 20, seed=2)}))
    assert (await verifier.get_candidate(c.id)).metrics[measurements.DISAGREE] is True
    c = await verifier.record_candidate(measured(run.id, CODE, {}, status="INCORRECT_NUMERICAL"))
    assert measurements.DISAGREE not in (await verifier.get_candidate(c.id)).metrics

    other = "def run(x):\n    return x + 1\n"
    await verifier.record_candidate(measured(run.id, other, {"w": rounds(3.8, 0.05, 20, seed=3)}))
    row = await verifier.record_candidate(measured(run.id, other, {"w": rounds(2.7, 0.05, 20, seed=4)}))
    full = await verifier.get_candidate(row.id)
    assert full.metrics[measurements.DISAGREE] is True
    # What pooling makes of the same row once its history is gone: the first entry gets no interval.
    from evoteam.servers.knowledge.pooling import pool
    history_gone = dict(full.metrics)
    history_gone.pop("measurements")
    fake_row = {"samples": json.dumps(full.samples), "sample_ranges": None, "status": "PASSED", "flagged": 0,
                "metrics": json.dumps(history_gone), "created_at": "2026-12-06T00:00:00", "score": full.score,
                "score_lo": full.score_interval[0], "score_hi": full.score_interval[1], "n_measurements": 2,
                "user": "u", "role": None, "workloads": "[]", "id": full.id}

    class Capture:
        async def execute(self, sql, params):
            self.params = params

    conn = Capture()
    await pool(conn, fake_row, measured(run.id, other, {"w": rounds(2.7, 0.05, 20, seed=5)}), "maximize",
               {"created_at": "2026-12-06T00:01:00", "user": "u", "role": None})
    kept = json.loads(conn.params[9])["measurements"]
    assert kept[0]["interval"] is None and kept[1]["interval"] is not None
    assert measurements.DISAGREE not in json.loads(conn.params[9])  # one interval: nothing to weigh


async def test_a_pooled_workloads_times_say_which_measurement_they_are_from(store, verifier):
    """A pooled workload's speedup is every measurement's rounds; its milliseconds are the newest
    measurement's, and it says so (mp51 read them beside the pooled speedup as pooled times)."""
    run = await new_run(store)

    def with_ms(center: float, ms: float, seed: int) -> CandidateCreate:
        spec = measured(run.id, CODE, {"w": rounds(center, 0.05, 20, seed=seed)})
        return spec.model_copy(update={"workloads": [w.model_copy(update={"candidate_ms": ms, "baseline_ms": 3 * ms})
                                                     for w in spec.workloads]})

    first = await verifier.record_candidate(with_ms(3.0, 1.0, 1))
    assert first.workloads[0].ms_from_measurement is None  # one measurement: nothing to tell apart
    pooled = await verifier.record_candidate(with_ms(3.0, 1.2, 2))
    (w,) = pooled.workloads
    assert pooled.n_measurements == 2 and w.candidate_ms == 1.2 and w.ms_from_measurement == 2 and w.rounds == 40
    # A measurement that gives no times (a failure) keeps the last times and says whose they are; a
    # first measurement's times kept so are marked as its own.
    other = "def run(x):\n    return x - 1\n"
    await verifier.record_candidate(with_ms(3.0, 1.0, 3).model_copy(update={"code": other,
                                                                            "code_hash": code_hash(other)}))
    failed = measured(run.id, other, {}, status="RUNTIME_ERROR")
    kept = await verifier.record_candidate(failed)
    (w,) = kept.workloads
    assert kept.n_measurements == 2 and w.candidate_ms == 1.0 and w.ms_from_measurement == 1, w
    # One time given alone does not pair with the other's older one.
    half = with_ms(3.0, 1.4, 4)
    half = half.model_copy(update={"workloads": [w.model_copy(update={"baseline_ms": None}) for w in half.workloads]})
    (w,) = (await verifier.record_candidate(half)).workloads
    assert w.candidate_ms == 1.4 and w.baseline_ms is None and w.ms_from_measurement == 3


async def test_a_measurement_in_copies_ranks_alike_after_export_and_import(tmp_path, verifier):
    """One measurement timed in copies ranks at home by the bench's t interval where it is wider
    than its rounds' (columns); the import re-ranked it from its rounds alone, so it ranked higher
    abroad than at home."""
    from evoteam.servers.knowledge.export import export_run, import_run
    from evoteam.servers.knowledge.local import LocalKnowledgeStore
    from evoteam.servers.knowledge.store import Actor

    run = await new_run(verifier)
    samples = {"w": rounds(3.0, 0.05, 20, seed=3)}
    c = await verifier.record_candidate(measured(run.id, CODE, samples,
                                                 metrics={"processes_per_side": 3, "score_interval": [2.2, 3.9]}))
    from evoteam.servers.knowledge import measurements
    own = measurements.estimate((await verifier.get_candidate(c.id)).samples)
    assert c.rank_score == pytest.approx(2.2) and own.lo > 2.8  # ranked by the copies' t interval at home
    await export_run(verifier, run.id, tmp_path / "out")
    async with LocalKnowledgeStore.open(tmp_path / "copy.db", Actor(user="x", verifier=True)) as other:
        await import_run(other, tmp_path / "out", trust_scores=True)
        got = await other.get_candidate(c.id)
        assert got.rank_score == pytest.approx(c.rank_score) and got.score_interval == pytest.approx([2.2, 3.9])
