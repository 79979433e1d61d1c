"""The bootstrap behind every kit score and contrast (evoteam/stats.py), vectorised against the
pure-Python resampling it replaced, side by side in one run.

The knowledge store computes a candidate's interval inside the write that pools a new measurement
into it (up to MAX_ROUNDS_KEPT = 400 rounds per workload), and run_report computes one contrast per
team version. Per size this prints the time of one kit score and one contrast (three workloads,
2,000 resamples) both ways, median and range over the repeats, with the ratio; then the wall time
of the pooled write itself on an embedded store, both ways, as a candidate's rounds grow; then
that write with the drift check between measurements (knowledge/pooling.py) and without it.

Usage: python benchmarks/bench_stats.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from evoteam import stats
from evoteam.codehash import code_hash
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.models import CandidateCreate, RunCreate
from evoteam.servers.knowledge.store import Actor

VECTORISED = stats._statistic_draws


def plain_draws(rng, samples, kind, resamples):
    """The loop before: every resample's values drawn one by one, the statistic computed on them."""
    import numpy as np

    r = random.Random(int(rng.integers(0, 2**63)))
    stat = stats.statistic_for(kind)
    return np.asarray([stat({k: [vs[int(r.random() * len(vs))] for _ in vs] for k, vs in samples.items()})
                       for _ in range(resamples)])


def timed(fn, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1e3)
    return out


def cell(ms: list[float]) -> str:
    return f"{statistics.median(ms):8.1f} [{min(ms):.1f}-{max(ms):.1f}]"


async def pooled_writes(rounds_per_write: int, writes: int) -> list[float]:
    """ms per record_candidate of the same code, each adding ``rounds_per_write`` rounds."""
    rng = random.Random(1)
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        async with LocalKnowledgeStore.open(Path(tmp) / "kb.db", Actor(user="u", client="b")) as kb:
            run = await kb.start_run(RunCreate(goal="g", kit="k", direction="maximize", x0=1.0))
            bench = kb.with_actor(Actor(user="u", client="b", verifier=True))
            code = "def run(x):\n    return x\n"
            for _ in range(writes):
                samples = {w: [rng.lognormvariate(math.log(4), 0.05) for _ in range(rounds_per_write)]
                           for w in ("a", "b", "c")}
                spec = CandidateCreate(run_id=run.id, code=code, code_hash=code_hash(code), status="PASSED",
                                       score=4.0, samples=samples, verified=True)
                t = time.perf_counter()
                await bench.record_candidate(spec)
                out.append((time.perf_counter() - t) * 1e3)
    return out


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    stats.score_estimate({"a": [1.0, 2.0], "b": [1.0, 2.0]})  # numpy imported before anything is timed
    rng = random.Random(0)
    print("one kit score / one contrast: 3 workloads, 2,000 resamples; ms, median [min-max] over "
          f"{args.repeats} repeats")
    print(f"{'rounds/workload':>15} | {'score, plain':>22} | {'score, vectorised':>22} | {'ratio':>6} | "
          f"{'contrast, plain':>22} | {'contrast, vectorised':>22} | {'ratio':>6}")
    for n in (10, 50, 100, 400):
        a = {w: [rng.lognormvariate(1.4, 0.08) for _ in range(n)] for w in ("a", "b", "c")}
        b = {w: [rng.lognormvariate(1.45, 0.08) for _ in range(n)] for w in ("a", "b", "c")}
        row = []
        for fn in (lambda: stats.score_estimate(a), lambda: stats.contrast_estimate(a, b)):
            both: list[list[float]] = [[], []]
            for _ in range(args.repeats):  # alternating repeat by repeat: load hits both alike
                for i, draws in enumerate((plain_draws, VECTORISED)):
                    stats._statistic_draws = draws
                    both[i].extend(timed(fn, 1))
            stats._statistic_draws = VECTORISED
            row += [cell(both[0]), cell(both[1]), f"{statistics.median(both[0]) / statistics.median(both[1]):5.1f}x"]
        print(f"{n:>15} | {row[0]:>22} | {row[1]:>22} | {row[2]:>6} | {row[3]:>22} | {row[4]:>22} | {row[5]:>6}")
    print("\nthe pooled write (record_candidate of the same code, 10 rounds per workload each time, an embedded "
          "store): ms per write as the candidate's rounds grow (a pooled candidate keeps 400 per workload)")
    print(f"{'writes':>10} | {'plain':>22} | {'vectorised':>22}")
    results = {}
    for name, draws in (("plain", plain_draws), ("vectorised", VECTORISED)):
        stats._statistic_draws = draws
        results[name] = await pooled_writes(10, 45)
    stats._statistic_draws = VECTORISED
    for lo, hi in ((1, 5), (6, 15), (16, 40), (41, 45)):
        cells = [cell(results[k][lo - 1:hi]) for k in ("plain", "vectorised")]
        print(f"{f'{lo}-{hi}':>10} | {cells[0]:>22} | {cells[1]:>22}")
    await drift_check_cost()
    print(f"\n(load average {open('/proc/loadavg').read().split()[:3]}; Python {sys.version.split()[0]})")


async def drift_check_cost() -> None:
    """The pooled write with the drift check between measurements (each measurement's own interval
    estimated once more, then copystats.between_measurements) and with it switched off, run after run
    in turn, so load touches both alike."""
    from evoteam.servers.knowledge import pooling

    real = (pooling._own_interval, pooling.drift_widened)
    print("\nthe pooled write with the drift check between measurements and without it (switched off here "
          "only), 10 rounds per workload each write, 45 writes a run, runs in turn: ms per write")
    print(f"{'writes':>10} | {'with the check':>22} | {'without':>22}")
    results: dict[str, list[list[float]]] = {"with": [], "without": []}
    for _ in range(3):
        for name in ("with", "without"):
            pooling._own_interval, pooling.drift_widened = real if name == "with" else (
                lambda spec: None, lambda est, samples, history: est)
            results[name].append(await pooled_writes(10, 45))
    pooling._own_interval, pooling.drift_widened = real
    for lo, hi in ((1, 5), (6, 15), (16, 40), (41, 45)):
        cells = [cell([ms for run in results[k] for ms in run[lo - 1:hi]]) for k in ("with", "without")]
        print(f"{f'{lo}-{hi}':>10} | {cells[0]:>22} | {cells[1]:>22}")


if __name__ == "__main__":
    asyncio.run(main())
