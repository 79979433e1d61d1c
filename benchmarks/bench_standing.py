"""What `bench.evaluate`'s `standing` line costs: one `trajectory` read of the run after recording,
beside the record itself, for runs of growing size. Prints a table; asserts nothing.

Each run holds N verified kernel candidates with ten rounds on each of three workloads (as a
CPU kit's evaluation records them), every tenth one measured twice so pooling is exercised, and C
kept compares (30 paired rounds on each workload, between the best and a random other: the pairs
the trajectory reads). The
record (`record_candidate` of one more) and the standing (`run_standing`) are timed alternately
on the same store, so both see the same machine; the ratio is the extra an evaluate pays.

    .venv/bin/python benchmarks/bench_standing.py [--sizes 10 100 1000] [--compares 0 20] [--calls 15]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from evoteam.codehash import code_hash
from evoteam.servers.bench.evaluation.standing import run_standing
from evoteam.servers.knowledge.comparisons import keep_comparison, record_of
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.models import CandidateCreate, RunCreate
from evoteam.servers.knowledge.store import Actor

WORKLOADS = ("t256_h4096", "t1024_h2048", "t64_h8192")


def record(run_id: str, i: int, rng: random.Random) -> CandidateCreate:
    code = f"def run(x):\n    return x * {i}\n"
    speed = rng.uniform(0.8, 4.0)
    samples = {w: [speed * rng.uniform(0.93, 1.07) for _ in range(10)] for w in WORKLOADS}
    return CandidateCreate(run_id=run_id, code=code, code_hash=code_hash(code), status="PASSED",
                           score=speed, samples=samples, verified=True)


async def one_size(tmp: Path, n: int, compares: int, calls: int) -> tuple:
    rng = random.Random(n)
    async with LocalKnowledgeStore.open(tmp / f"kb{n}-{compares}.db", Actor(user="bench", verifier=True)) as kb:
        run = await kb.start_run(RunCreate(goal="standing", kit="rmsnorm_cpu", direction="maximize", x0=1.0))
        ids = []
        for i in range(n):
            ids.append((await kb.record_candidate(record(run.id, i, rng))).id)
            if i % 10 == 0:
                await kb.record_candidate(record(run.id, i, rng))  # the same code again: pooled
        best = (await kb.get_run(run.id)).best_candidate_id
        for j in range(compares):
            other = rng.choice([i for i in ids if i != best])
            ratio = rng.uniform(0.9, 1.1)
            samples = {w: [ratio * rng.uniform(0.97, 1.03) for _ in range(30)] for w in WORKLOADS}
            await keep_comparison(kb, run.id, record_of(other, best, kit="rmsnorm_cpu", split="dev", kind="kernel",
                                                        samples=samples, ranges=None, contended=False,
                                                        measured_at=datetime.now(UTC) + timedelta(seconds=j)))
        rec, stand = [], []
        for j in range(calls):
            t0 = time.perf_counter()
            saved = await kb.record_candidate(record(run.id, n + j, rng))
            t1 = time.perf_counter()
            line = await run_standing(kb, saved, "kernel")
            t2 = time.perf_counter()
            assert line, "a verified passing candidate has a standing"
            rec.append(t1 - t0)
            stand.append(t2 - t1)
    ms = lambda xs: statistics.median(xs) * 1e3  # noqa: E731
    ratios = sorted(s / r for s, r in zip(stand, rec))
    lo, hi = ratios[len(ratios) // 4], ratios[(3 * len(ratios)) // 4]
    return n, compares, f"{ms(rec):.2f}", f"{ms(stand):.2f}", f"{statistics.median(ratios):.2f} ({lo:.2f}–{hi:.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--compares", type=int, nargs="+", default=[0, 20])
    parser.add_argument("--calls", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [asyncio.run(one_size(Path(tmp), n, c, args.calls)) for n in args.sizes for c in args.compares]
    header = ("candidates", "compares", "record ms", "standing ms", "standing/record (IQR)")
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    print("\nbench.evaluate's standing line against the record it follows (medians of "
          f"{args.calls} calls each, alternated)")
    print("  ".join(str(h).rjust(w) for h, w in zip(header, widths)))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(str(x).rjust(w) for x, w in zip(row, widths)))


if __name__ == "__main__":
    main()
