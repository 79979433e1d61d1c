"""The documents' look-up on PostgreSQL ranks only the newest matches and reads a bounded number
of documents, however many match (issue 25; retrieval/docsearch.py).

As tests/knowledge/test_pg_search_bounds.py: the rows are counted on the plans PostgreSQL ran,
logged by auto_explain, with small windows so that the bound and the matches differ widely."""

from __future__ import annotations

import psycopg

from evoteam.servers.knowledge.pg import PgDatabase
from evoteam.servers.retrieval.docsearch import matching_documents
from tests.support.pgplans import log_plans, logged_plans, rows_read

DOCUMENTS, EVERY = 10_000, 25  # "occupancy" in every 25th document: 400 matches
TABLE = "retrieval_documents_fts"


async def test_a_look_up_ranks_the_newest_matches_and_reads_a_bounded_number_of_documents(postgres_server):
    url = postgres_server.new_database()
    with psycopg.connect(url, autocommit=True) as conn:
        with conn.cursor().copy(f"COPY {TABLE} (title, body, doc_id, project) FROM STDIN") as copy:
            # Another project's documents match too, and are never returned.
            for i in range(50):
                copy.write_row((f"theirs {i}", "occupancy", f"other_{i}", "elsewhere"))
            # The project's oldest match is the best by ts_rank (the word in its title and three times in
            # its body), so ranking every match would put it first.
            copy.write_row(("occupancy", "occupancy occupancy occupancy", "doc_best_and_oldest", "default"))
            for i in range(1, DOCUMENTS):
                extra = " occupancy" if i % EVERY == 0 else ""
                copy.write_row((f"page {i}", f"notes on tiles and warps{extra}", f"doc_{i}", "default"))
        conn.execute(f"ANALYZE {TABLE}")
        log_plans(conn, url.rsplit("/", 1)[1])
    log = postgres_server.root / "log" / "server.log"
    async with PgDatabase(url) as db:
        async with db.read() as conn:
            start = log.stat().st_size
            found = await matching_documents(conn, "occupancy", "default", limit=5, window=20, sample=500)
            plans = logged_plans(log.read_text(errors="replace")[start:])
            everything = await matching_documents(conn, "occupancy", "default", limit=500, window=1000, sample=500)
    newest = {f"doc_{i}" for i in range(DOCUMENTS - 1, 0, -1) if i % EVERY == 0}
    newest = set(sorted(newest, key=lambda d: -int(d.split("_")[1]))[:20])
    # The best five of the newest twenty of the project's matches; the old best is not ranked.
    assert len(found) == 5 and set(found) <= newest, found
    # With a window holding every match, every one is ranked and the best comes first.
    assert everything[0] == "doc_best_and_oldest" and len(everything) == 400
    assert not any(d.startswith("other_") for d in everything)
    read = [rows_read(p["Plan"], TABLE) for p in plans if TABLE in p["Query Text"]]
    # 400 of the project's documents match. Read: the newest 500 once (how densely the query
    # matches), then about 1.5 x the 20 wanted through the GIN index intersected with the newest
    # ids; ranking every match would read all 450 matches of both projects.
    assert sum(read) <= 500 + 3 * 20, read
