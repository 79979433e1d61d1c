"""Does timing the two sides in separate processes make the score noisier? (issue #21, CV goal)

`bench_harness.py` shows each side's per-workload median spreading about as much over repeated
evaluations in our harness as in the minimal one (4-9% CV), yet the minimal harness's speedup
spreads less (2-3% against 3-10%): its two sides rise and fall together. Its sides share one
process; ours are separate processes by design. This benchmark asks whether that alone explains
the gap, without any of our harness: the minimal harness's loop (fresh inputs per call from the
kit's generator, made outside the clock; per round each side's fastest call; median of the paired
ratios; geometric mean over workloads), its calls clocked inside the process that makes them,
in two layouts, evaluation by evaluation in turn:

- ``one``: one child process holds both sides (the minimal harness);
- ``two``: each side in a child process of its own (as in our harness), the same inputs made
  in each from the same seed;
- ``2 per side``: each side in two processes of its own, the rounds alternating between them
  (what several processes per side per evaluation would give our harness).

The parent only says which side calls next (one line on a pipe), in the same order for both
layouts (interleave.call_order, as bench_harness uses). Prints, per layout, the score's median
and CV over the evaluations and each side's per-workload CV, and the ratio of the two CVs.

Usage: python benchmarks/bench_process_split.py [--evaluations 10] [--kits a,b]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_harness import cpu_kernel_kits, cv_interval, cv_percent as cv  # noqa: E402

from evoteam.servers.bench.confinement.workerenv import tuning_env  # noqa: E402
from evoteam.servers.bench.measurement import interleave  # noqa: E402

CHILD = r"""
import importlib.util, json, sys, time
import numpy as np
cfg = json.loads(sys.argv[1])
def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
make = load(cfg["inputs"], "kit_inputs").make_inputs
fns = {}
if "candidate" in cfg["sides"]:
    fns["candidate"] = getattr(load(cfg["candidate"], "cand"), cfg["entry"])
if "baseline" in cfg["sides"]:
    fns["baseline"] = getattr(load(cfg["baseline"], "base"), cfg["baseline_fn"])
print("ready", flush=True)
for line in sys.stdin:
    side, w, seed = line.split()
    args = [make(cfg["workloads"][int(w)], int(seed), "cpu")[n] for n in cfg["names"]]
    t = time.perf_counter()
    fns[side](*args)
    dt = time.perf_counter() - t
    print(dt, flush=True)
"""


# --pin: every child on the last CPU (as our harness pins every timed worker of an evaluation to
# the same CPUs) and this process on the others; otherwise the scheduler places them.
PIN: set[int] | None = None


def _pin_child() -> None:
    if PIN:
        os.sched_setaffinity(0, PIN)


class Layout:
    """The child processes of one evaluation, and which of them calls which side: ``per_side``
    0 puts both sides in one process; N gives each side N processes of its own, round r using
    process r mod N of each."""

    def __init__(self, cfg: dict, env: dict, per_side: int):
        if per_side:
            groups = [[side] for side in ("baseline", "candidate") for _ in range(per_side)]
        else:
            groups = [["baseline", "candidate"]]
        self.procs: dict[str, list] = {"baseline": [], "candidate": []}
        for held in groups:
            p = subprocess.Popen([sys.executable, "-c", CHILD, json.dumps(dict(cfg, sides=held))], env=env,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, preexec_fn=_pin_child)
            assert p.stdout.readline().strip() == "ready"
            for side in held:
                self.procs[side].append(p)
        self.round = 0

    def call(self, side: str, workload: int, seed: int) -> float:
        procs = self.procs[side]
        p = procs[self.round % len(procs)]
        p.stdin.write(f"{side} {workload} {seed}\n")
        p.stdin.flush()
        return float(p.stdout.readline())

    def close(self) -> None:
        for p in {p for procs in self.procs.values() for p in procs}:
            p.stdin.close()
            p.wait()


def evaluate(kit, cfg: dict, env: dict, per_side: int, seed0: int) -> tuple[float, list[tuple[float, float]]]:
    m = kit.manifest
    layout = Layout(cfg, env, per_side)
    seed = seed0
    try:
        speedups, medians = [], []
        for w in range(len(cfg["workloads"])):
            rounds: dict[str, list[float]] = {"baseline": [], "candidate": []}
            for r in range(m.timing.rounds):
                layout.round = r
                order = [s for s, _, _ in interleave.call_order(["baseline", "candidate", None], r,
                                                                 m.timing.reps_per_round, interleave.BLOCKS) if s]
                first = r < max(1, per_side)  # each process's first round opens with warm-up calls
                warm = [s for s in ("baseline", "candidate") for _ in range(m.timing.warmup)] if first else []
                best: dict[str, float] = {}
                for i, side in enumerate(warm + order):
                    seed += 1
                    dt = layout.call(side, w, seed)
                    if i >= len(warm):
                        best[side] = min(best.get(side, dt), dt)
                for side, t in best.items():
                    rounds[side].append(t)
            speedups.append(statistics.median(b / c for b, c in zip(rounds["baseline"], rounds["candidate"])))
            medians.append((statistics.median(rounds["candidate"]), statistics.median(rounds["baseline"])))
        return math.exp(sum(map(math.log, speedups)) / len(speedups)), medians
    finally:
        layout.close()


# Layout name -> processes per side (0: both sides in one process).
LAYOUTS = {"one": 0, "two": 1, "2 per side": 2, "4 per side": 4}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--evaluations", type=int, default=10)
    parser.add_argument("--kits", default="")
    parser.add_argument("--layouts", default=",".join(LAYOUTS), help="of: " + ", ".join(LAYOUTS))
    parser.add_argument("--pin", action="store_true", help="every child on the last CPU, this process on the others")
    args = parser.parse_args()
    if args.pin:
        global PIN
        cpus = sorted(os.sched_getaffinity(0))
        PIN = {cpus[-1]}
        if len(cpus) > 1:
            os.sched_setaffinity(0, cpus[:-1])
    unknown = [name for name in args.layouts.split(",") if name not in LAYOUTS]
    if unknown:
        parser.error(f"unknown layout(s) {', '.join(unknown)}; of: {', '.join(LAYOUTS)}")
    layouts = {name: LAYOUTS[name] for name in args.layouts.split(",")}
    _settings, tmp, kits = cpu_kernel_kits(args.kits)
    pin = " --pin" if args.pin else ""
    print(f"# bench_process_split.py --evaluations {args.evaluations}{pin}; {os.cpu_count()} CPUs; load average "
          "before: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    print("kit                   | layout     | score median | score CV % [95%]   | per workload: cand CV / base CV / ratio CV %")
    for kit in kits:
        m = kit.manifest
        base_file, _, base_fn = m.baseline[0].partition("::")
        cfg = {"inputs": str(kit.file(m.inputs)), "candidate": str(kit.file(m.examples["better"])),
               "entry": m.entry, "baseline": str(kit.file(base_file)), "baseline_fn": base_fn or "run",
               "names": list(kit.definition.inputs), "workloads": [w.axes for w in kit.dev_workloads()]}
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **tuning_env(m.threads, False, m.worker_env)}
        got: dict[str, list] = {name: [] for name in layouts}
        for i in range(args.evaluations):  # the layouts in turn, each first as often
            names = list(layouts)
            k = i % len(names)
            for layout in names[k:] + names[:k]:
                got[layout].append(evaluate(kit, cfg, env, layouts[layout], 1000 * i))
        cvs = {}
        for layout, runs in got.items():
            scores = [s for s, _ in runs]
            cvs[layout] = cv(scores)
            per = []
            for w in range(len(cfg["workloads"])):
                c = [meds[w][0] for _, meds in runs]
                b = [meds[w][1] for _, meds in runs]
                per.append(f"{cv(c):.1f}/{cv(b):.1f}/{cv([bb / cc for bb, cc in zip(b, c)]):.1f}")
            lo, hi = cv_interval(scores)
            print(f"{kit.name:<21} | {layout:<10} | {statistics.median(scores):12.3f} | {cvs[layout]:5.2f} "
                  f"[{lo:.1f}-{hi:.1f}] | " + "  ".join(per))
        if "one" in cvs:
            print(f"{kit.name:<21} | CV / one's: " + "; ".join(f"{name} {c / cvs['one']:.2f}"
                                                         for name, c in cvs.items() if name != "one"))
    print("# load average after: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
