"""Harness overhead and repeatability on the CPU kernel kits.

For each CPU kernel kit, evaluate the kit's known-better example five times (dev split) and print:
- wall time per evaluation, the time spent inside timed calls (both sides, as the harness clocks
  them: resume, call, stop), and the harness overhead = wall - that time (process start, input
  generation, reference runs, correctness and per-call output checks, transfers);
- the coefficient of variation of the geometric-mean speedup over the five repeats.

Targets on a 2-core machine: overhead <= 1 s per evaluation, CV <= 3 %.
Usage: python benchmarks/bench_harness.py [--repeats 5] [--kits a,b]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
from pathlib import Path

from evoteam.config import load_settings
from evoteam.servers.bench.core import evaluate_candidate
from evoteam.servers.bench.kits import discover


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--kits", default="")
    parser.add_argument("--candidate", default="better", help="example to evaluate: better or baseline")
    args = parser.parse_args()
    settings = load_settings()
    tmp = tempfile.TemporaryDirectory(prefix="evoteam-bench-")
    settings.db = Path(tmp.name) / "kb.db"
    kits = [k for k in discover(settings).values() if k.manifest.kind == "kernel" and k.manifest.device == "cpu"]
    if args.kits:
        wanted = set(args.kits.split(","))
        kits = [k for k in kits if k.name in wanted]
    rows = []
    for kit in kits:
        if args.candidate == "baseline":
            path = kit.starting_point()
        else:
            path = kit.file(kit.manifest.examples["better"])
        scores, walls, overheads, kernels = [], [], [], []
        for _ in range(args.repeats):
            e = await evaluate_candidate(settings, kit, candidate_path=str(path))
            assert e.status == "PASSED", e.message
            scores.append(e.score)
            walls.append(e.metrics["wall_s"])
            overheads.append(e.metrics["harness_overhead_s"])
            kernels.append(e.metrics["wall_s"] - e.metrics["harness_overhead_s"])
        mean = statistics.mean(scores)
        cv = statistics.stdev(scores) / mean * 100 if len(scores) > 1 else 0.0
        rows.append((kit.name, args.candidate, len(kit.dev_workloads()), statistics.median(walls),
                     statistics.median(kernels), statistics.median(overheads),
                     statistics.median(overheads) / len(kit.dev_workloads()), mean, cv))
    header = ("kit", "candidate", "workloads", "wall s", "kernel s", "overhead s", "overhead/wl s",
              "speedup (mean)", "speedup CV %")
    widths = [max(len(h), 22 if i == 0 else 10) for i, h in enumerate(header)]
    print(" | ".join(h.ljust(w) for h, w in zip(header, widths)))
    print("-|-".join("-" * w for w in widths))
    for r in rows:
        cells = [r[0], r[1], str(r[2]), f"{r[3]:.2f}", f"{r[4]:.2f}", f"{r[5]:.2f}", f"{r[6]:.2f}", f"{r[7]:.3f}",
                 f"{r[8]:.2f}"]
        print(" | ".join(c.ljust(w) for c, w in zip(cells, widths)))
    tmp.cleanup()
    print(f"(median over {args.repeats} evaluations each; overhead = wall time minus time inside timed "
          "kernel calls of candidate and baseline)")


if __name__ == "__main__":
    asyncio.run(main())
