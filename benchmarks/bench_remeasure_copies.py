"""A re-measurement batch in copies against one process a side: what do its numbers tell apart?

`bench.remeasure` times a run's finalists and a copy of the baseline in one interleaved batch
(report/batchruns.py). Since 2026-12-05 a batch of up to COPIED_SIDES sides times each side, the
baseline's included, in three processes (measurement/copies.py); a larger one keeps one process a
side. This times the same three sides both ways, batch by batch in a drawn order, on each CPU
kernel kit (dev split, the tool's default 10 rounds):

- **copy**: the baseline's code with a comment added (its true speedup is 1);
- **slower**: the baseline doing 10% more work (bench_noise.EXTRA_PASS): a finalist close to another;
- **better**: the kit's `examples/better.py`;
- **baseline**: the A/A side every kernel re-measurement adds.

Per way it prints each side's score (median over the batches), its CV over the batches, the
median interval width hi/lo and how many intervals exclude 1; for two pairs of finalists, as the
run keeps them (knowledge/comparisons.record_of: what version gains pool), how many were
significant: copy against the baseline's copy (an A/A: false alarms, goal 1 in 20 or fewer), copy
against slower (10% apart: goal most) and copy against better (an A/B: goal every one); and the
median wall time of a batch.

Usage: python benchmarks/bench_remeasure_copies.py [--batches 10] [--kits a,b] [--busy 0|2]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_noise import EXTRA_PASS, busy_loops  # noqa: E402

from evoteam.config import load_settings  # noqa: E402
from evoteam.report import batchruns  # noqa: E402
from evoteam.servers.bench.formats.kits import find_kit  # noqa: E402
from evoteam.servers.knowledge.comparisons import record_of  # noqa: E402

WAYS = ("one process", "copies")
SIDES = ("copy", "slower", "better", "baseline")
PAIRS = (("copy", batchruns.COPY), ("copy", "slower"), ("copy", "better"))


async def one(settings, kit, codes: dict[str, str], way: str, rounds: int) -> dict:
    """Each side's (score, lo, hi), each pair's significance, and the batch's wall seconds."""
    batchruns.COPIED_SIDES = 6 if way == "copies" else 0
    t = time.perf_counter()
    results, paired = await batchruns.measure_sides(settings, kit, codes, "dev", rounds, None)
    wall = time.perf_counter() - t
    for label, e in results.items():
        if e.status != "PASSED" or not e.score_interval:
            raise SystemExit(f"{kit.name}: {way}: {label}: {e.status}: {e.message}")
    found = {label: (e.score, *e.score_interval) for label, e in results.items()}
    for a, b in PAIRS:
        record = record_of(a, b, kit=kit.name, split="dev", kind="kernel", samples=paired.samples(a, b),
                           ranges=paired.ranges(a, b), contended=False, measured_at=datetime.now(UTC),
                           spread=paired.spread(a, b))
        found[f"{a}/{b}"] = record.significant
    found["wall"] = wall
    return found


async def main(args) -> None:
    settings = load_settings()
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load average {os.getloadavg()}; "
          f"{args.batches} batches each way, in a drawn order each time; {args.rounds} rounds; busy loops {args.busy}")
    print(f"{'kit':22} | {'way':11} | {'side':8} | {'score':>7} | {'CV %':>5} | {'hi/lo':>6} | {'excl. 1':>8}")
    for name in args.kits.split(","):
        kit = find_kit(settings, name)
        base = kit.starting_point().read_text()
        codes = {"copy": base + "\n# a copy\n", "slower": base + EXTRA_PASS.format(f=0.10),
                 "better": kit.file(kit.manifest.examples["better"]).read_text(), "baseline": base}
        found: dict[str, list[dict]] = {way: [] for way in WAYS}
        for _ in range(args.batches):
            for way in random.sample(WAYS, len(WAYS)):
                found[way].append(await one(settings, kit, codes, way, args.rounds))
        for way, rows in found.items():
            for side in SIDES:
                got = [r[side] for r in rows]
                scores = [g[0] for g in got]
                cv = 100 * statistics.stdev(scores) / statistics.mean(scores) if len(scores) > 1 else float("nan")
                print(f"{name:22} | {way:11} | {side:8} | {statistics.median(scores):7.3f} | {cv:5.2f} | "
                      f"{statistics.median(g[2] / g[1] for g in got):6.3f} | "
                      f"{sum(not g[1] <= 1 <= g[2] for g in got):3} of {len(got):<2}")
            pairs = "; ".join(f"{a} vs {b}: significant {sum(r[f'{a}/{b}'] for r in rows)} of {len(rows)}"
                              for a, b in PAIRS)
            print(f"{name:22} | {way:11} | {pairs}; {statistics.median(r['wall'] for r in rows):.2f} s a batch",
                  flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--kits", default="rmsnorm_cpu,pairwise_distance_cpu")
    parser.add_argument("--busy", type=int, default=0)
    args = parser.parse_args()
    with busy_loops(args.busy):
        asyncio.run(main(args))
