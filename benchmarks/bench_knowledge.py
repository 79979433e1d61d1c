"""Knowledge store benchmark: prints tables; asserts nothing.

    .venv/bin/python benchmarks/bench_knowledge.py            # full (100k search, memory server at 10k)
    .venv/bin/python benchmarks/bench_knowledge.py --quick    # smaller sizes

Measures, in one run so ratios are comparable on a noisy shared machine:
  1. tool-call latency p50/p99 in memory, over stdio and over HTTP (get_run and add_learning);
  2. writes/s with 16 concurrent HTTP clients;
  3. search latency at 1k, 10k and 100k learnings (store layer and through MCP in memory);
  4. cold start: process start to a listed toolset (stdio);
  5. side by side with the official MCP memory server (@modelcontextprotocol/server-memory from
     npm, over stdio) on add-an-observation vs add-a-learning and search, at 1k and 10k entries.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evoteam.config import load_settings  # noqa: E402
from evoteam.servers.knowledge.local import LocalKnowledgeStore  # noqa: E402
from evoteam.servers.knowledge.rows import index_filters, new_id, now  # noqa: E402
from evoteam.servers.knowledge.models import RunCreate  # noqa: E402
from evoteam.servers.knowledge.server import build_server  # noqa: E402
from evoteam.servers.knowledge.store import Actor  # noqa: E402
from tests.knowledge.conftest import KnowledgeServer, free_port, make_token  # noqa: E402

WORDS = ("kernel tile warp shared memory bank conflict vectorise unroll prefetch pipeline stage "
         "softmax reduction register spill occupancy latency bandwidth cache flush layout swizzle "
         "packing radius lattice gradient polish anneal restart mutation crossover overlap").split()


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def fmt_ms(seconds: float) -> str:
    return f"{seconds * 1000:8.2f}"


# A Zipf-distributed vocabulary (domain words first, then synthetic ones), so word frequencies
# look like real notes: a few words are everywhere, most are rare.
VOCAB = WORDS + [f"term{i}" for i in range(5000)]
ZIPF = [1.0 / (rank + 1) ** 1.07 for rank in range(len(VOCAB))]


def sentence(rng: random.Random, i: int) -> str:
    return f"fact {i}: " + " ".join(rng.choices(VOCAB, weights=ZIPF, k=14))


def typical_query(rng: random.Random) -> str:
    """Two words drawn the way they occur in the notes themselves."""
    return " ".join(rng.choices(VOCAB, weights=ZIPF, k=2))


async def bulk_learnings(store: LocalKnowledgeStore, run_id: str, n: int, seed: int = 0) -> None:
    """Fast set-up: rows written directly in large transactions, as add_learning writes them."""
    rng = random.Random(seed)
    run = await store.get_run(run_id)
    batch = 5000
    for start in range(0, n, batch):
        async with store.db.write() as conn:
            rows, index = [], []
            for i in range(start, min(n, start + batch)):
                lid, text = new_id("lrn"), sentence(rng, i)
                rows.append((lid, run_id, text, "observation", "[]", "[]", 0.5, run.project, "bench", "bench", now()))
                index.append(("observation: ", text, index_filters("learning", run_id, run.project), "learning", lid,
                              run_id, run.project))
            await conn.executemany(
                "INSERT INTO learnings (id, run_id, text, kind, tags, evidence, confidence, project, user, client, "
                "created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)", rows)
            await conn.executemany(
                "INSERT INTO search_index (title, body, filters, kind, ref_id, run_id, project) "
                "VALUES (?,?,?,?,?,?,?)", index)


async def time_calls(call, n: int) -> list[float]:
    out = []
    for i in range(n):
        t = time.perf_counter()
        await call(i)
        out.append(time.perf_counter() - t)
    return out


async def latency_rows(tmp: Path, n: int) -> list[tuple]:
    rows = []
    env = {**os.environ, "EVOTEAM_DB": str(tmp / "lat.db"), "HOME": str(tmp)}
    env.pop("EVOTEAM_KNOWLEDGE_URL", None)

    async def measure(label: str, client: Client) -> None:
        run_id = (await client.call_tool("start_run", {"goal": "latency"})).structured_content["id"]
        for _ in range(20):  # warm-up
            await client.call_tool("get_run", {"run_id": run_id})
        reads = await time_calls(lambda i: client.call_tool("get_run", {"run_id": run_id}), n)
        writes = await time_calls(lambda i: client.call_tool("add_learning", {"run_id": run_id, "text": f"x {i}"}), n)
        rows.append((label, "get_run", fmt_ms(pct(reads, .5)), fmt_ms(pct(reads, .99))))
        rows.append((label, "add_learning", fmt_ms(pct(writes, .5)), fmt_ms(pct(writes, .99))))

    async with LocalKnowledgeStore.open(tmp / "mem.db", Actor(user="bench")) as store:
        async with Client(build_server(load_settings(), store)) as client:
            await measure("in memory", client)
    params = StdioServerParameters(command=sys.executable, args=["-m", "evoteam.cli", "serve", "knowledge"], env=env)
    async with Client(params) as client:
        await measure("stdio", client)
    token = make_token(tmp / "http.db", "bench", None)
    server = KnowledgeServer(db=tmp / "http.db", port=free_port(), home=tmp).start()
    try:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"})
        async with Client(streamable_http_client(server.url, http_client=http)) as client:
            await measure("HTTP", client)
        rate = await concurrent_writes(server, token)
    finally:
        server.kill()
    return rows, rate


async def concurrent_writes(server: KnowledgeServer, token: str, clients: int = 16, each: int = 40) -> float:
    async def connect():
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
        return Client(streamable_http_client(server.url, http_client=http))

    async with await connect() as c:
        run_id = (await c.call_tool("start_run", {"goal": "throughput"})).structured_content["id"]

    async def writer(i: int) -> None:
        async with await connect() as c:
            for j in range(each):
                r = await c.call_tool("add_learning", {"run_id": run_id, "text": f"w{i} {j}",
                                                       "idempotency_key": f"{i}-{j}"})
                assert not r.is_error

    start = time.perf_counter()
    await asyncio.gather(*(writer(i) for i in range(clients)))
    return clients * each / (time.perf_counter() - start)


async def search_rows(tmp: Path, sizes: list[int], queries: int) -> list[tuple]:
    rows = []
    rng = random.Random(1)
    for n in sizes:
        async with LocalKnowledgeStore.open(tmp / f"search{n}.db", Actor(user="bench")) as store:
            run = await store.start_run(RunCreate(goal="search"))
            await bulk_learnings(store, run.id, n)
            qs = [typical_query(rng) for _ in range(queries)]
            for q in qs[:10]:
                await store.search(q, run_id=run.id)
            direct = await time_calls(lambda i: store.search(qs[i], run_id=run.id), queries)
            async with Client(build_server(load_settings(), store)) as client:
                via = await time_calls(lambda i: client.call_tool("search", {"query": qs[i]}), queries)
            # Worst case: the single most frequent word, present in most notes.
            common = await time_calls(lambda i: store.search(VOCAB[0], run_id=run.id), max(20, queries // 5))
            hits = await store.search(VOCAB[0], run_id=run.id)
            share = f"{'≥ ' if hits.total_capped else ''}{100 * hits.total / n:.0f}% match"
        rows.append((f"{n:,}", fmt_ms(pct(direct, .5)), fmt_ms(pct(direct, .99)), fmt_ms(pct(via, .5)),
                     fmt_ms(pct(via, .99)), f"{fmt_ms(pct(common, .99))} ({share})"))
    return rows


def cold_start(tmp: Path, repeats: int = 5) -> list[float]:
    env = {**os.environ, "EVOTEAM_DB": str(tmp / "cold.db"), "HOME": str(tmp)}
    env.pop("EVOTEAM_KNOWLEDGE_URL", None)

    async def once() -> float:
        params = StdioServerParameters(command=sys.executable, args=["-m", "evoteam.cli", "serve", "knowledge"],
                                       env=env)
        t = time.perf_counter()
        async with Client(params) as client:
            await client.list_tools()
            return time.perf_counter() - t

    return [asyncio.run(once()) for _ in range(repeats)]


# ---------------------------------------------------------------- the official memory server


def memory_server_entry() -> Path | None:
    """Install @modelcontextprotocol/server-memory from npm into a cache folder (once)."""
    if not shutil.which("npm") or not shutil.which("node"):
        return None
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "evoteam-bench" / "memory-server"
    entry = cache / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js"
    if not entry.exists():
        cache.mkdir(parents=True, exist_ok=True)
        result = subprocess.run(["npm", "install", "--silent", "--prefix", str(cache),
                                 "@modelcontextprotocol/server-memory"], capture_output=True, text=True, timeout=300)
        if result.returncode != 0 or not entry.exists():
            print(f"(memory server not installable: {result.stderr.strip()[:200]})")
            return None
    return entry


async def versus_memory_server(tmp: Path, sizes: list[int], ops: int) -> list[tuple]:
    entry = memory_server_entry()
    rows = []
    for n in sizes:
        rng = random.Random(2)
        texts = [sentence(rng, i) for i in range(n)]
        # Memory server: n entities with one observation each, written as its own JSONL file.
        mem_file = tmp / f"memory{n}.jsonl"
        mem_file.write_text("\n".join(json.dumps({"type": "entity", "name": f"e{i}", "entityType": "fact",
                                                  "observations": [t]}) for i, t in enumerate(texts)))
        env = {**os.environ, "EVOTEAM_DB": str(tmp / f"vs{n}.db"), "HOME": str(tmp)}
        env.pop("EVOTEAM_KNOWLEDGE_URL", None)
        async with LocalKnowledgeStore.open(tmp / f"vs{n}.db", Actor(user="bench")) as store:
            run = await store.start_run(RunCreate(goal="versus"))
            await bulk_learnings(store, run.id, n, seed=2)
        query = "term40"  # a mid-frequency word: ~1% of entries
        ours_params = StdioServerParameters(command=sys.executable,
                                            args=["-m", "evoteam.cli", "serve", "knowledge"], env=env)
        async with Client(ours_params) as c:
            add = await time_calls(lambda i: c.call_tool("add_learning", {"run_id": run.id, "text": f"new {i}"}), ops)
            find = await time_calls(lambda i: c.call_tool("search", {"query": query, "limit": 10}), ops)
        ours = (statistics.median(add), statistics.median(find))
        theirs = (float("nan"), float("nan"))
        if entry:
            mem_params = StdioServerParameters(command="node", args=[str(entry)],
                                               env={**os.environ, "MEMORY_FILE_PATH": str(mem_file)})
            async with Client(mem_params) as c:
                add = await time_calls(lambda i: c.call_tool("add_observations", {"observations": [
                    {"entityName": f"e{i}", "contents": [f"new {i}"]}]}), ops)
                find = await time_calls(lambda i: c.call_tool("search_nodes", {"query": query}), ops)
            theirs = (statistics.median(add), statistics.median(find))
        for op, o, t in (("add", ours[0], theirs[0]), ("search", ours[1], theirs[1])):
            ratio = t / o if t == t else float("nan")
            rows.append((f"{n:,}", op, fmt_ms(o), fmt_ms(t) if t == t else "     n/a", f"{ratio:6.1f}x"))
    return rows


def table(title: str, header: tuple, rows: list[tuple]) -> None:
    print(f"\n{title}")
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    print("  ".join(str(h).rjust(w) for h, w in zip(header, widths)))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(str(x).rjust(w) for x, w in zip(row, widths)))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer calls")
    args = parser.parse_args()
    calls = 100 if args.quick else 300
    search_sizes = [1_000, 10_000] if args.quick else [1_000, 10_000, 100_000]
    vs_sizes = [1_000] if args.quick else [1_000, 10_000]
    with tempfile.TemporaryDirectory(prefix="evoteam-bench-") as tmp:
        tmp = Path(tmp)
        lat, rate = asyncio.run(latency_rows(tmp, calls))
        table("Tool-call latency (ms)", ("transport", "tool", "p50", "p99"), lat)
        table("Concurrent writes over HTTP", ("clients", "writes/s"), [(16, f"{rate:8.0f}")])
        table("Search latency (ms): typical two-word queries; last column the most common word alone",
              ("learnings", "store p50", "store p99", "MCP p50", "MCP p99", "common-word p99"),
              asyncio.run(search_rows(tmp, search_sizes, calls)))
        cold = cold_start(tmp)
        table("Cold start, stdio: spawn → tools listed (s)", ("median", "max"),
              [(f"{statistics.median(cold):.2f}", f"{max(cold):.2f}")])
        table("evoteam vs @modelcontextprotocol/server-memory over stdio (median ms; ratio = memory/evoteam)",
              ("entries", "op", "evoteam", "memory", "ratio"),
              asyncio.run(versus_memory_server(tmp, vs_sizes, 30 if args.quick else 150)))


if __name__ == "__main__":
    main()
