"""How much of the score's spread over evaluations comes from the subtracted call path? (issue #21)

Every timed call's time has the call path (the median over rounds of each round's fastest empty
call, measured in the empty-call worker) subtracted. On the CPU kits the path (~0.25 ms quiet) is
as long as a good candidate's kernel, so whatever the path estimate moves by from one evaluation
to the next moves the candidate's net time by as much. This evaluates each CPU kit's better
example again and again (spares kept, as the bench server does) and prints per workload, over the
evaluations: the CV of the subtracted path, of each side's net median and of their ratio; the
correlation between the path and the candidate's net median (negative would mean the path's
noise is in the candidate's time); and the CV the ratio and the score would have with the path
held at its median over all evaluations.

Usage: python benchmarks/bench_path_noise.py [--evaluations 12] [--kits a,b]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_harness import cpu_kernel_kits, cv_interval, cv_percent as cv, spares_settled  # noqa: E402

from evoteam.servers.bench.evaluation.core import evaluate_candidate  # noqa: E402
from evoteam.servers.bench.measurement import sparepool  # noqa: E402


def corr(x: list[float], y: list[float]) -> float:
    mx, my = statistics.mean(x), statistics.mean(y)
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y))
    return sxy / math.sqrt(sum((a - mx) ** 2 for a in x) * sum((b - my) ** 2 for b in y))


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--evaluations", type=int, default=12)
    parser.add_argument("--kits", default="")
    args = parser.parse_args()
    sparepool.keep()
    settings, _tmp, kits = cpu_kernel_kits(args.kits)
    print(f"# bench_path_noise.py --evaluations {args.evaluations}; {os.cpu_count()} CPUs; load average before: "
          + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    print("kit                   | workload        | path us (CV %)  | cand ms (CV %)  | base ms (CV %)   | "
          "ratio CV %   | r(path, cand) | ratio CV %, path fixed")
    try:
        for kit in kits:
            path = kit.file(kit.manifest.examples["better"])
            rows: dict[str, list[tuple[float, float, float]]] = {}
            scores: list[float] = []
            for i in range(args.evaluations + 1):
                e = await evaluate_candidate(settings, kit, candidate_path=str(path))
                assert e.status == "PASSED", e.message
                spares_settled(3)
                if i == 0:  # warms the process and its trusted worker
                    continue
                scores.append(e.score)
                for w in e.workloads:
                    p_us = e.metrics["timing"][w.workload]["call_path_subtracted_us"]
                    rows.setdefault(w.workload, []).append((p_us, w.candidate_ms, w.baseline_ms))
            per_wl_fixed = []
            for name, vals in rows.items():
                p = [v[0] for v in vals]
                c = [v[1] for v in vals]
                b = [v[2] for v in vals]
                p_all = statistics.median(p)
                # Each side's net median with its own evaluation's path put back and the common one taken off.
                c_fixed = [ci + (pi - p_all) / 1e3 for ci, pi in zip(c, p)]
                b_fixed = [bi + (pi - p_all) / 1e3 for bi, pi in zip(b, p)]
                ratio = [bi / ci for bi, ci in zip(b, c)]
                ratio_fixed = [bi / ci for bi, ci in zip(b_fixed, c_fixed)]
                per_wl_fixed.append(ratio_fixed)
                print(f"{kit.name:<21} | {name:<15} | {statistics.median(p):6.0f} ({cv(p):4.1f})   | "
                      f"{statistics.median(c):6.3f} ({cv(c):4.1f}) | {statistics.median(b):7.3f} ({cv(b):4.1f}) | "
                      f"{cv(ratio):12.1f} | {corr(p, c):13.2f} | {cv(ratio_fixed):.1f}")
            fixed_scores = [math.exp(sum(math.log(r[i]) for r in per_wl_fixed) / len(per_wl_fixed))
                            for i in range(len(scores))]
            lo, hi = cv_interval(scores)
            flo, fhi = cv_interval(fixed_scores)
            print(f"{kit.name:<21} | score CV {cv(scores):.2f}% [{lo:.1f}-{hi:.1f}]; with the path held at its "
                  f"median over the evaluations {cv(fixed_scores):.2f}% [{flo:.1f}-{fhi:.1f}]")
    finally:
        sparepool.keep(False)
    print("# load average after: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    asyncio.run(main())
