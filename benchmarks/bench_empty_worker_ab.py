"""Where the empty calls run, before and after a change, measured alternately in one session.

Until 2026-12-02 the empty calls (the call path alone, subtracted from every time) ran on the
baseline's worker, so in the balanced order a baseline call could follow a call in its own
process and a candidate's never; since then they run in a confined worker of their own (the
empty-call worker, measurement/session.py). This script compares two source trees evaluation
by evaluation: this checkout ("new") and another one given with --old (a `git archive` of an
earlier commit, with --old-python a Python that imports evoteam from that tree). Each tree runs
in a process of its own for the whole session (so each keeps its own trusted worker from one
evaluation to the next, as a bench server does), and the two take turns, which of them goes
first alternating pair by pair, so a stretch of load lands on both alike.

On each CPU kernel kit (dev split), N pairs (default 12) of:
- **a copy of the kit's baseline** (truth 1): the score, each workload's speedup, and how many
  of them lie below 1 and how many intervals contain 1;
- **`examples/better.py`**: the score and its CV;
and the wall time of every evaluation as the caller sees it (the empty-call worker is one more
process per evaluation). Prints a table; every number comes with its spread.

`--pool FILE...` reads the `--raw` files of several runs instead and prints, per kit and tree,
how many of the copy's scores and workload speedups lie below 1 with a two-sided sign test (a
harness that treats both sides alike puts about half of them there), and the wall time's
difference pair by pair.

Usage: python benchmarks/bench_empty_worker_ab.py --old /tmp/old-tree --old-python /tmp/old-venv/bin/python
       [--pairs 12] [--kits rmsnorm_cpu,pairwise_distance_cpu] [--raw FILE]
       python benchmarks/bench_empty_worker_ab.py --pool RAW1 RAW2 ...
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# One evaluation per line read: "<kit> <copy|better>"; one JSON line written back.
SERVE = r"""
import asyncio, json, sys, tempfile, time
from pathlib import Path
from evoteam.config import load_settings
from evoteam.servers.bench.evaluation.core import evaluate_candidate
from evoteam.servers.bench.formats.kits import discover
settings = load_settings()
settings.db = Path(tempfile.mkdtemp(prefix="evoteam-ab-")) / "kb.db"
kits = discover(settings)

async def main():
    for line in sys.stdin:
        name, which = line.split()
        kit = kits[name]
        code = (kit.starting_point() if which == "copy" else kit.file(kit.manifest.examples["better"])).read_text()
        t0 = time.perf_counter()
        e = await evaluate_candidate(settings, kit, code=code)
        wall = time.perf_counter() - t0
        print(json.dumps({"status": e.status, "message": (e.message or "")[:300], "score": e.score,
                          "interval": e.score_interval, "wall": wall, "method": e.metrics.get("timing_method"),
                          "path": {k: v.get("call_path_subtracted_us") for k, v in (e.metrics.get("timing") or {}).items()},
                          "workloads": [[w.workload, w.speedup, w.speedup_interval, w.candidate_ms, w.baseline_ms]
                                        for w in e.workloads]}), flush=True)

asyncio.run(main())
"""


class Tree:
    """A source tree's evaluation process, kept for the whole session."""

    def __init__(self, python: str, tree: Path):
        self.proc = subprocess.Popen([python, "-c", SERVE], cwd=tree, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)

    def evaluate(self, kit: str, which: str) -> dict:
        self.proc.stdin.write(f"{kit} {which}\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the evaluation process ended (exit {self.proc.wait()})")
        return json.loads(line)

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=120)


def spread(xs: list[float], fmt: str = ".3f") -> str:
    """Median [min-max] of ``xs``."""
    return f"{statistics.median(xs):{fmt}} [{min(xs):{fmt}}-{max(xs):{fmt}}]"


def cv(xs: list[float]) -> float:
    return statistics.stdev(xs) / statistics.mean(xs) * 100 if len(xs) > 1 else 0.0


def quartiles(xs: list[float]) -> str:
    if len(xs) < 2:
        return f"{xs[0]:.2f}"
    q = statistics.quantiles(xs, n=4)
    return f"{statistics.median(xs):.2f} [{q[0]:.2f}-{q[2]:.2f}]"


def summarise(kit: str, tree: str, which: str, evals: list[dict]) -> list[str]:
    scores = [e["score"] for e in evals]
    wls: dict[str, list] = {}
    for e in evals:
        for name, s, iv, c, b in e["workloads"]:
            wls.setdefault(name, []).append((s, iv, c, b, (e.get("path") or {}).get(name)))
    head = (f"{kit:<22} | {tree:<3} | {which:<6} | {len(evals):>2} | {spread(scores)} | {cv(scores):5.2f} | "
            f"{quartiles([e['wall'] for e in evals])}")
    if which == "copy":
        covers = sum(e["interval"][0] <= 1 <= e["interval"][1] for e in evals)
        wl_cov = sum(iv[0] <= 1 <= iv[1] for v in wls.values() for _, iv, *_ in v)
        head += f" | score covers 1: {covers}/{len(evals)}, workloads {wl_cov}/{sum(map(len, wls.values()))}"
    lines = [head]
    for name, v in wls.items():
        xs = [s for s, *_ in v]
        below = f", below 1 in {sum(x < 1 for x in xs)}/{len(xs)}" if which == "copy" else ""
        ms = (f"; net ms candidate {statistics.median(c for _, _, c, _, _ in v):.3f}, baseline "
              f"{statistics.median(b for _, _, _, b, _ in v):.3f}")
        paths = [p for *_, p in v if p is not None]
        path = f"; path subtracted {spread(paths, '.0f')} us" if paths else ""
        lines.append(f"{'':<22} |     |        |    |   {name}: {spread(xs)}{below}{ms}{path}")
    return lines


def sign_p(k: int, n: int) -> float:
    """Two-sided sign test: the chance of a split at least as uneven as k of n under a fair coin."""
    tail = sum(math.comb(n, i) for i in range(min(k, n - k) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def pool(files: list[Path]) -> None:
    """Per kit and tree over every run's raw lines: the copy's scores and workload speedups below 1
    (with the sign test), and the wall time new less old, pair by pair."""
    rows = [dict(json.loads(line), run=i) for i, f in enumerate(files) for line in f.open() if line.strip()]
    rows = [r for r in rows if r["status"] == "PASSED"]
    print(f"# pooled over {len(files)} runs ({', '.join(f.name for f in files)})")
    for kit in dict.fromkeys(r["kit"] for r in rows):
        for tree in ("old", "new"):
            copy = [r for r in rows if r["kit"] == kit and r["tree"] == tree and r["which"] == "copy"]
            cells = [("score", [r["score"] for r in copy])]
            for name in dict.fromkeys(w[0] for r in copy for w in r["workloads"]):
                cells.append((name, [w[1] for r in copy for w in r["workloads"] if w[0] == name]))
            for name, xs in cells:
                below = sum(x < 1 for x in xs)
                print(f"{kit:<22} | {tree:<3} | copy {name:<15} | median {statistics.median(xs):.3f} | below 1 in "
                      f"{below:>2}/{len(xs):<2} | sign test p = {sign_p(below, len(xs)):.2g}")
        for which in ("copy", "better"):
            pairs: dict[tuple, dict] = {}
            for r in rows:
                if r["kit"] == kit and r["which"] == which:
                    pairs.setdefault((r["run"], r["pair"]), {})[r["tree"]] = r["wall"]
            d = [p["new"] - p["old"] for p in pairs.values() if len(p) == 2]
            old = statistics.median(p["old"] for p in pairs.values() if "old" in p)
            q = statistics.quantiles(d, n=4) if len(d) > 1 else [d[0]] * 3
            print(f"{kit:<22} | wall new - old, {which:<6}: median {statistics.median(d):+.3f} s [q1 {q[0]:+.3f}, "
                  f"q3 {q[2]:+.3f}] over {len(d)} pairs, new slower in {sum(x > 0 for x in d)}; old's median {old:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pool", nargs="+", type=Path, help="summarise these --raw files of earlier runs")
    parser.add_argument("--old", type=Path)
    parser.add_argument("--old-python")
    parser.add_argument("--pairs", type=int, default=12)
    parser.add_argument("--kits", default="rmsnorm_cpu,pairwise_distance_cpu")
    parser.add_argument("--raw", type=Path, help="also write every evaluation's result here (JSON lines)")
    args = parser.parse_args()
    if args.pool:
        pool(args.pool)
        return
    if not args.old or not args.old_python:
        parser.error("--old and --old-python are needed (or --pool)")
    trees = {"new": Tree(sys.executable, HERE.parent), "old": Tree(args.old_python, args.old)}
    raw = args.raw.open("a") if args.raw else None
    out: list[str] = []
    try:
        for kit in args.kits.split(","):
            got: dict[tuple[str, str], list[dict]] = {}
            load0, t0 = os.getloadavg(), time.strftime("%H:%M:%S", time.gmtime())
            for i in range(args.pairs):
                order = ("new", "old") if i % 2 == 0 else ("old", "new")
                for which in ("copy", "better"):
                    for tree in order:
                        e = trees[tree].evaluate(kit, which)
                        if raw:
                            raw.write(json.dumps(dict(e, kit=kit, tree=tree, which=which, pair=i)) + "\n")
                            raw.flush()
                        if e["status"] != "PASSED":
                            print(f"{kit} {tree} {which}: {e['status']}: {e['message']}", file=sys.stderr)
                            continue
                        got.setdefault((tree, which), []).append(e)
            start = len(out)
            load1, t1 = os.getloadavg(), time.strftime("%H:%M:%S", time.gmtime())
            methods = {t: sorted({str(e["method"]) for (tt, _), es in got.items() if tt == t for e in es})
                       for t in trees}
            out.append(f"# {kit}: {args.pairs} pairs, {t0}-{t1} UTC; load average before "
                       f"{' '.join(f'{x:.2f}' for x in load0)}, after {' '.join(f'{x:.2f}' for x in load1)}; "
                       f"timing_method new {methods['new']} old {methods['old']}")
            for which in ("copy", "better"):
                for tree in ("old", "new"):
                    out.extend(summarise(kit, tree, which, got.get((tree, which), [])))
            print("\n".join(out[start:]), flush=True)
    finally:
        for t in trees.values():
            t.close()
        if raw:
            raw.close()
    print()
    print("kit                    | tree| code   |  n | score median [min-max] | CV %  | wall s per evaluation "
          "median [q1-q3]")
    print("\n".join(out))
    print("(old: the empty calls on the baseline's worker; new: in a worker of their own. copy: a copy of the "
          "kit's baseline, truth 1; better: examples/better.py. Pairs alternate which tree goes first.)")


if __name__ == "__main__":
    main()
