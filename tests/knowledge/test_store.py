"""The store's behaviour, run on both the embedded file and the shared server (see conftest)."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import pytest

from evoteam.servers.knowledge.errors import Forbidden, Invalid, NotFound, TooLarge
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.models import (
    ArtifactCreate,
    CandidateCreate,
    CostCreate,
    HistoryEntryCreate,
    LearningCreate,
    RunCreate,
    WorkloadResult,
)
from evoteam.servers.knowledge.store import Actor


async def new_run(store, **kw):
    spec = {"goal": "pack 26 circles", "direction": "maximize", "x0": 1.0, "best_known": 2.635983, **kw}
    return await store.start_run(RunCreate(**spec))


async def test_run_lifecycle_and_provenance(store):
    run = await new_run(store, budget_usd=5)
    assert run.status == "active" and run.budget_usd == 5
    # On the shared server the user comes from the token, never from the client's own claim.
    assert run.provenance.user == "tester"
    got = await store.get_run(run.id)
    assert got.goal == "pack 26 circles"
    updated = await store.update_run(run.id, status="paused", current_version=2)
    assert (updated.status, updated.current_version) == ("paused", 2)
    page = await store.list_runs(status="paused")
    assert [r.id for r in page.items] == [run.id]
    with pytest.raises(NotFound, match="list_runs"):
        await store.get_run("run_doesnotexist")


async def test_runs_end_with_a_reason_and_descend(store):
    first = await new_run(store)
    ended = await store.update_run(first.id, status="finished", reason="plateaued at 1.9 after 40 candidates")
    assert (ended.status, ended.status_reason) == ("finished", "plateaued at 1.9 after 40 candidates")
    assert (await store.get_run(first.id)).status_reason == "plateaued at 1.9 after 40 candidates"
    second = await new_run(store, seeded_from=first.id)
    assert second.seeded_from == first.id and (await store.get_run(second.id)).seeded_from == first.id
    resumed = await store.update_run(first.id, status="active")
    assert resumed.status_reason is None  # a new status replaces the old one's reason
    with pytest.raises(NotFound):
        await new_run(store, seeded_from="run_doesnotexist")


async def test_best_score_and_ndg_follow_direction(store, verifier):
    run = await new_run(store, direction="minimize", x0=0.5, best_known=0.380859, goal="erdos overlap")
    for score in (0.45, 0.40, 0.42):
        await verifier.record_candidate(CandidateCreate(run_id=run.id, code="x", status="PASSED", score=score,
                                                        verified=True))
    await verifier.record_candidate(CandidateCreate(run_id=run.id, code="y", status="INCORRECT_NUMERICAL",
                                                    score=0.1, verified=True))
    # Neither a self-reported score nor a flagged measurement ranks, however good.
    await store.record_candidate(CandidateCreate(run_id=run.id, code="z", status="PASSED", score=0.2))
    await verifier.record_candidate(CandidateCreate(run_id=run.id, code="w", status="PASSED", score=0.3,
                                                    verified=True, flagged=True))
    got = await store.get_run(run.id)
    assert got.best_score == pytest.approx(0.40)
    assert got.ndg == pytest.approx(100 * (0.5 - 0.40) / (0.5 - 0.380859))
    best = await store.best_candidates(run.id, k=2)
    assert [c.score for c in best] == [pytest.approx(0.40), pytest.approx(0.42)]
    assert all(c.verified for c in best)
    traj = await store.trajectory(run.id)
    assert [p.best_so_far for p in traj.points] == [0.45, 0.40, 0.40, 0.40, 0.40, 0.40]
    assert [p.verified for p in traj.points] == [True, True, True, True, False, True]
    assert traj.best_score == pytest.approx(0.40)


def test_a_best_equal_to_the_start_gains_nothing():
    """x0 stored with fewer digits than the score of the program it names: no gain of 1e-13."""
    from evoteam.servers.knowledge.readsql import normalised_discovery_gain
    for direction, start, sota in (("maximize", 1.0, 2.0), ("minimize", 0.5, 0.380859)):
        assert normalised_discovery_gain(direction, start, sota, start + 1e-16) == 0.0
        assert str(normalised_discovery_gain(direction, start, sota, start * (1 + 1e-15))) == "0.0"  # not -0.0
        assert normalised_discovery_gain(direction, start, sota, sota) == pytest.approx(100.0)


async def test_a_self_awarded_score_is_refused_or_never_ranks(store):
    """The attack: record_candidate(status=PASSED, score=1000) as an ordinary writer."""
    run = await new_run(store)
    with pytest.raises(Forbidden, match="bench"):
        await store.record_candidate(CandidateCreate(run_id=run.id, code="x", status="PASSED", score=1000,
                                                     verified=True))
    cand = await store.record_candidate(CandidateCreate(run_id=run.id, code="x", status="PASSED", score=1000))
    assert cand.verified is False
    got = await store.get_run(run.id)
    assert got.best_score is None and got.best_candidate_id is None and got.ndg is None
    assert await store.best_candidates(run.id) == []
    traj = await store.trajectory(run.id)
    assert traj.best_score is None and traj.points[0].best_so_far is None
    assert (await store.list_candidates(run.id)).items[0].score == 1000  # still listed, as a claim


async def test_learnings_supersede_and_document(store):
    run = await new_run(store)
    cand = await store.record_candidate(CandidateCreate(run_id=run.id, code="c", status="PASSED", score=2.1))
    old = await store.add_learning(LearningCreate(run_id=run.id, text="grid layout plateaus at 2.1",
                                                  kind="dead_end", evidence=[cand.id], confidence=0.7))
    new = await store.add_learning(LearningCreate(run_id=run.id, text="grid plateaus at 2.10; hex escapes it",
                                                  kind="dead_end", supersedes=old.id))
    await store.add_learning(LearningCreate(run_id=run.id, text="SLSQP polish adds 0.02", kind="technique"))
    current = await store.list_learnings(run.id)
    assert {x.id for x in current.items} == {new.id, current.items[-1].id} and current.total == 2
    everything = await store.list_learnings(run.id, include_superseded=True)
    assert everything.total == 3
    assert next(x for x in everything.items if x.id == old.id).superseded_by == new.id
    doc = await store.render_learnings(run.id)
    assert "hex escapes it" in doc.markdown and "plateaus at 2.1\n" not in doc.markdown
    assert doc.markdown.index("Techniques") < doc.markdown.index("Dead ends")
    with pytest.raises(Invalid, match="already superseded"):
        await store.add_learning(LearningCreate(run_id=run.id, text="again", supersedes=old.id))
    with pytest.raises(NotFound):
        await store.add_learning(LearningCreate(run_id=run.id, text="x", evidence=["cand_nope"]))
    with pytest.raises(Invalid):
        await store.add_learning(LearningCreate(run_id=run.id, text="x", evidence=["not-an-id"]))


async def test_learnings_document_is_bounded_and_points_to_search(store):
    run = await new_run(store)
    for i in range(40):
        await store.add_learning(LearningCreate(run_id=run.id, text=f"observation number {i} " + "x" * 150))
    doc = await store.render_learnings(run.id, max_chars=2000)
    assert doc.truncated and len(doc.markdown) < 2300
    assert doc.total == 40 and 0 < doc.shown < 40
    assert "use `search`" in doc.markdown


async def test_evidence_is_linked_in_the_document(store):
    run = await new_run(store)
    cand = await store.record_candidate(CandidateCreate(run_id=run.id, code="c", status="PASSED", score=2.0))
    await store.add_learning(LearningCreate(run_id=run.id, text="hexagonal start helps", evidence=[cand.id]))
    assert f"`{cand.id}`" in (await store.render_learnings(run.id)).markdown


async def test_history(store):
    run = await new_run(store)
    # An empty history says so and nothing else; one with entries says its verdicts are as
    # written then (a model read an entry's "significant" as current after a re-measurement).
    assert "as written then" not in (await store.render_history(run.id)).markdown
    await store.add_history(HistoryEntryCreate(run_id=run.id, team_version=1, observed_behaviour="3 roles tuned tiles",
                                               diagnosis="micro-optimising", design_change="add a Challenger"))
    await store.add_history(HistoryEntryCreate(run_id=run.id, team_version=2, outcome="best 2.5"))
    page = await store.list_history(run.id)
    assert [h.team_version for h in page.items] == [1, 2]
    doc = await store.render_history(run.id)
    assert doc.entries == 2 and "micro-optimising" in doc.markdown and "team v2" in doc.markdown
    assert "as written then; `run_report` gives the current ones" in doc.markdown
    with pytest.raises(Invalid):
        await store.add_history(HistoryEntryCreate(run_id=run.id))


async def test_artifacts_content_addressed(store):
    run = await new_run(store)
    a = await store.put_artifact(ArtifactCreate(run_id=run.id, name="profile.txt", kind="profile",
                                                text="hot loop: 80% in pairwise distance"))
    b = await store.put_artifact(ArtifactCreate(run_id=run.id, name="profile copy.txt", kind="profile",
                                                text="hot loop: 80% in pairwise distance"))
    assert a.sha256 == b.sha256 == hashlib.sha256(b"hot loop: 80% in pairwise distance").hexdigest()
    assert a.id != b.id
    raw = bytes(range(256))
    c = await store.put_artifact(ArtifactCreate(run_id=run.id, name="trace.bin",
                                                content_base64=base64.b64encode(raw).decode()))
    got = await store.get_artifact(c.id)
    assert not got.is_text and base64.b64decode(got.content_base64) == raw
    assert (await store.get_artifact(a.id)).text.startswith("hot loop")
    listing = await store.list_artifacts(run.id, kind="profile")
    assert listing.total == 2


@pytest.mark.parametrize("name", ["../../x", "/etc/passwd", "a/b.txt", "..", ".hidden", "a\\b", "x\n.txt"])
async def test_path_like_artifact_names_are_refused(store, name):
    run = await new_run(store)
    with pytest.raises(Invalid, match="not allowed"):
        await store.put_artifact(ArtifactCreate(run_id=run.id, name=name, text="x"))
    assert (await store.list_artifacts(run.id)).total == 0


async def test_oversized_artifact_is_refused_clearly(store):
    run = await new_run(store)
    big = "x" * (4 * 1024 * 1024 + 1)
    with pytest.raises(TooLarge, match="limit"):
        await store.put_artifact(ArtifactCreate(run_id=run.id, name="big.txt", text=big))
    assert (await store.list_artifacts(run.id)).total == 0


async def test_candidates_and_parents(store):
    run = await new_run(store)
    parent = await store.record_candidate(CandidateCreate(
        run_id=run.id, code="def f(): pass", status="PASSED", score=1.5, metrics={"sum_radii": 1.5},
        workloads=[WorkloadResult(workload="w0", status="PASSED", speedup=1.5)], notes="baseline grid"))
    child = await store.record_candidate(CandidateCreate(
        run_id=run.id, code="def f(): return 1", status="PASSED", score=2.0, parent_id=parent.id,
        documents_used=["doc_1"], cost_usd=0.12))
    got = await store.get_candidate(child.id)
    assert got.parent_id == parent.id and got.documents_used == ["doc_1"] and got.cost_usd == 0.12
    assert (await store.get_candidate(parent.id)).workloads[0].speedup == 1.5
    with pytest.raises(NotFound):
        await store.record_candidate(CandidateCreate(run_id=run.id, code="x", parent_id="cand_missing"))
    with pytest.raises(Invalid):
        await store.record_candidate(CandidateCreate(run_id=run.id))
    # Lineage crosses runs of one project (a second engineer builds on the first one's best).
    other = await new_run(store)
    grandchild = await store.record_candidate(CandidateCreate(run_id=other.id, code="x", parent_id=parent.id))
    assert grandchild.run_id == other.id and grandchild.parent_id == parent.id
    page = await store.list_candidates(run.id)
    assert [c.id for c in page.items] == [parent.id, child.id]


async def test_lineage_never_crosses_projects(tmp_path):
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="tester", client="pytest")) as store:
        mine = await store.start_run(RunCreate(goal="mine", project="a"))
        theirs = await store.start_run(RunCreate(goal="theirs", project="b"))
        parent = await store.record_candidate(CandidateCreate(run_id=theirs.id, code="p"))
        with pytest.raises(Invalid, match="another project"):
            await store.record_candidate(CandidateCreate(run_id=mine.id, code="x", parent_id=parent.id))
        with pytest.raises(Invalid, match="another project"):
            await store.start_run(RunCreate(goal="seeded", project="a", seeded_from=theirs.id))
        assert (await store.list_candidates(mine.id)).total == 0
        assert (await store.list_runs()).total == 2


def test_nan_scores_never_reach_the_store():
    with pytest.raises(ValueError, match="finite"):
        CandidateCreate(run_id="run_x", code="x", score=float("nan"))


@pytest.mark.parametrize("query", [
    'hexagonal AND "quoted', "NOT", "col:value", "(((", "*", 'a" OR "b', "NEAR(x y)", "-", "''", "ünïcödé lattice",
    "",
])
async def test_any_text_is_a_valid_query(store, query):
    run = await new_run(store)
    await store.add_learning(LearningCreate(run_id=run.id, text="hexagonal lattice start beats random"))
    page = await store.search(query, run_id=run.id)
    assert page.total >= 0


async def test_search_ranks_and_filters(store):
    run = await new_run(store)
    await store.add_learning(LearningCreate(run_id=run.id, text="hexagonal lattice initialisation beats random"))
    await store.add_history(HistoryEntryCreate(run_id=run.id, diagnosis="search exhausted near the lattice"))
    await store.put_artifact(ArtifactCreate(run_id=run.id, name="notes.md", text="lattice spacing 0.19"))
    await store.record_candidate(CandidateCreate(run_id=run.id, code="x", notes="lattice plus SLSQP"))
    page = await store.search("lattice", run_id=run.id)
    assert page.total == 4 and {h.kind for h in page.items} == {"learning", "history", "artifact", "candidate"}
    only = await store.search("lattice", run_id=run.id, kinds=["artifact"])
    assert [h.kind for h in only.items] == ["artifact"] and "[lattice]" in only.items[0].snippet
    # All words first; when nothing has them all, any word.
    assert (await store.search("hexagonal initialisation", run_id=run.id)).total == 1
    assert (await store.search("hexagonal zebra", run_id=run.id)).total == 1


async def test_search_hits_take_turns_by_kind_and_name_their_owner(store):
    run = await new_run(store)
    for i in range(12):  # one evaluation after another, each note stronger for bm25 than the learning
        await store.record_candidate(CandidateCreate(run_id=run.id, code=f"v{i}", notes=f"tiled loop, tiled {i}"))
    lesson = await store.add_learning(LearningCreate(run_id=run.id, text="a tiled loop never beats one BLAS call "
                                                                         "here; stop trying block sizes"))
    page = await store.search("tiled", run_id=run.id, limit=3)
    assert lesson.id in [h.id for h in page.items]
    assert {h.owner for h in page.items} == {"tester"}
    seen, cursor = [], None
    while True:  # pages still cover every match once
        page = await store.search("tiled", run_id=run.id, limit=5, cursor=cursor)
        seen += [h.id for h in page.items]
        if not (cursor := page.next_cursor):
            break
    assert len(seen) == len(set(seen)) == 13


async def test_pagination(store):
    run = await new_run(store)
    for i in range(7):
        await store.add_learning(LearningCreate(run_id=run.id, text=f"fact {i}"))
    seen, cursor = [], None
    while True:
        page = await store.list_learnings(run.id, limit=3, cursor=cursor)
        assert page.total == 7
        seen += [x.text for x in page.items]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == [f"fact {i}" for i in range(7)]
    with pytest.raises(Invalid, match="cursor"):
        await store.list_learnings(run.id, cursor="garbage!")
    with pytest.raises(Invalid, match="limit"):
        await store.list_learnings(run.id, limit=0)


async def test_idempotent_retries_do_not_duplicate(store):
    run = await new_run(store)
    first = await store.add_learning(LearningCreate(run_id=run.id, text="once", idempotency_key="k1"))
    again = await store.add_learning(LearningCreate(run_id=run.id, text="once", idempotency_key="k1"))
    assert first.id == again.id and (await store.list_learnings(run.id)).total == 1
    c1 = await store.record_candidate(CandidateCreate(run_id=run.id, code="x", idempotency_key="c1"))
    c2 = await store.record_candidate(CandidateCreate(run_id=run.id, code="x", idempotency_key="c1"))
    assert c1.id == c2.id and (await store.list_candidates(run.id)).total == 1
    with pytest.raises(Invalid, match="already used"):
        await store.add_history(HistoryEntryCreate(run_id=run.id, outcome="x", idempotency_key="k1"))


async def test_costs_and_spend(store):
    run = await new_run(store, budget_usd=2.0)
    a = store.with_actor(store.actor.model_copy(update={"role": "Profiler", "team_version": 1}))
    b = store.with_actor(store.actor.model_copy(update={"role": "Challenger", "team_version": 1}))
    await a.record_cost(CostCreate(run_id=run.id, usd=0.5, source="sdk_result"))
    await a.record_cost(CostCreate(run_id=run.id, usd=0.25, source="sdk_result"))
    await b.record_cost(CostCreate(run_id=run.id, usd=0.75, source="transcript", idempotency_key="t1"))
    await b.record_cost(CostCreate(run_id=run.id, usd=0.75, source="transcript", idempotency_key="t1"))
    spend = await store.spend(run.id)
    assert spend.spent_usd == pytest.approx(1.5) and spend.left_usd == pytest.approx(0.5)
    assert {(line.role, line.usd) for line in spend.lines} == {("Profiler", 0.75), ("Challenger", 0.75)}
    assert (await store.get_run(run.id)).spent_usd == pytest.approx(1.5)
    assert len(await store.list_costs(run.id)) == 3


async def test_role_provenance_is_recorded(store):
    run = await new_run(store)
    role_store = store.with_actor(store.actor.model_copy(update={"role": "Workload Analyst", "team_version": 3}))
    item = await role_store.add_learning(LearningCreate(run_id=run.id, text="long KV dominates"))
    assert (item.provenance.role, item.provenance.team_version) == ("Workload Analyst", 3)
    assert "by Workload Analyst" in (await store.render_learnings(run.id)).markdown


async def test_words_in_most_entries_are_treated_as_stopwords(tmp_path):
    from evoteam.servers.knowledge.local import LocalKnowledgeStore

    async with LocalKnowledgeStore.open(tmp_path / "kb.db") as store:
        run = await new_run(store)
        for i in range(1100):
            extra = " occupancy" if i in (5, 500, 1000) else ""
            await store.add_learning(LearningCreate(run_id=run.id, text=f"kernel note {i}{extra}"))
        # "kernel" is everywhere, so it neither filters nor ranks: the three rare hits come back.
        page = await store.search("kernel occupancy", run_id=run.id)
        assert page.total == 3 and all("occupancy" in h.snippet for h in page.items)
        # A query made only of such words lists its matches newest first.
        newest = await store.search("kernel", run_id=run.id, limit=2)
        # Counting stops at the cap (1,000): the total then says "at least".
        assert (newest.total, newest.total_capped) == (1000, True) and [h.snippet for h in newest.items] == ["[kernel] note 1099",
                                                                            "[kernel] note 1098"]


async def test_large_match_sets_rank_only_the_newest_window(tmp_path):
    from evoteam.servers.knowledge.local import LocalKnowledgeStore

    async with LocalKnowledgeStore.open(tmp_path / "kb.db") as store:
        store.rank_window = 3
        run = await new_run(store)
        # The oldest match is the best by bm25 (the word three times in a short note) ...
        await store.add_learning(LearningCreate(run_id=run.id, text="occupancy occupancy occupancy"))
        for i in range(5):
            await store.add_learning(LearningCreate(run_id=run.id, text=f"note {i} mentions occupancy once among "
                                                                         f"many other words of text"))
        page = await store.search("occupancy", run_id=run.id)
        # ... but beyond the window only the newest matches are ranked; the total still counts all.
        assert page.total == 6 and len(page.items) == 3
        assert all("mentions" in h.snippet for h in page.items)
        store.rank_window = 100
        assert "mentions" not in (await store.search("occupancy", run_id=run.id)).items[0].snippet


async def test_the_configured_artifact_limit_reaches_the_embedded_store(tmp_path):
    from evoteam.config import Settings
    from evoteam.servers.knowledge.connect import open_store

    settings = Settings(db=tmp_path / "kb.db", max_artifact_bytes=10)
    async with open_store(settings) as store:
        run = await new_run(store)
        await store.put_artifact(ArtifactCreate(run_id=run.id, name="small.txt", text="0123456789"))
        with pytest.raises(TooLarge, match="limit is 10"):
            await store.put_artifact(ArtifactCreate(run_id=run.id, name="big.txt", text="0123456789!"))


async def test_a_flagged_result_ranks_only_after_review(tmp_path):
    """Issue 11: a flagged measurement never ranks until a person accepts it (locally)."""
    from evoteam.servers.knowledge.local import LocalKnowledgeStore
    from evoteam.servers.knowledge.store import Actor
    from evoteam.servers.knowledge.verified import accept_flagged

    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="bench", verifier=True)) as store:
        run = await new_run(store)
        flagged = await store.record_candidate(CandidateCreate(run_id=run.id, code="x", status="PASSED", score=41.9,
                                                               verified=True, flagged=True))
        claim = await store.record_candidate(CandidateCreate(run_id=run.id, code="y", status="PASSED", score=50,
                                                             flagged=True))
        assert (await store.get_run(run.id)).best_score is None
        with pytest.raises(Invalid, match="cannot make a claim verified"):
            await accept_flagged(store.db, claim.id, "reviewer")
        await accept_flagged(store.db, flagged.id, "reviewer")
        assert (await store.get_run(run.id)).best_candidate_id == flagged.id
        with pytest.raises(Invalid, match="not flagged"):
            await accept_flagged(store.db, flagged.id, "reviewer")


async def test_prior_work_weighs_a_runs_newest_learnings(store, monkeypatch):
    from evoteam.servers.knowledge import prior

    monkeypatch.setattr(prior, "LEARNING_WINDOW", 5)
    old = await new_run(store, kit="k")
    for i in range(8):
        await store.add_learning(LearningCreate(run_id=old.id, text=f"fact {i}", confidence=0.5))
    await store.add_learning(LearningCreate(run_id=old.id, text="the newest and surest", confidence=0.9))
    work = await prior.gather_prior_work(store, "task_kits/k")
    assert [r.id for r in work.runs] == [old.id] and work.learnings[0].text == "the newest and surest"
    assert {x.text for x in work.learnings} <= {"the newest and surest", *(f"fact {i}" for i in range(4, 8))}


async def test_prior_work_stays_bounded_and_best_first(tmp_path):
    from evoteam.servers.knowledge.prior import PRIOR_CHARS, gather_prior_work

    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="tester", verifier=True)) as store:
        for r in range(7):
            run = await store.start_run(RunCreate(goal=f"run {r}", kit="k", direction="minimize"))
            for i in range(4):
                await store.record_candidate(CandidateCreate(run_id=run.id, code=f"x = {r}{i}", status="PASSED",
                                                             score=10.0 - r - i / 10, verified=True,
                                                             notes="n" * 500 + "\nsecond line"))
                await store.add_learning(LearningCreate(run_id=run.id, text="w " * 400, kind="technique"))
        other = await store.start_run(RunCreate(goal="another kit", kit="other"))
        work = await gather_prior_work(store, "k", direction="minimize")
    assert len(work.model_dump_json()) <= PRIOR_CHARS and work.truncated
    assert other.id not in {r.id for r in work.runs} and work.more_runs == 2
    scores = [c.score for c in work.best]
    assert scores == sorted(scores) and scores[0] == pytest.approx(10.0 - 6 - 0.3)  # minimised: lowest first
    assert all("second line" not in c.note and len(c.note) <= 160 for c in work.best)


async def test_prior_work_lists_identical_code_once(tmp_path):
    """A second engineer's exact copy of a colleague's best, measured in their own run, was listed
    beside it (and above it, by noise): identical code is one entry, the best-ranked, and every
    interval is given as `score_interval` / `best_interval` as elsewhere."""
    from evoteam.servers.knowledge.prior import gather_prior_work

    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="tester", verifier=True)) as store:
        first = await store.start_run(RunCreate(goal="a", kit="k"))
        original = await store.record_candidate(CandidateCreate(run_id=first.id, code="y = 1\n", status="PASSED",
                                                                score=15.1, verified=True))
        other = await store.record_candidate(CandidateCreate(run_id=first.id, code="y = 2\n", status="PASSED",
                                                             score=12.0, verified=True))
        second = await store.start_run(RunCreate(goal="b", kit="k"))
        copy = await store.record_candidate(CandidateCreate(run_id=second.id, code="# a copy\ny = 1\n",
                                                            status="PASSED", score=17.8, verified=True))
        work = await gather_prior_work(store, "k")
    assert copy.code_hash == original.code_hash
    assert [c.id for c in work.best] == [copy.id, other.id]
    assert {r.id: r.best_interval for r in work.runs} == {first.id: None, second.id: None}
    assert "score_lo" not in work.model_dump_json() and "best_lo" not in work.model_dump_json()


async def test_prior_work_of_every_kit_ranks_runs_of_one_kit_as_that_kits(tmp_path):
    """A session start with no active run (no kit named) listed each run's best newest first: a
    colleague's worse best above the better one (model-play 2026-12-04). Runs of one kit rank as
    the kit's do; runs of several kits keep one best each, newest first (they do not compare)."""
    from evoteam.servers.knowledge.prior import gather_prior_work

    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="tester", verifier=True)) as store:
        older = await store.start_run(RunCreate(goal="a", kit="k", direction="minimize"))
        better = await store.record_candidate(CandidateCreate(run_id=older.id, code="y = 1\n", status="PASSED",
                                                              score=0.3861, verified=True))
        newer = await store.start_run(RunCreate(goal="b", kit="k", direction="minimize"))
        worse = await store.record_candidate(CandidateCreate(run_id=newer.id, code="y = 2\n", status="PASSED",
                                                             score=0.3862, verified=True))
        assert [c.id for c in (await gather_prior_work(store, None)).best][:2] == [better.id, worse.id]
        other = await store.start_run(RunCreate(goal="c", kit="j"))
        elsewhere = await store.record_candidate(CandidateCreate(run_id=other.id, code="y = 3\n", status="PASSED",
                                                                 score=5.0, verified=True))
        assert [c.id for c in (await gather_prior_work(store, None)).best] == [elsewhere.id, worse.id, better.id]


async def test_prior_work_ranks_a_timing_method_among_its_own(tmp_path):
    """Scores timed by an earlier method are not comparable with today's (docs/bench.md, "Rounds"):
    across runs the newest method's candidates rank first, and the others say how they were timed."""
    from evoteam.servers.knowledge.prior import gather_prior_work, render_prior

    wl = [WorkloadResult(workload="w", status="PASSED", speedup=1.0)]
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="tester", verifier=True)) as store:
        old = await store.start_run(RunCreate(goal="before", kit="k"))
        high = await store.record_candidate(CandidateCreate(run_id=old.id, code="x", status="PASSED", score=9.0,
                                                            verified=True, workloads=wl))  # no method: the first
        new = await store.start_run(RunCreate(goal="after", kit="k"))
        now = await store.record_candidate(CandidateCreate(run_id=new.id, code="y", status="PASSED", score=7.0,
                                                           verified=True, workloads=wl, metrics={"timing_method": 2}))
        work = await gather_prior_work(store, "k")
    assert [(c.id, c.timing_method) for c in work.best] == [(now.id, 2), (high.id, 1)]
    text = render_prior(work)
    assert "timed by method 1: not comparable with method 2's scores" in text
    assert text.index(now.id) < text.index(high.id)


async def test_prior_work_ranks_other_kit_content_after_the_newest(tmp_path):
    """A kit whose content changed (other workloads, another evaluator) measures something else:
    the newest run's content ranks first and the older content's best says it is not comparable
    (review 2026-12-04: an old 8.0 led a new 3.0 under "Start from the best candidate")."""
    from evoteam.servers.knowledge.prior import gather_prior_work, render_prior

    wl = [WorkloadResult(workload="w", status="PASSED", speedup=1.0)]
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="tester", verifier=True)) as store:
        old = await store.start_run(RunCreate(goal="before", kit="k"))
        high = await store.record_candidate(CandidateCreate(run_id=old.id, code="x", status="PASSED", score=8.0,
                                                            verified=True, workloads=wl, metrics={"kit_hash": "A"}))
        new = await store.start_run(RunCreate(goal="after", kit="k"))
        now = await store.record_candidate(CandidateCreate(run_id=new.id, code="y", status="PASSED", score=3.0,
                                                           verified=True, workloads=wl, metrics={"kit_hash": "B"}))
        work = await gather_prior_work(store, "k")
    assert [(c.id, c.other_kit_content) for c in work.best] == [(now.id, None), (high.id, True)]
    # One timing method (both unrecorded, method 1): said of none, as it tells nothing apart (mp34).
    assert [c.timing_method for c in work.best] == [None, None]
    text = render_prior(work)
    assert text.index(now.id) < text.index(high.id)
    assert "on other kit content than the newest run: not comparable" in text.split(high.id, 2)[2].splitlines()[0]


async def test_prior_work_unasked_ranks_the_way_the_kits_runs_do(tmp_path):
    """`evoteam kb prior KIT` passes no direction: a minimising kit's candidates are ranked the way
    its runs rank them, best (lowest) first (review 2026-12-04: worst first, as if maximising)."""
    from evoteam.servers.knowledge.prior import gather_prior_work

    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="tester", verifier=True)) as store:
        run = await store.start_run(RunCreate(goal="overlap", kit="k", direction="minimize"))
        worse = await store.record_candidate(CandidateCreate(run_id=run.id, code="x", status="PASSED", score=0.49,
                                                             verified=True))
        better = await store.record_candidate(CandidateCreate(run_id=run.id, code="y", status="PASSED", score=0.38,
                                                              verified=True))
        work = await gather_prior_work(store, "k")
    assert [c.id for c in work.best] == [better.id, worse.id]


async def test_a_document_is_not_evidence_and_the_refusal_says_what_is(tmp_path):
    """Issue 22: the research skill cited doc_ ids as evidence; a learning cites measurements."""
    from evoteam.servers.knowledge.errors import Invalid
    from evoteam.servers.knowledge.local import LocalKnowledgeStore
    from evoteam.servers.knowledge.models import LearningCreate, RunCreate

    async with LocalKnowledgeStore.open(tmp_path / "kb.db") as store:
        run = await store.start_run(RunCreate(goal="g"))
        with pytest.raises(Invalid, match=r"retrieved document.*cand_.*documents_used"):
            await store.add_learning(LearningCreate(run_id=run.id, text="x", evidence=["doc_abc"]))
    research = (Path(__file__).parents[2] / "skills" / "research" / "SKILL.md").read_text()
    assert "document ids as\n   evidence" not in research and "with the document ids as evidence" not in research
    assert "record_outcome` call is needed" in research


async def test_evidence_of_another_run_says_how_to_cite_it(new_location):
    """A second engineer cited a colleague's candidate as evidence and read "record it first",
    which would have made an unverified copy: the refusal says to measure it in their run (on
    both backends)."""
    from evoteam.servers.knowledge.errors import NotFound

    async with LocalKnowledgeStore.open(new_location("kb.db"), Actor(user="tester", verifier=True)) as store:
        theirs = await store.start_run(RunCreate(goal="a", kit="k"))
        cand = await store.record_candidate(CandidateCreate(run_id=theirs.id, code="y = 1\n", status="PASSED",
                                                            score=2.0, verified=True))
        mine = await store.start_run(RunCreate(goal="b", kit="k"))
        # Naming it in the text first: it costs nothing (a second engineer re-ran a colleague's program).
        with pytest.raises(NotFound, match=rf"of run '{theirs.id}'.*name it in the text \("
                                           rf"\"{cand.id} of {theirs.id}\"\), or.*bench.evaluate it with "
                                           rf"candidate_id='{cand.id}'"):
            await store.add_learning(LearningCreate(run_id=mine.id, text="x", evidence=[cand.id]))
        with pytest.raises(NotFound, match="does not exist"):
            await store.add_learning(LearningCreate(run_id=mine.id, text="x", evidence=["cand_0123456789abcdef"]))
        # Where this run already measured the same code, the refusal names that candidate.
        copy = await store.record_candidate(CandidateCreate(run_id=mine.id, code="# mine\ny = 1\n", status="PASSED",
                                                            score=2.1, verified=True))
        with pytest.raises(NotFound, match=f"or cite {copy.id}, this run's candidate with the same code"):
            await store.add_learning(LearningCreate(run_id=mine.id, text="x", evidence=[cand.id]))
        # An id cited twice is one piece of evidence.
        learned = await store.add_learning(LearningCreate(run_id=mine.id, text="x", evidence=[copy.id, copy.id]))
        assert learned.evidence == [copy.id]


async def test_an_exact_best_is_listed_as_one_not_as_a_score_without_interval(tmp_path):
    """Prior work, search titles and `kb candidates` printed "0.386149 (no interval)" for a best of
    15 alike runs, which a newcomer read as unmeasured (model-play 2026-12-04): a zero-width score
    from enough runs says so; one from too few says that."""
    import asyncio

    from click.testing import CliRunner

    from evoteam.cli import main
    from evoteam.servers.knowledge.prior import gather_prior_work, render_prior
    from evoteam.servers.knowledge.quickread import ENV_SWITCH

    db = tmp_path / "kb.db"
    async with LocalKnowledgeStore.open(db, Actor(user="tester", verifier=True)) as store:
        run = await store.start_run(RunCreate(goal="a", kit="k", direction="minimize"))
        exact = await store.record_candidate(CandidateCreate(run_id=run.id, code="y = 1\n", status="PASSED",
                                                             score=0.386149, samples={"program": [0.386149] * 15},
                                                             verified=True))
        once = await store.record_candidate(CandidateCreate(run_id=run.id, code="y = 2\n", status="PASSED",
                                                            score=0.3862, samples={"program": [0.3862]},
                                                            verified=True))
        text = render_prior(await gather_prior_work(store, "k"))
        hits = (await store.search("candidate", run_id=run.id)).items
    # Prior work reads the run's own record: the best is exact, from 15 runs alike (it said "5+ runs,
    # the middle ones alike" of it; model-play 2026-12-04), in the run's line and in the best list.
    assert "best 0.386149 (exact: every run alike)" in text and "(no interval)" not in text, text
    assert f"`{exact.id}` (tester, run `{run.id}`): 0.386149 (exact: every run alike)" in text, text
    assert f"`{once.id}`" in text and "0.3862 (one measurement, no interval)" in text, text
    titles = {h.id: h.title for h in hits}
    assert titles[exact.id].endswith("score 0.386149 (5+ runs, the middle ones alike)"), titles
    assert titles[once.id].endswith("score 0.3862 (too few runs to know its spread)"), titles
    outputs = []
    for quick in ("1", "0"):
        out = await asyncio.to_thread(CliRunner().invoke, main, ["kb", "candidates", run.id],
                                      env={"EVOTEAM_DB": str(db), "HOME": str(tmp_path), ENV_SWITCH: quick})
        assert out.exit_code == 0, out.output
        outputs.append(out.output)
    assert outputs[0] == outputs[1] and "0.386149 (5+ runs, the middle ones alike)" in outputs[0], outputs


async def test_only_a_runs_owner_changes_its_status(new_location):
    """A second engineer's finish_run overwrote a colleague's finished run ("failed — bob closes
    it"), and nothing recorded who had (model-play 2026-12-04): a run's status is its owner's to
    change, on both backends; the refusal says how to build on it instead."""
    from evoteam.servers.knowledge.errors import Forbidden

    where = new_location("kb.db")
    async with LocalKnowledgeStore.open(where, Actor(user="alice", project="kernels")) as alice:
        run = await alice.start_run(RunCreate(goal="a", kit="k"))
        await alice.update_run(run.id, status="finished", reason="best 0.3861 after 4 variants")
    async with LocalKnowledgeStore.open(where, Actor(user="bob", project="kernels")) as bob:
        with pytest.raises(Forbidden, match=rf"run {run.id} is alice's: only its owner.*seed_from='{run.id}'"):
            await bob.update_run(run.id, status="failed", reason="bob closes it")
        seen = await bob.get_run(run.id)
        assert (seen.status, seen.status_reason) == ("finished", "best 0.3861 after 4 variants")
        # Reading it and building on it stay open to a colleague.
        mine = await bob.start_run(RunCreate(goal="b", kit="k", seeded_from=run.id))
        assert (await bob.update_run(mine.id, status="paused")).status == "paused"
    async with LocalKnowledgeStore.open(where, Actor(user="alice", project="kernels")) as alice:
        assert (await alice.update_run(run.id, status="active")).status == "active"


async def test_a_learning_by_someone_else_than_the_runs_owner_names_them(new_location):
    """A colleague's dead end, given the owner's name as its role, read "by alice" in her own
    learnings document (model-play 2026-12-04): a learning written by another user than the run's
    owner names that user; the owner's own read as before."""
    where = new_location("kb.db")
    async with LocalKnowledgeStore.open(where, Actor(user="alice", project="kernels")) as alice:
        run = await alice.start_run(RunCreate(goal="a", kit="k"))
        await alice.with_actor(Actor(user="alice", project="kernels", role="Profiler")).add_learning(
            LearningCreate(run_id=run.id, text="smoothing the steps does not help", kind="dead_end"))
    async with LocalKnowledgeStore.open(where, Actor(user="bob", project="kernels", role="alice")) as bob:
        await bob.add_learning(LearningCreate(run_id=run.id, text="projected gradient is a dead end",
                                              kind="dead_end"))
        doc = (await bob.render_learnings(run.id)).markdown
    assert "· by bob as alice" in doc and "· by Profiler" in doc and "by alice" not in doc, doc


async def test_a_superseded_learning_found_by_search_says_so(new_location):
    """A retracted dead end came back as the top hit of a search with nothing to say it was
    superseded (model-play 2026-12-04): its title names its successor, on both backends."""
    async with LocalKnowledgeStore.open(new_location("kb.db"), Actor(user="alice", project="kernels")) as store:
        run = await store.start_run(RunCreate(goal="a", kit="k"))
        old = await store.add_learning(LearningCreate(run_id=run.id, text="projected gradient is a dead end",
                                                      kind="dead_end"))
        new = await store.add_learning(LearningCreate(run_id=run.id, text="projected gradient works with a "
                                                      "smaller step", kind="technique", supersedes=old.id))
        titles = {h.id: h.title for h in (await store.search("projected gradient", run_id=run.id)).items}
    assert titles[old.id].endswith(f"(superseded by {new.id})"), titles
    assert "superseded" not in titles[new.id] and titles[new.id].startswith("technique:"), titles


async def test_prior_work_that_does_not_fit_keeps_its_dead_ends(tmp_path):
    """Cut at the end to fit the session's context, a colleague's dead end was the first thing
    lost (model-play 2026-12-04): the longest of the other lists gives way first."""
    from evoteam.servers.knowledge.prior import gather_prior_work, render_prior

    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="alice", verifier=True)) as store:
        run = await store.start_run(RunCreate(goal="a", kit="k"))
        for i in range(6):
            await store.record_candidate(CandidateCreate(run_id=run.id, code=f"y = {i}\n", status="PASSED",
                                                         score=1.0 + i, verified=True, notes="note " * 20))
            await store.add_learning(LearningCreate(run_id=run.id, text=f"technique {i} " + "works " * 30,
                                                    kind="technique"))
        dead = await store.add_learning(LearningCreate(run_id=run.id, text="smoothing the steps does not help",
                                                       kind="dead_end"))
        work = await gather_prior_work(store, "k")
    full = render_prior(work, 100_000)
    short = render_prior(work, len(full) // 2)
    assert len(short) <= len(full) // 2 and f"`{dead.id}`" in short and "shortened" in short, short
    assert short.count("- [technique") < full.count("- [technique") and "Best candidates:" in short


async def test_a_best_candidate_cited_by_a_dead_end_names_it(tmp_path):
    """Prior work listed a candidate among the best and, in a colleague's dead end, as evidence that
    an approach led nowhere, with nothing on the best entry to say so (model-play mp34): the entry
    names the dead end, in the model and in the rendered text; an uncited one names none."""
    from evoteam.servers.knowledge.prior import gather_prior_work, render_prior

    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="alice", verifier=True)) as store:
        run = await store.start_run(RunCreate(goal="a", kit="k"))
        cited = await store.record_candidate(CandidateCreate(run_id=run.id, code="y = 1\n", status="PASSED",
                                                             score=3.0, verified=True, notes="row blocking"))
        other = await store.record_candidate(CandidateCreate(run_id=run.id, code="y = 2\n", status="PASSED",
                                                             score=2.0, verified=True, notes="plain"))
        dead = await store.add_learning(LearningCreate(run_id=run.id, kind="dead_end", evidence=[cited.id],
                                                       text="blocking rows further than 256 KiB does not help"))
        work = await gather_prior_work(store, "k")
    entries = {c.id: c for c in work.best}
    assert entries[cited.id].cited_by_dead_end == dead.id and entries[other.id].cited_by_dead_end is None
    text = render_prior(work)
    line = next(x for x in text.splitlines() if f"`{cited.id}`" in x)
    assert f"[cited by dead end `{dead.id}`]" in line, text
    assert "cited by dead end" not in next(x for x in text.splitlines() if f"`{other.id}`" in x)
    assert "cited_by_dead_end" not in entries[other.id].model_dump(exclude_none=True)
