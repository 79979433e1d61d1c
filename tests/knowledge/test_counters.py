"""The hot paths read maintained counters and bounded queries (knowledge/counters.py): the
counts stay exact through every write path, and the documents read only what they show."""

from __future__ import annotations

import sqlite3

import pytest

from evoteam.servers.knowledge.export import collect_bundle
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.models import (
    CandidateCreate,
    CostCreate,
    HistoryEntryCreate,
    LearningCreate,
    RunCreate,
)
from evoteam.servers.knowledge.render import render_learnings
from tests.knowledge.conftest import query_rows


def counted(path, run_id: str) -> tuple[int, int, int, float, set]:
    """The counts and spend lines computed from scratch, as the store once did on every call
    (on either backend: `path` is a file or a PostgreSQL URL)."""
    one = lambda sql: query_rows(path, sql, (run_id,))[0][0]  # noqa: E731
    lines = {(r, v, round(u, 9)) for r, v, u in query_rows(
        path, "SELECT role, team_version, sum(usd) FROM costs WHERE run_id = ? GROUP BY role, team_version", (run_id,))}
    return (one("SELECT count(*) FROM candidates WHERE run_id = ?"),
            one("SELECT count(*) FROM learnings WHERE run_id = ? AND superseded_by IS NULL"),
            one("SELECT count(*) FROM history WHERE run_id = ?"),
            one("SELECT coalesce(sum(usd), 0) FROM costs WHERE run_id = ?"), lines)


async def maintained(store, run_id: str) -> tuple[int, int, int, float, set]:
    run = await store.get_run(run_id)
    spend = await store.spend(run_id)
    history = await store.render_history(run_id)
    return (run.candidates, run.learnings, history.entries, run.spent_usd,
            {(x.role, x.team_version, round(x.usd, 9)) for x in spend.lines})


async def fill(store, run_id: str) -> None:
    """Every write path that moves a counter: candidates, learnings (some superseded, one chain
    superseded twice), history, costs under several roles and versions, NULL role included."""
    for i in range(7):
        await store.record_candidate(CandidateCreate(run_id=run_id, code=f"c{i}", status="PASSED", score=float(i)))
    first = [await store.add_learning(LearningCreate(run_id=run_id, text=f"fact {i}")) for i in range(6)]
    second = await store.add_learning(LearningCreate(run_id=run_id, text="fact 0, refined", supersedes=first[0].id))
    await store.add_learning(LearningCreate(run_id=run_id, text="fact 0, refined again", supersedes=second.id))
    await store.add_learning(LearningCreate(run_id=run_id, text="fact 3, corrected", supersedes=first[3].id))
    for v in (1, 2):
        await store.add_history(HistoryEntryCreate(run_id=run_id, team_version=v, outcome=f"v{v} done"))
    for role, version, usd in (("Profiler", 1, 0.5), ("Profiler", 1, 0.25), ("Challenger", 2, 0.125),
                               (None, None, 0.0625), ("Profiler", 2, 1.0)):
        actor = store.actor.model_copy(update={"role": role, "team_version": version})
        await store.with_actor(actor).record_cost(CostCreate(run_id=run_id, usd=usd, source="sdk_result"))


async def test_counters_match_a_full_count_after_every_write_path_and_an_import(new_location):
    async with LocalKnowledgeStore.open(new_location("a.db")) as store:
        run = await store.start_run(RunCreate(goal="count", budget_usd=10))
        other = await store.start_run(RunCreate(goal="another run, counted apart"))
        await fill(store, run.id)
        await store.add_learning(LearningCreate(run_id=other.id, text="elsewhere"))
        got = await maintained(store, run.id)
        assert got == counted(new_location("a.db"), run.id)
        assert got[:4] == (7, 6, 2, pytest.approx(1.9375))
        assert (await store.get_run(other.id)).learnings == 1
        assert (await store.spend(run.id)).lines[0].role is None  # NULL role and version sort first
        bundle = await collect_bundle(store, run.id)
    # An import writes rows first and supersede links afterwards: the counts must still end right.
    async with LocalKnowledgeStore.open(new_location("b.db")) as imported:
        await imported.import_bundle(bundle)
        assert await maintained(imported, run.id) == counted(new_location("b.db"), run.id) == got


async def test_a_store_written_before_the_counters_is_backfilled(tmp_path):
    path = tmp_path / "old.db"
    async with LocalKnowledgeStore.open(path) as store:
        run = await store.start_run(RunCreate(goal="old"))
        await fill(store, run.id)
    # Turn the file back into one from before the counters component existed.
    conn = sqlite3.connect(path, isolation_level=None)
    for kind, name in conn.execute("SELECT type, name FROM sqlite_master WHERE type IN ('trigger', 'index', 'table') "
                                   "AND (name LIKE 'run_counters%' OR name = 'run_spend' "
                                   "OR name IN ('learnings_document', 'history_newest'))").fetchall():
        conn.execute(f"DROP {kind.upper()} IF EXISTS {name}")
    conn.execute("DELETE FROM schema_versions WHERE component = 'knowledge.counters'")
    conn.close()
    async with LocalKnowledgeStore.open(path) as store:
        assert await maintained(store, run.id) == counted(path, run.id)
        await store.add_learning(LearningCreate(run_id=run.id, text="after the upgrade"))
        assert (await store.get_run(run.id)).learnings == counted(path, run.id)[1]


def plan(path, sql: str, params: tuple) -> str:
    conn = sqlite3.connect(path)
    try:
        return " | ".join(row[-1] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, params))
    finally:
        conn.close()


async def test_learnings_document_shows_best_then_newest_and_reads_only_what_it_shows(tmp_path):
    path = tmp_path / "kb.db"
    async with LocalKnowledgeStore.open(path) as store:
        run = await store.start_run(RunCreate(goal="bounded"))
        written = []
        for i in range(120):
            kind = ("technique", "observation", "dead_end")[i % 3]
            written.append(await store.add_learning(LearningCreate(
                run_id=run.id, kind=kind, text=f"note {i:03d} " + "y" * (i % 40), confidence=(i % 4) / 4)))
        await store.add_learning(LearningCreate(run_id=run.id, text="note 007 replaced", kind="observation",
                                                supersedes=written[7].id, confidence=0.25))
        for max_chars in (600, 3000, 60_000):
            doc = await store.render_learnings(run.id, max_chars=max_chars)
            everything = (await store.list_learnings(run.id, include_superseded=True, limit=200)).items
            # Built from bounded per-kind reads, it is the very document a full read would give.
            assert doc == render_learnings(run.id, run.goal, everything, max_chars=max_chars)
            assert doc.total == 120 and len(doc.markdown) <= max_chars + 200
        small = await store.render_learnings(run.id, max_chars=3000)
        assert small.truncated and 0 < small.shown < 40
        # The first kind shown is "Techniques that work", most confident first, newest first among equals.
        techniques = sorted((x for x in everything if x.kind == "technique" and x.superseded_by is None),
                            key=lambda x: (-x.confidence, -x.provenance.created_at.timestamp()))
        body = small.markdown.split("## Techniques that work", 1)[1]
        shown_ids = [line.split("`")[1] for line in body.splitlines() if line.startswith("  <sub>`")]
        assert shown_ids == [x.id for x in techniques[:len(shown_ids)]]
        assert techniques[0].confidence == 0.75 and techniques[0].id == written[111].id
        assert written[7].id not in small.markdown
    # Each kind is read in the document's order from an index, never sorted in full.
    query = plan(path, "SELECT * FROM learnings WHERE run_id = ? AND kind = ? AND superseded_by IS NULL "
                       "ORDER BY confidence DESC, created_at DESC LIMIT ?", (run.id, "technique", 10))
    assert "learnings_document" in query and "TEMP B-TREE" not in query
    for sql in ("SELECT * FROM history WHERE run_id = ? ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?",):
        query = plan(path, sql, (run.id, 16, 0))
        assert "history_newest" in query and "TEMP B-TREE" not in query


async def test_history_document_shows_the_newest_entries_that_fit_in_time_order(new_location):
    async with LocalKnowledgeStore.open(new_location("kb.db")) as store:
        run = await store.start_run(RunCreate(goal="history"))
        for v in range(1, 41):
            await store.add_history(HistoryEntryCreate(run_id=run.id, team_version=v,
                                                       diagnosis=f"diagnosis of version {v} " + "z" * 300))
        doc = await store.render_history(run.id, max_chars=3000)
        assert doc.entries == 40 and doc.truncated and 0 < doc.shown < 40
        assert len(doc.markdown) <= 3000 + 400
        versions = [int(line.split("team v")[1].split(" ")[0]) for line in doc.markdown.splitlines()
                    if line.startswith("## team v")]
        assert versions == list(range(41 - doc.shown, 41))  # the newest, oldest of them first
        assert f"{40 - doc.shown} earlier entries not shown" in doc.markdown
        full = await store.render_history(run.id, max_chars=1_000_000)
        assert full.shown == 40 and not full.truncated and "earlier entries" not in full.markdown
        # One entry longer than the whole document is still shown, clipped.
        await store.add_history(HistoryEntryCreate(run_id=run.id, team_version=41, outcome="w" * 5000))
        clipped = await store.render_history(run.id, max_chars=1000)
        assert clipped.shown == 1 and "team v41" in clipped.markdown and len(clipped.markdown) < 1400
        assert clipped.markdown.rstrip().endswith("…")


async def test_search_counts_up_to_a_cap_and_still_ranks_the_newest_window(new_location):
    async with LocalKnowledgeStore.open(new_location("kb.db")) as store:
        store.count_cap, store.rank_window = 4, 3
        run = await store.start_run(RunCreate(goal="search"))
        await store.add_learning(LearningCreate(run_id=run.id, text="occupancy occupancy occupancy"))
        for i in range(5):
            await store.add_learning(LearningCreate(run_id=run.id, text=f"note {i} mentions occupancy once"))
        page = await store.search("occupancy", run_id=run.id, limit=2)
        assert (page.total, page.total_capped) == (4, True) and page.next_cursor
        # The best match by bm25 is the oldest, outside the window of the newest three: not ranked.
        assert all("mentions" in h.snippet for h in page.items) and page.items[0].rank < 0
        store.count_cap, store.rank_window = 100, 100
        exact = await store.search("occupancy", run_id=run.id)
        assert (exact.total, exact.total_capped) == (6, False) and "mentions" not in exact.items[0].snippet


async def test_the_newest_window_is_the_newest_matches_however_sparse(new_location):
    """PostgreSQL finds the newest matches in growing windows of entries (pgsearch.py): sparse
    matches need several windows, and the ranked ones are still exactly the newest."""
    async with LocalKnowledgeStore.open(new_location("kb.db")) as store:
        store.count_cap, store.rank_window = 4, 3
        run = await store.start_run(RunCreate(goal="search"))
        await store.add_learning(LearningCreate(run_id=run.id, text="occupancy occupancy occupancy"))
        for i in range(100):
            text = f"note n{i} mentions occupancy once" if i % 7 == 0 else f"note n{i} about tiles"
            await store.add_learning(LearningCreate(run_id=run.id, text=text))
        page = await store.search("occupancy", run_id=run.id, limit=10)
        assert page.total_capped
        shown = sorted(int(h.snippet.split(" n")[1].split(" ")[0]) for h in page.items)
        assert shown == [84, 91, 98]  # the three newest of the notes mentioning it, ranked
