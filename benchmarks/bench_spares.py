"""What spare workers save (measurement/sparepool.py), measured side by side.

On each CPU kernel kit, evaluations of the kit's known-better example alternate between the two
ways a process can start its timed workers: fresh (as a one-shot CLI evaluation does) and taken
from spares started when the previous evaluation closed (as the bench server and a kept slot
runner do). The order within each pair alternates too. Per way: the evaluation's wall time, the
harness's own time (wall less the timed kernel calls), the start step alone, and the score, each
as a median with its interquartile range; then the ratio of the two ways' own times per pair,
median [min-max]. The spares' CPU time (spent while no evaluation ran) is printed beside: spares
move that work off an evaluation's path, they do not remove it.

Usage: python benchmarks/bench_spares.py [--pairs 8] [--kits a,b]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_harness import PhaseClock, cpu_kernel_kits, spares_settled  # noqa: E402

from evoteam.servers.bench.confinement.workerenv import tuning_env  # noqa: E402
from evoteam.servers.bench.evaluation.core import evaluate_candidate  # noqa: E402
from evoteam.servers.bench.measurement import sparepool  # noqa: E402


def q(values: list[float], digits: int = 3) -> str:
    if len(values) < 2:
        return f"{values[0]:.{digits}f}"
    lo, mid, hi = statistics.quantiles(values, n=4)
    return f"{statistics.median(values):.{digits}f} [{lo:.{digits}f}-{hi:.{digits}f}]"


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--kits", default="")
    args = parser.parse_args()
    settings, tmp, kits = cpu_kernel_kits(args.kits)
    print(f"# bench_spares.py --pairs {args.pairs}; {os.cpu_count()} CPUs; load average before: "
          + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    print("kit                   | workers | n  | wall s [IQR]        | own s [IQR]         | start ms [IQR]    "
          "| score [IQR]            | spare CPU s, off the path")
    ratios_all = []
    for kit in kits:
        m = kit.manifest
        path = kit.file(m.examples["better"])
        env = tuning_env(m.threads, False, m.worker_env)
        got: dict[str, dict[str, list[float]]] = {w: {"wall": [], "own": [], "start": [], "score": [], "cpu": []}
                                                  for w in ("fresh", "spares")}
        await evaluate_candidate(settings, kit, candidate_path=str(path))  # the kit's trusted worker, kept
        ratios = []
        for i in range(args.pairs):
            order = ("fresh", "spares") if i % 2 == 0 else ("spares", "fresh")
            own = {}
            for way in order:
                cpu = 0.0
                if way == "spares":
                    sparepool.keep()
                    sparepool.refill(env, m.memory_limit_mb, 3)
                    cpu = spares_settled(3)
                else:
                    sparepool.keep(False)
                time.sleep(0.3)  # both ways start from a settled machine
                with PhaseClock() as clock:
                    e = await evaluate_candidate(settings, kit, candidate_path=str(path))
                sparepool.keep(False)  # what this evaluation's close started is not measured
                assert e.status == "PASSED", e.message
                g = got[way]
                g["wall"].append(e.metrics["wall_s"])
                g["own"].append(e.metrics["harness_overhead_s"])
                g["start"].append(clock.spent.get("start", 0.0) * 1e3)
                g["score"].append(e.score)
                g["cpu"].append(cpu)
                own[way] = e.metrics["harness_overhead_s"]
            ratios.append(own["spares"] / own["fresh"])
        ratios_all.append((kit.name, ratios))
        for way, g in got.items():
            cpu = f"{statistics.median(g['cpu']):.2f} per evaluation" if way == "spares" else "-"
            print(f"{kit.name:<21} | {way:<7} | {len(g['wall']):<2} | {q(g['wall']):<19} | {q(g['own']):<19} | "
                  f"{q(g['start'], 0):<17} | {q(g['score']):<22} | {cpu}")
    print("\nown time with spares / fresh, per pair (median [min-max]):")
    for name, ratios in ratios_all:
        print(f"{name:<21} {statistics.median(ratios):.2f} [{min(ratios):.2f}-{max(ratios):.2f}]  ({len(ratios)} pairs)")
    print("# load average after: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    asyncio.run(main())
