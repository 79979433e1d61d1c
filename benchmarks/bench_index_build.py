"""knowledge.search v2's index build on PostgreSQL while another replica writes: the earlier way
(CREATE INDEX inside the migration's transaction) against this one (CREATE INDEX CONCURRENTLY
outside it, pgschema.build_bucket_index); prints a table; asserts nothing.

    nice -n 19 .venv/bin/python benchmarks/bench_index_build.py --size 200000 --repeats 5

One store of `--size` learnings (bench_backends.copy_learnings, into a throwaway server). Each
repeat builds the bucketed index beside the store's own both ways, in alternating order, then
drops it, while a second store (another replica's pool) adds learnings one after the other for
as long as the build runs. Reported: the build's wall time, and the writes started during it
(the last of them may finish after it) with their latency. The earlier way's build takes a SHARE
lock for its whole length, so a write started during it waits for the commit.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_backends import copy_learnings  # noqa: E402
from benchmarks.bench_knowledge import pct, table  # noqa: E402
from evoteam.servers.knowledge import pgschema  # noqa: E402
from evoteam.servers.knowledge.local import LocalKnowledgeStore  # noqa: E402
from evoteam.servers.knowledge.models import LearningCreate, RunCreate  # noqa: E402
from evoteam.servers.knowledge.pg import _SyncConnection  # noqa: E402
from evoteam.servers.knowledge.store import Actor  # noqa: E402


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def in_transaction(url: str) -> None:
    """The earlier way (05fc974's bucket_index, without the swap)."""
    import psycopg

    with psycopg.connect(url) as conn:
        conn.execute("SET LOCAL maintenance_work_mem = '256MB'")
        conn.execute("SET LOCAL statement_timeout = 0")
        conn.execute(pgschema.SEARCH_GIN.format(name="search_index_tsv_v2"))
        conn.commit()


def concurrently(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        pgschema.build_bucket_index(_SyncConnection(conn))


async def one_build(url: str, writer: LocalKnowledgeStore, run_id: str, build) -> tuple[float, list[float]]:
    task = asyncio.ensure_future(asyncio.to_thread(build, url))
    started = time.perf_counter()
    latencies = []
    while not task.done():
        t = time.perf_counter()
        await writer.add_learning(LearningCreate(run_id=run_id, text=f"written during the build {t}"))
        latencies.append(time.perf_counter() - t)  # the last may have waited for the build's commit
    await task
    took = time.perf_counter() - started
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP INDEX search_index_tsv_v2")
    return took, latencies


async def measure(url: str, size: int, repeats: int) -> list[tuple]:
    async with LocalKnowledgeStore.open(url, Actor(user="bench")) as store:
        run_id = (await store.start_run(RunCreate(goal="index build"))).id
        started = time.perf_counter()
        await copy_learnings(store, run_id, size)
        print(f"built {size:,} learnings in {time.perf_counter() - started:.0f} s; load average {load()}", flush=True)
    ways = {"in the migration's transaction (before)": in_transaction, "CONCURRENTLY, outside it (now)": concurrently}
    results: dict[str, list[tuple[float, list[float]]]] = {name: [] for name in ways}
    async with LocalKnowledgeStore.open(url, Actor(user="bench")) as writer:
        for i in range(repeats):
            order = list(ways) if i % 2 == 0 else list(reversed(ways))
            for name in order:
                results[name].append(await one_build(url, writer, run_id, ways[name]))
                took, lat = results[name][-1]
                print(f"  repeat {i + 1} {name}: {took:.2f} s, {len(lat)} writes", flush=True)
    rows = []
    for name, runs in results.items():
        builds = [took for took, _ in runs]
        latencies = [x for _, lat in runs for x in lat]
        rows.append((name, f"{statistics.median(builds):.2f}", f"{min(builds):.2f}-{max(builds):.2f}",
                     f"{statistics.median([len(lat) for _, lat in runs]):.0f}",
                     f"{pct(latencies, 0.5) * 1000:.1f}" if latencies else "-",
                     f"{pct(latencies, 0.99) * 1000:.1f}" if latencies else "-",
                     f"{max(latencies) * 1000:.1f}" if latencies else "-"))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=200_000, help="learnings in the store")
    parser.add_argument("--repeats", type=int, default=5, help="builds each way, alternating")
    args = parser.parse_args()
    print(f"knowledge.search v2 index build, {args.size:,} learnings, {args.repeats} repeats each way; "
          f"load average before {load()}", flush=True)
    from tests.support.postgres import start_server, stop_server

    server = start_server()
    try:
        rows = asyncio.run(measure(server.new_database(), args.size, args.repeats))
    finally:
        stop_server(server)
    table("Build while another replica writes (writes: those started during the build, one at a time)",
          ("way", "build s median", "build s min-max", "writes per build", "write p50 ms", "write p99 ms",
           "write max ms"), rows)
    print(f"\nload average after: {load()}")


if __name__ == "__main__":
    main()
