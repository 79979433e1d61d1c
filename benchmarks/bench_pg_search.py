"""PostgreSQL store latency at one size, with search optionally side by side with another version of
pgsearch.py: prints a table; asserts nothing.

    nice -n 19 .venv/bin/python benchmarks/bench_pg_search.py --size 100000
    git show main:evoteam/servers/knowledge/pgsearch.py > /tmp/pgsearch_main.py
    nice -n 19 .venv/bin/python benchmarks/bench_pg_search.py --size 1000000 --baseline /tmp/pgsearch_main.py
    .venv/bin/python benchmarks/bench_pg_search.py --url postgresql://... --run RUN_ID  # a store built before

bench_backends.py's in-process measurement (its `time_calls`, `typical_query`, `pct`; the same
seeds), PostgreSQL only, so a 1M-learning store is built once (its `copy_learnings`, into a
throwaway server, or reused with --url/--run) and a change to search can be measured against the
previous code on the same store: with --baseline, each query runs on both, one right after the
other, so both see the same moments of a noisy machine, and which runs first alternates from
query to query (the first warms the query's pages for the second).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_backends import copy_learnings  # noqa: E402
from benchmarks.bench_knowledge import fmt_ms, pct, table, time_calls, typical_query  # noqa: E402
from evoteam.servers.knowledge.local import LocalKnowledgeStore  # noqa: E402
from evoteam.servers.knowledge.models import LearningCreate, RunCreate  # noqa: E402
from evoteam.servers.knowledge.store import Actor  # noqa: E402


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


async def measure(url: str, run_id: str | None, size: int, calls: int, baseline, seed: int | None) -> list[tuple]:
    rng = random.Random(size if seed is None else seed)
    async with LocalKnowledgeStore.open(url, Actor(user="bench")) as store:
        if run_id is None:
            run_id = (await store.start_run(RunCreate(goal="backends"))).id
            started = time.perf_counter()
            await copy_learnings(store, run_id, size)
            print(f"built {size:,} learnings in {time.perf_counter() - started:.0f} s; load average {load()}",
                  flush=True)
        for _ in range(10):  # warm-up: connections, caches
            await store.get_run(run_id)
            await store.search(typical_query(rng), run_id=run_id)
        reads = await time_calls(lambda i: store.get_run(run_id), calls)
        writes = await time_calls(lambda i: store.add_learning(LearningCreate(run_id=run_id, text=f"new fact {i}")),
                                  calls)
        doc = await time_calls(lambda i: store.render_learnings(run_id), max(10, calls // 5))
        queries = [typical_query(rng) for _ in range(calls)]
        this, before = [], []

        async def timed(search, into: list) -> None:
            started = time.perf_counter()
            await search()
            into.append(time.perf_counter() - started)

        for i, q in enumerate(queries):
            pair = [(lambda: store.search(q, run_id=run_id), this)]
            if baseline is not None:
                pair.append((lambda: baseline.search(store, q, run_id, None, 10, None), before))
            # Which goes first alternates: the first to read a query's pages brings them into
            # PostgreSQL's buffers, and at 1M learnings the second then ran up to 3x faster.
            for search, into in (pair if i % 2 == 0 else pair[::-1]):
                await timed(search, into)
    timed = [("get_run", reads), ("add_learning", writes), ("learnings document", doc),
             ("search (two words)", this)] + ([("search (two words), baseline", before)] if before else [])
    return [(f"{size:,}", label, *(fmt_ms(pct(v, q)).strip() for q in (.5, .9, .99)), fmt_ms(max(v)).strip())
            for label, v in timed]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000, help="learnings in the store (built unless --url)")
    parser.add_argument("--calls", type=int, default=100, help="timed calls per operation")
    parser.add_argument("--url", help="a store built before (with --run): no build")
    parser.add_argument("--run", help="the run holding its learnings")
    parser.add_argument("--baseline", type=Path, help="another pgsearch.py whose search() is timed alternately")
    parser.add_argument("--seed", type=int, help="of the queries (default: the size); another seed per round keeps "
                                                 "one round's queries from finding the last one's pages cached")
    args = parser.parse_args()
    baseline = None
    if args.baseline:
        # Its folder is searched first: a baseline can bring the helpers of its own commit (e.g.
        # that commit's pgranges.py as pgranges_baseline.py, its import renamed to match).
        sys.path.insert(0, str(args.baseline.resolve().parent))
        spec = importlib.util.spec_from_file_location("pgsearch_baseline", args.baseline)
        baseline = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = baseline  # a dataclass in it looks its module up while being made
        spec.loader.exec_module(baseline)
    print(f"PostgreSQL store, {args.size:,} learnings; load average before {load()}", flush=True)
    server = None
    url = args.url
    if url is None:
        from tests.support.postgres import start_server

        server = start_server()
        url = server.new_database()
    try:
        rows = asyncio.run(measure(url, args.run if args.url else None, args.size, args.calls, baseline, args.seed))
    finally:
        if server is not None:
            from tests.support.postgres import stop_server

            stop_server(server)
    table("In process: latency (ms)", ("learnings", "operation", "p50", "p90", "p99", "max"), rows)
    print(f"\nload average after: {load()}")


if __name__ == "__main__":
    main()
