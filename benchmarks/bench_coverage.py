"""Do an evaluation's intervals hold across evaluations? Coverage of the truth, and false "new bests".

`compare` tests two candidates inside one batch; a team also compares candidates evaluated in
*separate* evaluations (a new best is announced when its `score_interval` clears the
incumbent's). Each evaluation is a new pair of worker processes, with its own memory layout and
its own moment of the machine, which the rounds of one batch cannot see. This checks whether
the intervals are wide enough for that use. For each CPU kernel kit (dev split), N separate
evaluations (default 20) of:

- **a copy of the baseline** (the truth is known: speedup 1): how many `score_interval`s, and
  how many workloads' `speedup_interval`s, contain 1 (goal: about 95% or more);
- **`examples/better.py`** (the truth unknown; the median of all N scores stands in for it): how
  many intervals contain that median;

and for both, over every ordered pair of evaluations (i before j), how often j's interval lies
wholly above i's, and how often the product would then announce identical code as a new best —
never from an evaluation marked contended (goal: rare, ~0).

`--busy 2` runs two busy loops meanwhile. Prints a table; numbers come with their spread.

Usage: python benchmarks/bench_coverage.py [--evaluations 20] [--kits a,b] [--busy 0|2] [--repeats 1]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
from pathlib import Path

from evoteam.config import load_settings
from evoteam.servers.bench.evaluation.core import evaluate_candidate
from bench_noise import busy_loops, cpu_kernel_kits


def contains(interval, value: float) -> bool:
    return bool(interval) and interval[0] <= value <= interval[1]


def false_clears(intervals: list, busy: list[bool] | None = None) -> tuple[int, int]:
    """Ordered pairs (i < j) where j's interval lies wholly above i's: a "new best" between two
    evaluations of code of the same speed. With ``busy`` (each evaluation marked contended), the
    pairs the product would announce: neither measured on a contended machine
    (knowledge/measurements.py)."""
    pairs = hits = 0
    busy = busy or [False] * len(intervals)
    for i, a in enumerate(intervals):
        for j in range(i + 1, len(intervals)):
            pairs += 1
            hits += intervals[j][0] > a[1] and not busy[i] and not busy[j]
    return hits, pairs


def summarise(label: str, evaluations: list, truth: float | None) -> str:
    scores = [e.score for e in evaluations]
    intervals = [e.score_interval for e in evaluations]
    centre = statistics.median(scores) if truth is None else truth
    covered = sum(contains(iv, centre) for iv in intervals)
    wl_total = wl_covered = 0
    if truth is not None:
        for e in evaluations:
            for w in e.workloads:
                wl_total += 1
                wl_covered += contains(w.speedup_interval, truth)
    hits, pairs = false_clears(intervals)
    marks = [(e.metrics or {}).get("contention", {}) for e in evaluations]
    announced, _ = false_clears(intervals, [bool(m.get("contended")) for m in marks])
    widths = [iv[1] / iv[0] for iv in intervals]
    cv = statistics.stdev(scores) / statistics.mean(scores) * 100 if len(scores) > 1 else 0.0
    why = {rule: sum(any(r.startswith(rule) or f" {rule}" in r for r in m.get("reasons") or []) for m in marks)
           for rule in ("load", "runnable", "call path")}
    contended = (f"{sum(bool(m.get('contended')) for m in marks)} (load {why['load']}, runnable {why['runnable']}, "
                 f"path {why['call path']})")
    wl = f"{wl_covered}/{wl_total}" if wl_total else "-"
    return (f"{label:<34} | {len(scores):>3} | {statistics.median(scores):8.3f} [{min(scores):.3f}-{max(scores):.3f}] | "
            f"{cv:6.2f} | {statistics.median(widths):6.3f} | {covered:>3}/{len(scores):<3} | {wl:>7} | "
            f"{hits:>4}/{pairs:<4} | {announced:>4}/{pairs:<4} | {contended}")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--evaluations", type=int, default=20)
    parser.add_argument("--kits", default="")
    parser.add_argument("--busy", type=int, default=0, help="busy loops to run meanwhile (0 or 2)")
    parser.add_argument("--repeats", type=int, default=1, help="evaluate's repeats: N times the kit's rounds")
    args = parser.parse_args()
    settings = load_settings()
    tmp = tempfile.TemporaryDirectory(prefix="evoteam-coverage-")
    settings.db = Path(tmp.name) / "kb.db"
    kits = cpu_kernel_kits(settings, args.kits)
    print(f"# bench_coverage.py --evaluations {args.evaluations} --busy {args.busy} --repeats {args.repeats}; "
          "load average before: "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    lines = []
    with busy_loops(args.busy):
        for kit in kits:
            copy = kit.starting_point().read_text()
            better = kit.file(kit.manifest.examples["better"]).read_text()
            same, fast = [], []
            for _ in range(args.evaluations):  # in turn, so a stretch of load hits both alike
                for name, code, out in (("baseline copy", copy, same), ("better", better, fast)):
                    e = await evaluate_candidate(settings, kit, code=code, repeats=args.repeats)
                    if e.status != "PASSED":
                        print(f"{kit.name}: {name}: {e.status}: {e.message}", file=sys.stderr)
                        continue
                    out.append(e)
            lines.append(summarise(f"{kit.name}, baseline copy (truth 1)", same, 1.0))
            lines.append(summarise(f"{kit.name}, better.py (median)", fast, None))
    print(f"{'kit, candidate (truth)':<34} | {'n':>3} | score median [min-max]   | CV %   | hi/lo  | "
          f"covers  | wl cov  | clears    | announced | contended")
    print("\n".join(lines))
    print("(covers: evaluations whose score_interval contains the truth; wl cov: workloads whose "
          "speedup_interval contains 1; clears: ordered pairs of evaluations where the later "
          "interval lies wholly above the earlier; announced: of those, the pairs the product would announce as a "
          "new best (neither evaluation marked contended); hi/lo: median interval width; contended: evaluations marked so, "
          "and how many by each rule: the load average, other runnable processes, the call path's floor)")
    print(f"# load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    asyncio.run(main())
