"""What `get_run` pays for naming the candidate the kept paired rounds find better: prints a table.

The knowledge server's `get_run`, the hooks' run summary, prior work and the roles' brief read a
run's kept paired rounds (knowledge/pairedbest.py) beside the store's best. This builds one SQLite
store per size with a run of C candidates whose top by intervals is in P kept compares (each pair
30 rounds on 3 workloads, one of them a significant win over the top), then times the store's
`get_run` alone and `with_paired_best` on it, alternating the two, on the same machine; "first"
is the first read in the process, which bootstraps every pair it reads (later reads reuse the
verdicts of batches they read before: comparisons.paired_verdict).

    .venv/bin/python benchmarks/bench_paired_best.py [--pairs 0 5 20 60] [--calls 9]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from evoteam.codehash import code_hash
from evoteam.servers.knowledge import comparisons
from evoteam.servers.knowledge.comparisons import keep_comparison, record_of
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.models import CandidateCreate, RunCreate
from evoteam.servers.knowledge.pairedbest import with_paired_best
from evoteam.servers.knowledge.store import Actor


def _samples(center: float, spread: float, n: int, rng: random.Random) -> dict[str, list[float]]:
    return {w: [center * (1 + rng.uniform(-spread, spread)) for _ in range(n)] for w in ("a", "b", "c")}


async def build(kb: LocalKnowledgeStore, pairs: int) -> tuple[str, str]:
    rng = random.Random(pairs)
    run = await kb.start_run(RunCreate(goal="paired best", kit="k", direction="maximize", x0=1.0))
    ids = []
    for i in range(max(pairs + 1, 2)):
        # The first ranks first by a narrow interval; the others' wide ones rank them below it.
        code = f"def run(x):\n    return x * {i + 1}\n"
        ids.append((await kb.record_candidate(CandidateCreate(
            run_id=run.id, code=code, code_hash=code_hash(code), status="PASSED", verified=True,
            score=4.0 if i == 0 else 3.9, samples=_samples(4.0, .005, 20, rng) if i == 0 else
            _samples(3.9, .6, 8, rng)))).id)
    for j in range(pairs):
        ratio = 1.08 if j == pairs - 1 else 1.0  # the last one beats the top; the rest tie with it
        await keep_comparison(kb, run.id, record_of(
            ids[0], ids[j + 1], kit="k", split="dev", kind="kernel", ranges=None, contended=False,
            samples={w: [ratio * (1 + rng.uniform(-.01, .01)) for _ in range(30)] for w in ("a", "b", "c")},
            measured_at=datetime.now(UTC)))
    return run.id, ids[pairs] if pairs else ids[0]


async def timed(fn, calls: int) -> list[float]:
    out = []
    for _ in range(calls):
        start = time.perf_counter()
        await fn()
        out.append((time.perf_counter() - start) * 1e3)
    return out


async def main(pairs_list: list[int], calls: int) -> None:
    print(f"{'pairs':>5}  {'get_run ms (median, min-max)':>30}  {'with paired best ms':>28}  {'ratio':>6}  "
          f"{'first ms':>8}  paired_best")
    for pairs in pairs_list:
        with tempfile.TemporaryDirectory() as tmp:
            async with LocalKnowledgeStore.open(Path(tmp) / "kb.db", Actor(user="b", verifier=True)) as kb:
                run_id, expected = await build(kb, pairs)
                comparisons._VERDICTS.clear()  # the first read bootstraps every pair it reads
                first = (await timed(lambda: _both(kb, run_id), 1))[0]
                plain, paired = [], []
                for _ in range(3):  # alternated: both see the same machine
                    plain += await timed(lambda: kb.get_run(run_id), calls)
                    paired += await timed(lambda: _both(kb, run_id), calls)
                run = await with_paired_best(kb, await kb.get_run(run_id))
                ok = (run.paired_best or run.best_candidate_id) == expected
        p, q = statistics.median(plain), statistics.median(paired)
        print(f"{pairs:>5}  {p:>12.2f} ({min(plain):.2f}-{max(plain):.2f}){'':>8}  {q:>12.2f} "
              f"({min(paired):.2f}-{max(paired):.2f}){'':>4}  {q / p:>6.1f}  {first:>8.1f}  "
              f"{'as built' if ok else 'WRONG'}")


async def _both(kb, run_id: str):
    return await with_paired_best(kb, await kb.get_run(run_id))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, nargs="+", default=[0, 5, 20, 60])
    parser.add_argument("--calls", type=int, default=9)
    args = parser.parse_args()
    asyncio.run(main(args.pairs, args.calls))
