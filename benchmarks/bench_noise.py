"""Does `compare` tell a real difference from noise? A/A, A/B and the minimum detectable effect.

On each CPU kernel kit (dev split), with `compare` (one interleaved batch of A, B and the
baseline):

- **A/A**: the kit's baseline against a copy of itself, N trials (default 20): how many say
  `significant: true` (goal: at most 2 of 20), and the spread of the contrast;
- **A/B**: the baseline against the kit's `examples/better.py`: significant in every trial?
- **known slowdowns**: the baseline against itself with a calibrated extra pass over a fraction
  f of the rows/points (f = 5%, 10%, 20% by default; the work grows by f, the time by about f):
  how often the slowdown is found significant. The smallest f found in most trials is the
  minimum detectable effect (MDE) that docs/bench.md reports.

`--busy 2` starts two `while 1: pass` processes for the whole run (and stops them at the end),
to see the same on a contended machine; with `--bursty` they spin in bursts (0.3-1.5 s on,
0.2-1.0 s off), as a neighbour's evaluations come and go.

`--repeats 1,3` times each compare at 1x and 3x the kit's rounds in turn, trial by trial;
`--copies 2,3` runs each side of a compare in two, then three processes in turn (measurement/copies.py),
trial by trial. The `s/compare` column is the median wall time of one compare.

`--workload NAME` cuts each kit to that one dev workload (a copy of the kit in a temporary folder),
or to the workload a JSON line gives (`'{"uuid": "t256_h2048", "axes": {...}, "inputs": {...}}'`):
a kit of one workload has no other workloads' processes to average with, which is where a fixed
process widening fell short (docs/bench.md, *Comparisons*).

Usage: python benchmarks/bench_noise.py [--trials 20] [--kits a,b] [--busy 0|2] [--bursty] [--effects 0.05,0.1,0.2]
       [--repeats 1,3] [--copies 2,3] [--workload t256_h2048]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from evoteam.config import load_settings
from evoteam.servers.bench.evaluation.compare import compare_candidates
from evoteam.servers.bench.formats.kits import discover
from evoteam.servers.bench.measurement import copies

# f of the work again: the baseline, then the same function on the first f of the first axis.
EXTRA_PASS = '''

_run_once = run


def run(*args):
    out = _run_once(*args)
    part = max(1, int(round(args[0].shape[0] * {f})))
    _run_once(args[0][:part], *args[1:])
    return out
'''


def cpu_kernel_kits(settings, names: str) -> list:
    """The CPU kernel kits, or those of them named (comma-separated)."""
    kits = [k for k in discover(settings).values() if k.manifest.kind == "kernel" and k.manifest.device == "cpu"]
    return [k for k in kits if k.name in set(names.split(","))] if names else kits


def one_workload(settings, kits: list, workload: str, folder: Path) -> list:
    """Copies of the kits that have a dev workload ``workload`` (or of every kit, for a workload
    given as a JSON line), cut to it (same names: the copies' folder comes first in the settings'
    kit folders)."""
    cut = []
    for kit in kits:
        if not kit.manifest.workloads:
            continue
        lines = (kit.root / kit.manifest.workloads).read_text().splitlines()
        keep = [workload] if workload.startswith("{") else \
            [line for line in lines if line.strip() and json.loads(line).get("uuid") == workload]
        if keep:
            shutil.copytree(kit.root, folder / kit.name)
            (folder / kit.name / kit.manifest.workloads).write_text("\n".join(keep) + "\n")
            cut.append(kit.name)
    if not cut:
        raise SystemExit(f"no kit has a dev workload {workload!r}")
    settings.kits_dirs = [folder, *settings.kits_dirs]
    return [k for k in discover(settings).values() if k.name in cut]


# A bursty neighbour (another team's evaluations start and stop): busy 0.3-1.5 s, idle 0.2-1.0 s.
BURSTS = """
import random, sys, time
rng = random.Random(int(sys.argv[1]))
while True:
    t, busy = time.time(), rng.uniform(0.3, 1.5)
    while time.time() - t < busy:
        pass
    time.sleep(rng.uniform(0.2, 1.0))
"""


@contextmanager
def busy_loops(n: int, bursty: bool = False):
    """``n`` processes spinning (``while 1: pass``), or in bursts, for as long as the block runs."""
    code = BURSTS if bursty else "while 1: pass"
    busy = [subprocess.Popen([sys.executable, "-c", code, str(seed)]) for seed in range(n)]
    try:
        yield
    finally:
        for p in busy:
            p.kill()
            p.wait()


async def trials(settings, kit, a: str, b: str, n: int, setups: list[tuple[int | None, int]]) -> dict:
    """n trials of each (repeats, processes a side) setup, the setups taking turns trial by trial
    (side by side: a drift of the machine touches all of them alike); each result with its wall
    time."""
    out: dict = {s: [] for s in setups}
    for _ in range(n):
        for repeats, count in setups:
            copies.COPIES = count
            started = time.perf_counter()
            got = await compare_candidates(settings, kit.name, {"code": a}, {"code": b}, repeats=repeats)
            out[(repeats, count)].append((got, time.perf_counter() - started))
    return out


def rows(label: str, by_setup: dict) -> list[str]:
    repeats, counts = {r for r, _ in by_setup}, {c for _, c in by_setup}
    return [row(f"{label}{f' r={r}' if len(repeats) > 1 or None not in repeats else ''}"
                f"{f' k={c}' if len(counts) > 1 else ''}", timed) for (r, c), timed in by_setup.items()]


def row(label: str, timed: list) -> str:
    results = [r for r, _ in timed]
    seconds = statistics.median(t for _, t in timed)
    ok = [r for r in results if r.b_speedup_over_a is not None]
    sig = sum(r.significant for r in ok)
    values = [r.b_speedup_over_a for r in ok]
    widths = [r.interval[1] / r.interval[0] for r in ok if r.interval]
    contended = sum(r.contended for r in results)
    spread = statistics.stdev(values) / statistics.mean(values) * 100 if len(values) > 1 else 0.0
    return (f"{label:<26} | {len(results):>6} | {sig:>11} | {statistics.median(values) if values else float('nan'):8.3f} | "
            f"{spread:7.2f} | {statistics.median(widths) if widths else float('nan'):12.3f} | {contended:>9} | "
            f"{seconds:9.2f}")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--kits", default="")
    parser.add_argument("--busy", type=int, default=0, help="busy loops to run meanwhile (0 or 2)")
    parser.add_argument("--bursty", action="store_true", help="the busy loops run in bursts (0.3-1.5 s on, "
                        "0.2-1.0 s off), as another team's evaluations do")
    parser.add_argument("--effects", default="0.05,0.1,0.2")
    parser.add_argument("--repeats", default="", help="compare's repeats, e.g. 1,3: each in turn, trial by trial "
                        "(default: compare's own default)")
    parser.add_argument("--copies", default="", help="processes a side, e.g. 2,3: each in turn, trial by trial "
                        f"(default: compare's own, {copies.COPIES})")
    parser.add_argument("--workload", default="", help="cut each kit to this one dev workload")
    args = parser.parse_args()
    repeats = [int(x) for x in args.repeats.split(",") if x] or [None]
    setups = [(r, c) for r in repeats for c in ([int(x) for x in args.copies.split(",") if x] or [copies.COPIES])]
    if any(c < 2 for _, c in setups):
        raise SystemExit("--copies: at least 2 processes a side (one has no spread to measure)")
    settings = load_settings()
    tmp = tempfile.TemporaryDirectory(prefix="evoteam-noise-")
    settings.db = Path(tmp.name) / "kb.db"
    kits = cpu_kernel_kits(settings, args.kits)
    if args.workload:
        (Path(tmp.name) / "kits").mkdir()
        kits = one_workload(settings, kits, args.workload, Path(tmp.name) / "kits")
    started = time.time()
    lines = []
    with busy_loops(args.busy, args.bursty):
        for kit in kits:
            base = kit.starting_point().read_text()
            better = kit.file(kit.manifest.examples["better"]).read_text()
            lines += rows(f"{kit.name} A/A", await trials(settings, kit, base, base + "\n# copy\n", args.trials,
                                                          setups))
            lines += rows(f"{kit.name} A/B better", await trials(settings, kit, base, better,
                                                                max(3, args.trials // 4), setups))
            for f in (float(x) for x in args.effects.split(",") if x):
                slower = base + EXTRA_PASS.format(f=f)
                lines += rows(f"{kit.name} +{f:.0%} work", await trials(settings, kit, base, slower,
                                                                      max(5, args.trials // 2), setups))
    tmp.cleanup()
    load = os.getloadavg()
    print(f"{'comparison':<26} | trials | significant | median B/A | CV %    | median hi/lo | contended | s/compare")
    print("-" * 112)
    for line in lines:
        print(line)
    print(f"\n({args.busy} {'bursty' if args.bursty else 'busy'} loops; {os.cpu_count()} CPUs; load average now {load[0]:.2f} {load[1]:.2f} "
          f"{load[2]:.2f}; {time.time() - started:.0f} s. B/A = B's speedup over A, below 1: B is slower. "
          "A/A goal: at most 2 of 20 significant; the MDE is the smallest extra work found significant in most "
          "trials.)")


if __name__ == "__main__":
    asyncio.run(main())
