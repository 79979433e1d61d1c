"""Search on PostgreSQL reading whole buckets of the newest ids through the bucketed GIN index
(knowledge.search v2, pgranges.py's "bucket" way): the same pages as the ways without it, and
exact at the buckets' edges, down to the oldest bucket.

The store holds 40,000 entries (buckets 0 to 2 of 16,384 ids). Which way a range is read is the
cost model's choice; here it is forced (the other ways priced out, or the bucket way taken
away), so that both paths run on every query of the same store."""

from __future__ import annotations

import uuid

import psycopg
import pytest

from evoteam.servers.knowledge import pgranges, pgsearch
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.models import RunCreate
from evoteam.servers.knowledge.pgranges import Query
from evoteam.servers.knowledge.pgschema import BUCKET_BITS, BUCKETED_TSV

ENTRIES = 40_000
EDGE = 1 << BUCKET_BITS  # the first id of bucket 1
# The ids holding "lattice": every 100th of the oldest 3,000 and the two either side of the first
# bucket edge (OLD), and five among the newest 500 (NEW, so that search expects it densely enough
# to read the newest bucket alone first); none in between.
OLD = {i + 1 for i in range(0, 3000, 100)} | {EDGE - 1, EDGE}
NEW = set(range(ENTRIES - 99, ENTRIES - 94))
LATTICE = OLD | NEW
QUERIES = ["occupancy", "lattice", "occupancy warps", "bandwidth", "bandwidth occupancy", "tiles occupancy",
           "tiles", "lattice bandwidth", "lattice nowhere", "nowhere"]


def body(entry_id: int) -> str:
    i = entry_id - 1
    extra = [word for word, every in (("occupancy", 7), ("warps", 3), ("bandwidth", 500)) if i % every == 0]
    if entry_id in LATTICE:
        extra.append("lattice")
    return " ".join([f"note {entry_id} about tiles", *extra])


@pytest.fixture
async def loaded(postgres_server):
    url = postgres_server.new_database()
    async with LocalKnowledgeStore.open(url) as store:
        run = await store.start_run(RunCreate(goal="buckets"))
    with psycopg.connect(url, autocommit=True) as conn:
        with conn.cursor().copy("COPY search_index (id, title, body, filters, kind, ref_id, run_id, project) "
                                "FROM STDIN") as copy:
            for entry_id in range(1, ENTRIES + 1):
                copy.write_row((entry_id, "observation: ", body(entry_id), "", "learning",
                                f"lrn_{uuid.uuid4().hex}", run.id, "default"))
        conn.execute("SELECT setval('search_index_id_seq', %s)", (ENTRIES,))
        conn.execute("ANALYZE search_index")
    return url, run.id


@pytest.fixture
def ways():
    """The way of every range read from now on, in order, with its ids (lo, hi]."""
    seen: list[tuple] = []
    statement = pgranges._statement

    def recording(query, way, lo, hi, *args):
        seen.append((way, lo, hi))
        return statement(query, way, lo, hi, *args)

    patch = pytest.MonkeyPatch()
    patch.setattr(pgranges, "_statement", recording)
    yield seen
    patch.undo()


def bucket_only(monkeypatch) -> None:
    """Price every way but the bucket way out (it stays out where one range holds everything)."""
    for name in ("POSTING", "ROW", "ADVANCE"):
        monkeypatch.setattr(pgranges, name, 0.0)
    for name in ("WALK_ENTRY", "RANGE_ENTRY", "OLD_ROW"):
        monkeypatch.setattr(pgranges, name, 1000.0)


async def pages(url: str, run_id: str, query: str) -> list[tuple]:
    """Two pages of `query`: what each hit is, its rank, and the totals."""
    out = []
    async with LocalKnowledgeStore.open(url) as store:
        store.sample_window, store.rank_window, store.count_cap = 500, 40, 40
        cursor = None
        for _ in range(2):
            page = await store.search(query, run_id=run_id, limit=10, cursor=cursor)
            out.append((page.total, page.total_capped, [(h.id, round(h.rank, 6), h.snippet) for h in page.items]))
            cursor = page.next_cursor
    return out


async def test_the_bucket_way_finds_the_same_pages_as_the_ways_without_it(loaded, monkeypatch, ways):
    url, run_id = loaded
    bucket_only(monkeypatch)
    with_buckets = {q: await pages(url, run_id, q) for q in QUERIES}
    assert [w for w, *_ in ways].count("bucket") >= len(QUERIES) // 2, ways  # the path under test really ran
    # One bucket a range at most: more ranges, each a bucket, the same pages.
    monkeypatch.setattr(pgranges, "MAX_BUCKETS", 1)
    ways.clear()
    one_each = {q: await pages(url, run_id, q) for q in QUERIES}
    spans = [(lo, hi) for w, lo, hi in ways if w == "bucket"]
    assert spans and all((lo + 1) % EDGE == 0 and (hi is None or hi - lo == EDGE) for lo, hi in spans), spans
    monkeypatch.undo()
    monkeypatch.setattr(pgsearch, "BUCKET_BITS", 0)  # no bucket lexemes known: the ways of before
    ways.clear()
    without = {q: await pages(url, run_id, q) for q in QUERIES}
    assert "bucket" not in [w for w, *_ in ways]
    assert with_buckets == without == one_each
    # Not vacuous: the queries found what the store holds (capped where over the window).
    assert with_buckets["lattice"][0][:2] == (len(LATTICE), False)
    assert with_buckets["occupancy"][0][:2] == (40, True)
    assert with_buckets["nowhere"][0][0] == 0


async def test_a_word_mostly_in_the_oldest_bucket_is_found_and_counted(loaded, monkeypatch, ways):
    """The newest bucket is read the bucket way; the matches in the oldest are still found, each
    once, and counted exactly."""
    url, run_id = loaded
    bucket_only(monkeypatch)
    async with LocalKnowledgeStore.open(url) as store:
        store.sample_window, store.rank_window, store.count_cap = 500, 40, 40
        found, cursor = [], None
        while True:
            page = await store.search("lattice", run_id=run_id, limit=10, cursor=cursor)
            found += [int(h.snippet.split(" ")[1]) for h in page.items]
            assert (page.total, page.total_capped) == (len(LATTICE), False)
            if not (cursor := page.next_cursor):
                break
    assert sorted(found) == sorted(LATTICE)
    assert ways[0][0] == "bucket", ways


async def test_a_bucket_range_holds_exactly_its_ids_and_the_first_range_what_came_since(loaded):
    url, run_id = loaded
    async with LocalKnowledgeStore.open(url) as store:
        q, q_params = pgsearch.tsquery(["lattice"], any_word=False)
        query = Query("search_index", q, q_params, "", [], "kind, ref_id", BUCKETED_TSV, BUCKET_BITS)

        async def ids(lo: int, hi: int | None) -> set[int]:
            sql = pgranges._statement(query, "bucket", lo, hi, 1000, False, 0, 1000)
            async with store.db.read() as conn:
                (rows,) = await conn.batch([sql], pgranges._SETTINGS["bucket"])
            return {int(r["id"]) for r in rows}

        assert await ids(-1, EDGE - 1) == OLD - {EDGE}  # bucket 0: its last id, not the next
        assert await ids(EDGE - 1, 2 * EDGE - 1) == {EDGE}  # bucket 1 from its first id
        assert await ids(-1, 2 * EDGE - 1) == OLD
        assert await ids(2 * EDGE - 1, None) == NEW
        # An entry written after the newest id the search knew, in a bucket of its own: the first
        # range (no upper bound) reads the buckets up to the newest id there is now.
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("INSERT INTO search_index (id, title, body, filters, kind, ref_id, run_id, project) "
                         "VALUES (%s, '', 'a late lattice', '', 'learning', 'lrn_late', %s, 'default')",
                         (3 * EDGE + 5, run_id))
        assert await ids(2 * EDGE - 1, None) == NEW | {3 * EDGE + 5}
        assert await ids(2 * EDGE - 1, ENTRIES) == NEW


async def test_a_query_of_no_lexemes_matches_nothing_the_bucket_way(loaded):
    """A word the parser makes nothing of ("___") gives a tsquery of no lexeme, and '' AND a bucket
    is the bucket alone: without a guard every entry of the buckets read would match (review of
    2026-12-02). Beside a real word it drops out, as it does for `tsv @@`."""
    url, run_id = loaded
    async with LocalKnowledgeStore.open(url) as store:
        for words in (["___"], ["___", "--"], ["lattice", "___"]):
            q, q_params = pgsearch.tsquery(words, any_word=False)
            query = Query("search_index", q, q_params, "", [], "kind, ref_id", BUCKETED_TSV, BUCKET_BITS)
            sql = pgranges._statement(query, "bucket", -1, None, 1000, False, 0, 1000)
            async with store.db.read() as conn:
                (rows,) = await conn.batch([sql], pgranges._SETTINGS["bucket"])
            found = {int(r["id"]) for r in rows}
            assert found == (LATTICE if "lattice" in words else set()), (words, len(found))
