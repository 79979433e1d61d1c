"""Processes per side in the product, side by side: does timing each side in several worker
processes (method.PROCESSES_PER_SIDE) make the score less noisy over repeated evaluations, and
what does it cost? (issue #21, the CV goal and the overhead goal)

Evaluates each CPU kit's better example again and again, the settings alternating evaluation by
evaluation (each first as often), in one process with spares kept as the bench server keeps them,
each evaluation starting only when the spares the previous one asked for have finished importing.
Prints per setting the score's median, its CV over the evaluations with a 95% interval, the
per-workload speedups' CVs and the harness's own time per evaluation; then the ratio of the CVs
with a bootstrap 95% interval (below 1: the setting helps).

Usage: python benchmarks/bench_processes_per_side.py [--evaluations 16] [--settings 1,4] [--kits a,b]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_harness import cpu_kernel_kits, cv_interval, spares_settled  # noqa: E402

from evoteam.servers.bench.evaluation.core import evaluate_candidate  # noqa: E402
from evoteam.servers.bench.measurement import method, sparepool  # noqa: E402


def cv(values: list[float]) -> float:
    return statistics.stdev(values) / statistics.mean(values) * 100


def cv_ratio_interval(a: list[float], b: list[float], draws: int = 4000) -> tuple[float, float]:
    """Bootstrap 95% interval of cv(a) / cv(b)."""
    rng = random.Random(7)
    ratios = []
    for _ in range(draws):
        ra = [rng.choice(a) for _ in a]
        rb = [rng.choice(b) for _ in b]
        if statistics.stdev(rb) > 0:
            ratios.append(cv(ra) / cv(rb))
    ratios.sort()
    return ratios[int(0.025 * len(ratios))], ratios[int(0.975 * len(ratios)) - 1]


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--evaluations", type=int, default=16)
    parser.add_argument("--settings", default="1,4", help="processes per side to compare, comma-separated")
    parser.add_argument("--kits", default="")
    args = parser.parse_args()
    settings_k = [int(x) for x in args.settings.split(",")]
    sparepool.MAX_SPARES = 2 * max(settings_k) + 1
    sparepool.keep()
    settings, _tmp, kits = cpu_kernel_kits(args.kits)
    print(f"# bench_processes_per_side.py --evaluations {args.evaluations} --settings {args.settings}; "
          f"{os.cpu_count()} CPUs; load average before: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    print("kit                   | per side | score median | score CV % [95%]    | own time s (median) | per-workload speedup CV %")
    try:
        for kit in kits:
            path = kit.file(kit.manifest.examples["better"])
            got: dict[int, list] = {k: [] for k in settings_k}
            for i in range(args.evaluations + 1):
                order = settings_k[i % len(settings_k):] + settings_k[:i % len(settings_k)]
                for k in order:
                    method.PROCESSES_PER_SIDE = k
                    e = await evaluate_candidate(settings, kit, candidate_path=str(path))
                    assert e.status == "PASSED", e.message
                    spares_settled(min(sparepool.MAX_SPARES, 2 * method.processes_per_side(kit.manifest.timing,
                                                                                              False, 2) + 1))
                    if i:  # the first round of evaluations warms the process and its trusted worker
                        got[k].append((e.score, e.metrics["harness_overhead_s"], [w.speedup for w in e.workloads]))
            for k, runs in got.items():
                scores = [s for s, _, _ in runs]
                lo, hi = cv_interval(scores)
                per = " / ".join(f"{cv([wl[j] for _, _, wl in runs]):.1f}" for j in range(len(runs[0][2])))
                print(f"{kit.name:<21} | {k:8d} | {statistics.median(scores):12.3f} | {cv(scores):5.2f} "
                      f"[{lo:.1f}-{hi:.1f}] | {statistics.median(o for _, o, _ in runs):19.3f} | {per}")
            base = settings_k[0]
            for k in settings_k[1:]:
                a, b = [s for s, _, _ in got[k]], [s for s, _, _ in got[base]]
                lo, hi = cv_ratio_interval(a, b)
                own = statistics.median(o for _, o, _ in got[k]) / statistics.median(o for _, o, _ in got[base])
                print(f"{kit.name:<21} | CV {k} per side / {base}: {cv(a) / cv(b):.2f} [{lo:.2f}-{hi:.2f}]; "
                      f"own time {own:.2f}x")
    finally:
        sparepool.keep(False)
    print("# load average after: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    asyncio.run(main())
