"""Harness overhead before and after a change, measured alternately on a busy machine.

On a shared machine the load moves by a factor of two within minutes, so two runs of
bench_harness.py taken one after the other compare the load, not the code. This script
alternates, evaluation by evaluation: the harness of this checkout ("new"), the harness of
another source tree given with --old (a checkout or `git archive` of an earlier commit, run
with --old-python, a Python that imports evoteam from that tree), and the minimal honest
harness of bench_harness.py, on the same CPU kernel kit and candidate (`examples/better.py`).
It prints per kit the median harness overhead of each (wall time less the time inside timed
kernel calls, as the evaluation reports it) with its quartiles, and the ratios to the minimal
harness's.

Usage: python benchmarks/bench_harness_ab.py --old /tmp/old-tree --old-python /tmp/old-venv/bin/python
       [--pairs 8] [--kits a,b]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ONE = r"""
import asyncio, json, sys, tempfile
from pathlib import Path
from evoteam.config import load_settings
from evoteam.servers.bench.evaluation.core import evaluate_candidate
from evoteam.servers.bench.formats.kits import discover
settings = load_settings()
settings.db = Path(tempfile.mkdtemp(prefix="evoteam-ab-")) / "kb.db"
kit = discover(settings)[sys.argv[1]]
e = asyncio.run(evaluate_candidate(settings, kit, candidate_path=str(kit.file(kit.manifest.examples["better"]))))
assert e.status == "PASSED", e.message
print(json.dumps({"overhead": e.metrics["harness_overhead_s"], "wall": e.metrics["wall_s"], "score": e.score,
                  "workloads": [[w.workload, w.candidate_ms, w.baseline_ms] for w in e.workloads]}))
"""


def _ours(python: str, tree: Path, kit: str) -> dict:
    out = subprocess.run([python, "-c", ONE, kit], cwd=tree, capture_output=True, text=True, check=True,
                         timeout=600)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _quartiles(xs: list[float]) -> tuple[float, float, float]:
    if len(xs) < 2:
        return xs[0], xs[0], xs[0]
    q = statistics.quantiles(xs, n=4)
    return q[0], statistics.median(xs), q[2]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--old", required=True, type=Path)
    parser.add_argument("--old-python", required=True)
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--kits", default="pairwise_distance_cpu,rmsnorm_cpu")
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    from bench_harness import minimal_harness  # the same minimal harness, in this checkout

    from evoteam.config import load_settings
    from evoteam.servers.bench.formats.kits import discover

    kits = discover(load_settings())
    rows, accuracy = [], []
    for name in args.kits.split(","):
        kit = kits[name]
        got: dict[str, list[float]] = {"new": [], "old": [], "minimal": []}
        scores: dict[str, list[float]] = {"new": [], "old": [], "minimal": []}
        per_wl: dict[str, dict[str, list]] = {"new": {}, "old": {}, "minimal": {}}
        loads = []
        for _ in range(args.pairs):  # new, old, minimal in turn, so load hits all three alike
            loads.append(os.getloadavg()[0])
            for which, python, tree in (("new", sys.executable, HERE.parent), ("old", args.old_python, args.old)):
                one = _ours(python, tree, name)
                got[which].append(one["overhead"])
                scores[which].append(one["score"])
                for wl, cand_ms, base_ms in one.get("workloads", []):
                    per_wl[which].setdefault(wl, []).append((cand_ms, base_ms))
            wall, inside, speedup, m_wl = minimal_harness(kit, kit.file(kit.manifest.examples["better"]))
            got["minimal"].append(wall - inside)
            scores["minimal"].append(speedup)
            for w, mw in zip(kit.dev_workloads(), m_wl):
                per_wl["minimal"].setdefault(w.uuid, []).append((mw["candidate"], mw["baseline"]))
        rows.append((name, {k: _quartiles(v) for k, v in got.items()}, min(loads), max(loads)))
        accuracy.append((name, scores, per_wl))
    print("kit                    | harness | overhead s: q1 / median / q3 | median ratio to minimal")
    print("-----------------------|---------|-------------------------------|------------------------")
    for name, q, lo, hi in rows:
        for which in ("old", "new", "minimal"):
            q1, med, q3 = q[which]
            ratio = med / q["minimal"][1]
            print(f"{name:<22} | {which:<7} | {q1:5.2f} / {med:5.2f} / {q3:5.2f}            | {ratio:.2f}x")
        print(f"{name:<22} | load average (1 min) during the pairs: {lo:.1f}–{hi:.1f}")
    print(f"({args.pairs} evaluations of each, alternating new / old / minimal; overhead = wall time less the time "
          f"inside timed kernel calls; {os.cpu_count()} CPUs)")
    print("\nAccuracy and spread: per-workload median ms of the candidate (and baseline) over the evaluations, "
          "and the score's CV")
    for name, scores, per_wl in accuracy:
        for which in ("old", "new", "minimal"):
            xs = [x for x in scores[which] if x]
            cv = statistics.stdev(xs) / statistics.mean(xs) * 100 if len(xs) > 1 else 0.0
            cells = []
            for wl, pairs in per_wl[which].items():
                cand = statistics.median(c for c, _ in pairs if c is not None)
                base = statistics.median(b for _, b in pairs if b is not None)
                cells.append(f"{wl} {cand:.3f} ({base:.2f})")
            print(f"{name:<22} | {which:<7} | score median {statistics.median(xs):7.3f} CV {cv:5.2f}% | "
                  + " | ".join(cells))


if __name__ == "__main__":
    main()
