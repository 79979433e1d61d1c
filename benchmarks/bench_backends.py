"""The two store backends side by side: prints tables; asserts nothing.

    .venv/bin/python benchmarks/bench_backends.py                     # 1k and 10k learnings
    .venv/bin/python benchmarks/bench_backends.py --sizes 1000,100000 # other sizes
    nice -n 19 .venv/bin/python benchmarks/bench_backends.py --sizes 1000000 --no-rates  # 1M, latency only
    .venv/bin/python benchmarks/bench_backends.py --pg-url postgresql://...  # an existing server
                                                                     # (each size gets a new database)

Without --pg-url it starts a throwaway PostgreSQL (tests/support/postgres.py, the one the tests
use: no fsync, every commit in the WAL). In one run, so the ratios compare on a noisy machine:

1. in process, per size: tool latency p50/p99 of `get_run`, `add_learning` and the learnings
   document, and search p50/p99 (typical two-word queries drawn as the notes' own words occur);
2. writes/s of `add_learning` (each with an idempotency key) over HTTP from 16 and 64
   concurrent clients against one `evoteam serve knowledge --http` and against two replicas on
   the same store (two processes on one SQLite file, or on one PostgreSQL database), all
   clients writing one run or each its own run (PostgreSQL serialises writers per run),
   alternately `--reps` times.

PostgreSQL stores are bulk-loaded with COPY (copy_learnings); SQLite's in 5,000-row transactions.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_knowledge import (  # noqa: E402
    bulk_learnings, fmt_ms, pct, sentence, table, time_calls, typical_query)
from evoteam.servers.knowledge.local import LocalKnowledgeStore  # noqa: E402
from evoteam.servers.knowledge.rows import index_filters, new_id, now  # noqa: E402
from evoteam.servers.knowledge.pgschema import SEARCH_GIN  # noqa: E402
from evoteam.servers.knowledge.models import LearningCreate, RunCreate  # noqa: E402
from evoteam.servers.knowledge.store import Actor  # noqa: E402
from tests.knowledge.conftest import KnowledgeServer, free_port, make_token  # noqa: E402


async def copy_learnings(store: LocalKnowledgeStore, run_id: str, n: int, seed: int = 0) -> None:
    """PostgreSQL's bulk load: the rows bulk_learnings writes, with COPY in one transaction, as
    one loads a big table. The full-text index is rebuilt after the load (the migration's own
    definition, without a pending list), the counters trigger is off during the load and its
    row set from the loaded rows once (a per-row trigger updating one row a million times in
    one transaction would walk an ever longer chain of row versions), then ANALYZE, as
    autovacuum would do soon after. The store ends as add_learning would have left it."""
    rng = random.Random(seed)
    run = await store.get_run(run_id)
    async with store.db.write() as conn:
        raw = conn.raw
        await raw.execute("DROP INDEX search_index_tsv")
        await raw.execute("ALTER TABLE learnings DISABLE TRIGGER run_counters_learning")
        async with raw.cursor() as cur:
            async with cur.copy('COPY learnings (id, run_id, text, kind, tags, evidence, confidence, project, '
                                '"user", client, created_at) FROM STDIN') as learnings:
                index = []
                for i in range(n):
                    lid, text = new_id("lrn"), sentence(rng, i)
                    await learnings.write_row((lid, run_id, text, "observation", "[]", "[]", 0.5, run.project,
                                               "bench", "bench", now()))
                    index.append(("observation: ", text, index_filters("learning", run_id, run.project),
                                  "learning", lid, run_id, run.project))
            async with cur.copy("COPY search_index (title, body, filters, kind, ref_id, run_id, project) "
                                "FROM STDIN") as entries:
                for row in index:
                    await entries.write_row(row)
        await raw.execute("ALTER TABLE learnings ENABLE TRIGGER run_counters_learning")
        await raw.execute("UPDATE run_counters SET learnings = learnings + %s WHERE run_id = %s", (n, run_id))
        await raw.execute(SEARCH_GIN.format(name="search_index_tsv"))
    async with store.db.read() as conn:
        await conn.raw.execute("ANALYZE")


async def bulk_load(store: LocalKnowledgeStore, run_id: str, n: int) -> None:
    if getattr(store.db, "dialect", "sqlite") == "postgres":
        await copy_learnings(store, run_id, n)
    else:
        await bulk_learnings(store, run_id, n)


async def store_rows(backend: str, where, size: int, calls: int) -> list[tuple]:
    rng = random.Random(size)
    async with LocalKnowledgeStore.open(where, Actor(user="bench")) as store:
        run = await store.start_run(RunCreate(goal="backends"))
        await bulk_load(store, run.id, size)
        for _ in range(10):  # warm-up: connections, caches
            await store.get_run(run.id)
            await store.search(typical_query(rng), run_id=run.id)
        reads = await time_calls(lambda i: store.get_run(run.id), calls)
        writes = await time_calls(lambda i: store.add_learning(LearningCreate(run_id=run.id, text=f"new fact {i}")),
                                  calls)
        doc = await time_calls(lambda i: store.render_learnings(run.id), max(10, calls // 5))
        queries = [typical_query(rng) for _ in range(calls)]
        search = await time_calls(lambda i: store.search(queries[i], run_id=run.id), calls)
    out = []
    for label, values in (("get_run", reads), ("add_learning", writes), ("learnings document", doc),
                          ("search (two words)", search)):
        out.append((backend, f"{size:,}", label, *(fmt_ms(pct(values, q)).strip() for q in (.5, .9, .99)),
                    fmt_ms(max(values)).strip()))
    return out


async def write_rate(servers: list[KnowledgeServer], token: str, clients: int, each: int, runs: int) -> float:
    """add_learning writes/s from `clients` concurrent clients spread over `servers`, into one
    run shared by all (runs=1) or a run of each client's own (runs=clients)."""
    def connect(i: int):
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120)
        return Client(streamable_http_client(servers[i % len(servers)].url, http_client=http))

    async with connect(0) as c:
        run_ids = [(await c.call_tool("start_run", {"goal": "throughput"})).structured_content["id"]
                   for _ in range(runs)]

    async def writer(i: int) -> None:
        async with connect(i) as c:
            for j in range(each):
                r = await c.call_tool("add_learning", {"run_id": run_ids[i % runs], "text": f"w{i} {j}",
                                                       "idempotency_key": f"{clients}-{i}-{j}"})
                assert not r.is_error, r.content

    start = time.perf_counter()
    await asyncio.gather(*(writer(i) for i in range(clients)))
    return clients * each / (time.perf_counter() - start)


def rate_rows(backend: str, where, home: Path, writes: int, reps: int) -> list[tuple]:
    """One server against two replicas, measured alternately `reps` times (so both see the same
    moments of a noisy machine): median and range of each, and the ratio of the medians."""
    token = make_token(where, "bench", None)
    servers = [KnowledgeServer(db=where, port=free_port(), home=home).start() for _ in range(2)]
    for s in servers:  # keep reading what the servers log, or a full pipe would stall them mid-run
        threading.Thread(target=s.process.stderr.read, daemon=True).start()
    rows = []
    try:
        for clients in (16, 64):
            each = max(2, writes // clients)
            for runs, label in ((1, "one run"), (clients, "a run each")):
                one, two = [], []
                for _ in range(reps):
                    one.append(asyncio.run(write_rate(servers[:1], token, clients, each, runs)))
                    two.append(asyncio.run(write_rate(servers, token, clients, each, runs)))
                m1, m2 = statistics.median(one), statistics.median(two)
                rows.append((backend, clients, label, f"{m1:.0f} ({min(one):.0f}–{max(one):.0f})",
                             f"{m2:.0f} ({min(two):.0f}–{max(two):.0f})", f"{m2 / m1:.2f}×"))
    finally:
        for s in servers:
            s.kill()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000", help="learnings per store, comma-separated")
    parser.add_argument("--calls", type=int, default=100, help="timed calls per operation")
    parser.add_argument("--writes", type=int, default=640, help="writes per throughput measurement")
    parser.add_argument("--reps", type=int, default=3, help="alternating repetitions of each throughput measurement")
    parser.add_argument("--no-rates", action="store_true", help="latency only (e.g. a 1M-learning run on its own)")
    parser.add_argument("--pg-url", default=None, help="an existing PostgreSQL (a superuser URL to its "
                                                       "'postgres' database); default: start a throwaway one")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    from tests.support.postgres import PostgresServer, start_server, stop_server

    server: PostgresServer | None = None
    if args.pg_url:
        import uuid

        import psycopg

        def new_database() -> str:
            name = f"bench_{uuid.uuid4().hex[:8]}"
            with psycopg.connect(args.pg_url, autocommit=True) as conn:
                conn.execute(f"CREATE DATABASE {name}")
            return args.pg_url.rsplit("/", 1)[0] + "/" + name
    else:
        server = start_server()
        new_database = server.new_database
    load = " ".join(open("/proc/loadavg").read().split()[:3]) if os.path.exists("/proc/loadavg") else "?"
    print(f"store backends side by side; sizes {sizes}; {os.cpu_count()} CPUs; load average {load}")
    try:
        with tempfile.TemporaryDirectory(prefix="evoteam-bench-") as tmp:
            tmp = Path(tmp)
            rows = []
            for size in sizes:
                rows += asyncio.run(store_rows("SQLite", tmp / f"s{size}.db", size, args.calls))
                rows += asyncio.run(store_rows("PostgreSQL", new_database(), size, args.calls))
            table("In process: latency (ms)", ("backend", "learnings", "operation", "p50", "p90", "p99", "max"), rows)
            if not args.no_rates:
                rates = rate_rows("SQLite", tmp / "rate.db", tmp, args.writes, args.reps)
                rates += rate_rows("PostgreSQL", new_database(), tmp, args.writes, args.reps)
                table(f"add_learning over HTTP: writes/s, one server and two replicas on the same store, alternately "
                      f"{args.reps} times: median (range)",
                      ("backend", "clients", "runs written", "1 server", "2 replicas", "2 / 1"), rates)
    finally:
        if server is not None:
            stop_server(server)
    load = " ".join(open("/proc/loadavg").read().split()[:3]) if os.path.exists("/proc/loadavg") else "?"
    print(f"\nload average after: {load}")


if __name__ == "__main__":
    main()
