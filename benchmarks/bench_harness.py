"""Harness overhead and repeatability on the CPU kernel kits, next to a minimal honest harness.

For each CPU kernel kit, evaluate the kit's known-better example five times (dev split) and print:
- wall time per evaluation, the time spent inside timed calls (both sides, as the harness clocks
  them: resume, call, stop), and the harness overhead = wall - that time (process start, input
  generation, reference runs, correctness and per-call output checks, transfers);
- the coefficient of variation of the geometric-mean speedup over the five repeats;
- the same evaluation by a minimal honest harness (MINIMAL below, ~40 lines: one spawned
  process imports the candidate and the baseline, runs reference, candidate and baseline on the
  same inputs and compares them once per workload, then times both sides on fresh inputs with the
  same warm-up and call counts, interleaved, median of the calls), run in the same loop, and the
  ratio of the two overheads: what our isolation, confinement and per-call checks cost.

Targets on a 2-core machine: overhead <= 1 s per evaluation, CV <= 3 %.
With --cold-minimal, the minimal harness runs a second time in each repeat with its core's private
cache made cold before each timed call (bench_call_traffic.cold_minimal: a 16 MiB write before the
call's inputs are made, as after another process ran on that core), and the accuracy table gets its
medians and our diff to them: our sides are separate processes, the minimal harness's one.

Usage: python benchmarks/bench_harness.py [--repeats 5] [--kits a,b] [--cold-minimal]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from evoteam.config import load_settings
from evoteam.servers.bench.measurement import interleave, session, sparepool
from evoteam.servers.bench.evaluation.core import evaluate_candidate
from evoteam.servers.bench.formats.kit import Kit
from evoteam.servers.bench.formats.kits import discover
from evoteam.servers.bench.confinement.workerenv import tuning_env

# The minimal honest harness: no sandbox, no separate trusted process, no per-call output checks,
# no tamper checks. Inputs are made outside the clock and fresh for every call (so a cache keyed
# on inputs never hits), both sides run in one process with the same allocator and threads, and
# the same estimator as ours: per round the fastest call of each side, then the median over
# rounds of the paired ratios (and of each side's times).
MINIMAL = r"""
import importlib.util, json, statistics, sys, time
import numpy as np
cfg = json.loads(sys.argv[1])
def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
ns = {}
exec(cfg["reference"], ns)
make = load(cfg["inputs"], "kit_inputs").make_inputs
sides = {"candidate": getattr(load(cfg["candidate"], "cand"), cfg["entry"]),
         "baseline": getattr(load(cfg["baseline"], "base"), cfg["baseline_fn"])}
def call(fn, inputs):
    out = fn(*[inputs[n] for n in cfg["names"]])
    return [np.asarray(o, dtype=np.float64) for o in (out if isinstance(out, (tuple, list)) else (out,))]
inside, speedups, seed, per_workload = 0.0, [], 0, []
for axes in cfg["workloads"]:
    inputs = make(axes, seed, "cpu")
    want = call(ns["run"], inputs)
    for fn in sides.values():
        if not all(np.allclose(g, w, atol=cfg["atol"], rtol=cfg["rtol"]) for g, w in zip(call(fn, inputs), want)):
            sys.exit("wrong result")
    rounds = {"candidate": [], "baseline": []}
    for r, order in enumerate(cfg["orders"]):
        best = {}
        warm = [side for side in sides for _ in range(cfg["warmup"])] if r == 0 else []
        for i, side in enumerate(warm + order):
            seed += 1
            args = [make(axes, seed, "cpu")[n] for n in cfg["names"]]
            t = time.perf_counter()
            sides[side](*args)
            dt = time.perf_counter() - t
            if i >= len(warm):
                best[side] = min(best.get(side, dt), dt)
                inside += dt
        for side in best:
            rounds[side].append(best[side])
    ratios = [b / c for b, c in zip(rounds["baseline"], rounds["candidate"])]
    speedups.append(statistics.median(ratios))
    per_workload.append({side: statistics.median(v) * 1e3 for side, v in rounds.items()})
print(json.dumps({"kernel_s": inside, "speedups": speedups, "workloads": per_workload}))
"""


# Where our overhead goes: the harness's steps, each timed exclusive of the steps it calls, and
# named after what it pays for. Timed kernel calls (the scored ones) are not overhead.
PHASES = {
    "__init__": "start", "start": "start",
    "check_correctness": "correctness", "check_baseline": "correctness",
    "_stage": "inputs", "_reference": "correctness", "_check_inputs": "correctness", "_call": "call path", "_check_sched": "call path",
    "measure_sides": "output checks", "close": "close",
}
PHASE_NOTES = {
    "start": "spawn the timed workers (or take spares), confine them alike (uid, seccomp, Landlock, cgroup); "
             "the trusted one is kept from the kit's last evaluation in this process",
    "correctness": "the reference once per workload (inputs and outputs in one request), the baseline on the "
                   "second check's inputs, each side's calls, every element compared",
    "inputs": "fresh inputs for the timed rounds, made by the trusted worker per round into a shared staging area",
    "call path": "outside the clock: shared-memory fill, output capture, input tamper check, cgroup freeze",
    "output checks": "every timed candidate output compared with the baseline's (16,384 sampled elements)",
    "warm-up": "warm-up calls and the empty calls of the call path (timed, not scored)",
    "close": "kill both workers whole, reap, remove their cgroups",
    "other": "kit and candidate checks, device lock, the result",
}


class PhaseClock:
    """Times KernelSession's steps while installed (exclusive time, by phase)."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}
        self.stack: list[list] = []  # [name, time spent in wrapped steps it called]
        self.originals = {name: getattr(session.KernelSession, name) for name in PHASES}

    def __enter__(self) -> PhaseClock:
        for name, fn in self.originals.items():
            setattr(session.KernelSession, name, self._wrap(name, fn))
        return self

    def __exit__(self, *exc) -> None:
        for name, fn in self.originals.items():
            setattr(session.KernelSession, name, fn)

    def _wrap(self, name, fn):
        def timed(obj, *args, **kwargs):
            self.stack.append([name, 0.0])
            t = time.perf_counter()
            out = None
            try:
                out = fn(obj, *args, **kwargs)
                return out
            finally:
                dt = time.perf_counter() - t
                _, inner = self.stack.pop()
                own = dt - inner
                if name == "_call" and out is not None and self.stack and self.stack[-1][0] == "measure_sides":
                    ns = out[2] / 1e9  # the clocked call: kernel time, unless warm-up
                    own -= ns
                    self.spent["timed"] = self.spent.get("timed", 0.0) + ns
                self.spent[PHASES[name]] = self.spent.get(PHASES[name], 0.0) + own
                if self.stack:
                    self.stack[-1][1] += dt
        return timed


def cpu_kernel_kits(names: str = "") -> tuple:
    """Settings with a store of their own (a temporary folder, returned to be kept alive) and the
    CPU kernel kits, or those of them named (comma-separated)."""
    settings = load_settings()
    tmp = tempfile.TemporaryDirectory(prefix="evoteam-bench-")
    settings.db = Path(tmp.name) / "kb.db"
    kits = [k for k in discover(settings).values() if k.manifest.kind == "kernel" and k.manifest.device == "cpu"]
    if names:
        kits = [k for k in kits if k.name in set(names.split(","))]
    return settings, tmp, kits


def cpu_s(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def spares_settled(count: int, within_s: float = 30.0) -> float:
    """Wait until ``count`` spares wait and none uses CPU any more (their imports are done), so
    that nothing of theirs runs beside what is measured next. Returns their CPU seconds."""
    deadline = time.monotonic() + within_s
    last = -1.0
    while time.monotonic() < deadline:
        pids = sparepool.pids()
        used = sum(cpu_s(p) for p in pids)
        if len(pids) >= count and used == last:
            return used
        last = used
        time.sleep(0.15)
    raise SystemExit(f"spares did not settle within {within_s:g} s ({sparepool.waiting()} waiting)")


def minimal_harness(kit: Kit, candidate: Path, blocks: bool | None = None) -> tuple[float, float, float, list[dict]]:
    """Evaluate `candidate` with MINIMAL in a fresh process: (wall s, s inside timed calls,
    geomean speedup, per-workload median ms of each side)."""
    m = kit.manifest
    blocks = interleave.BLOCKS if blocks is None else blocks  # ours unless told (bench_harness_ab.py)
    base_file, _, base_fn = m.baseline[0].partition("::")
    cfg = {"reference": kit.definition.reference, "inputs": str(kit.file(m.inputs)), "candidate": str(candidate),
           "entry": m.entry, "baseline": str(kit.file(base_file)), "baseline_fn": base_fn or "run",
           "names": list(kit.definition.inputs), "workloads": [w.axes for w in kit.dev_workloads()],
           "atol": m.tolerance.atol, "rtol": m.tolerance.rtol, "warmup": m.timing.warmup,
           # Per round the order of the calls: ours (interleave.call_order) without the empty
           # calls, which the minimal harness has none of; so where ours puts them between two
           # calls of one side, the minimal harness calls that side twice in a row (it makes the
           # next call's inputs in between).
           "orders": [[s for s, _, _ in interleave.call_order(["baseline", "candidate", None], r,
                                                              m.timing.reps_per_round, blocks) if s]
                      for r in range(m.timing.rounds)]}
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **tuning_env(m.threads, False, m.worker_env)}
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", MINIMAL, json.dumps(cfg)], capture_output=True, text=True,
                         env=env, check=True, timeout=600)
    wall = time.perf_counter() - t
    result = json.loads(out.stdout)
    speedups = result["speedups"]
    return wall, result["kernel_s"], math.exp(sum(math.log(x) for x in speedups) / len(speedups)), result["workloads"]


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--kits", default="")
    parser.add_argument("--candidate", default="better", help="example to evaluate: better or baseline")
    parser.add_argument("--order", choices=("product", "blocks", "rotate"), default="product",
                        help="an experiment: the rounds' call order for our harness (product: as shipped)")
    parser.add_argument("--minimal-order", choices=("same", "blocks", "rotate"), default="same",
                        help="an experiment: the minimal harness's call order (same: ours)")
    parser.add_argument("--cold-minimal", action="store_true",
                        help="also the minimal harness with a cold private cache before each call (its order: "
                             "one call per side per repetition), in the accuracy table")
    parser.add_argument("--spares", choices=("on", "off"), default="on",
                        help="on (as the bench server and a kept slot runner): each evaluation takes the timed "
                             "workers the previous one left (sparepool.py); off: fresh workers, as a one-shot CLI")
    args = parser.parse_args()
    if args.spares == "on":
        sparepool.keep()
    cold_minimal = None
    if args.cold_minimal:
        # Here, not at the top: bench_call_traffic imports this module.
        from bench_call_traffic import cold_minimal
    if args.order != "product":
        interleave.BLOCKS = args.order == "blocks"
    minimal_blocks = interleave.BLOCKS if args.minimal_order == "same" else args.minimal_order == "blocks"
    settings, tmp, kits = cpu_kernel_kits(args.kits)
    rows, breakdown, medians, cvs, firsts = [], [], [], [], []
    spares_cpu: list[float] = []
    spreads: list[tuple] = []
    for kit in kits:
        if args.candidate == "baseline":
            path = kit.starting_point()
        else:
            path = kit.file(kit.manifest.examples["better"])
        scores, walls, overheads, kernels = [], [], [], []
        m_walls, m_overheads, m_scores = [], [], []
        phase_runs: list[dict[str, float]] = []
        per_wl: dict[str, list] = {}
        m_per_wl: dict[str, list] = {}
        c_per_wl: dict[str, list] = {}
        for _ in range(args.repeats):  # ours and the minimal one in turn, so load hits both alike
            with PhaseClock() as clock:
                e = await evaluate_candidate(settings, kit, candidate_path=str(path))
            assert e.status == "PASSED", e.message
            if args.spares == "on":  # the next evaluation's spares import now, not beside the minimal harness
                spares_cpu.append(spares_settled(3))
            kernel = e.metrics["wall_s"] - e.metrics["harness_overhead_s"]
            spent = dict(clock.spent)
            spent["warm-up"] = spent.pop("timed", 0.0) - kernel
            spent["other"] = e.metrics["harness_overhead_s"] - sum(spent.values())
            phase_runs.append(spent)
            scores.append(e.score)
            walls.append(e.metrics["wall_s"])
            overheads.append(e.metrics["harness_overhead_s"])
            kernels.append(e.metrics["wall_s"] - e.metrics["harness_overhead_s"])
            for w in e.workloads:
                per_wl.setdefault(w.workload, []).append((w.candidate_ms, w.baseline_ms))
            wall, inside, speedup, m_wl = minimal_harness(kit, path, minimal_blocks)
            for w, mw in zip(e.workloads, m_wl):
                m_per_wl.setdefault(w.workload, []).append((mw["candidate"], mw["baseline"]))
            m_walls.append(wall)
            m_overheads.append(wall - inside)
            m_scores.append(speedup)
            if cold_minimal is not None:
                _, _, _, c_wl = cold_minimal(kit, path, False)
                for w, cw in zip(e.workloads, c_wl):
                    c_per_wl.setdefault(w.workload, []).append((cw["candidate"], cw["baseline"]))
        mean = statistics.mean(scores)
        cv = statistics.stdev(scores) / mean * 100 if len(scores) > 1 else 0.0
        m_cv = statistics.stdev(m_scores) / statistics.mean(m_scores) * 100 if len(m_scores) > 1 else 0.0
        for name in per_wl:
            ours_c = statistics.median(c for c, _ in per_wl[name])
            ours_b = statistics.median(b for _, b in per_wl[name])
            min_c = statistics.median(c for c, _ in m_per_wl[name])
            min_b = statistics.median(b for _, b in m_per_wl[name])
            cold = ([c for c, _ in c_per_wl[name]], [b for _, b in c_per_wl[name]]) if c_per_wl else None
            medians.append((kit.name, name, ours_c, min_c, ours_b, min_b, cold))
            spreads.append((kit.name, name, *(cv_percent([row[k] for row in rows_])
                                              for rows_ in (per_wl[name], m_per_wl[name]) for k in (0, 1)),
                            cv_percent([b / c for c, b in per_wl[name]]),
                            cv_percent([b / c for c, b in m_per_wl[name]])))
        cvs.append((kit.name, cv, m_cv, cv_interval(scores), cv_interval(m_scores)))
        firsts.append((kit.name, overheads[0]))
        ours, minimal = statistics.median(overheads), statistics.median(m_overheads)
        rows.append((kit.name, args.candidate, len(kit.dev_workloads()), statistics.median(walls),
                     statistics.median(kernels), ours, ours / len(kit.dev_workloads()), mean, cv,
                     statistics.median(m_walls), minimal, ours / minimal, statistics.median(m_scores)))
        breakdown.append((kit.name, {k: statistics.median(r.get(k, 0.0) for r in phase_runs) for k in PHASE_NOTES},
                          ours, minimal))
    header = ("kit", "candidate", "workloads", "wall s", "kernel s", "overhead s", "overhead/wl s",
              "speedup (mean)", "speedup CV %", "minimal wall s", "minimal overhead s", "overhead ratio",
              "minimal speedup")
    widths = [max(len(h), 22 if i == 0 else 10) for i, h in enumerate(header)]
    print(" | ".join(h.ljust(w) for h, w in zip(header, widths)))
    print("-|-".join("-" * w for w in widths))
    for r in rows:
        cells = [r[0], r[1], str(r[2]), f"{r[3]:.2f}", f"{r[4]:.2f}", f"{r[5]:.2f}", f"{r[6]:.2f}", f"{r[7]:.3f}",
                 f"{r[8]:.2f}", f"{r[9]:.2f}", f"{r[10]:.2f}", f"{r[11]:.1f}x", f"{r[12]:.3f}"]
        print(" | ".join(c.ljust(w) for c, w in zip(cells, widths)))
    print("\nWhere our overhead goes (median ms per evaluation; each step exclusive of the steps it calls)")
    names = [k for k, _, _, _ in breakdown]
    print(" | ".join(["step".ljust(14), *(n.ljust(22) for n in names), "pays for"]))
    print("-|-".join(["-" * 14, *("-" * 22 for _ in names), "-" * 40]))
    for phase, note in PHASE_NOTES.items():
        cells = [f"{b[phase] * 1000:.0f}" for _, b, _, _ in breakdown]
        print(" | ".join([phase.ljust(14), *(c.ljust(22) for c in cells), note]))
    print(" | ".join(["total (ours)".ljust(14), *(f"{o * 1000:.0f}".ljust(22) for _, _, o, _ in breakdown), ""]))
    print(" | ".join(["minimal".ljust(14), *(f"{m * 1000:.0f}".ljust(22) for _, _, _, m in breakdown),
                      "the minimal harness's whole overhead (one process, no isolation)"]))
    print("\nAccuracy: per-workload medians (ms; ours: the call path subtracted) next to the minimal "
          "harness's, same estimator")
    print("kit                    | workload          | cand ours | cand minimal | diff % | base ours | base minimal | diff %")
    for kit_name, name, oc, mc, ob, mb, _ in medians:
        print(f"{kit_name:<22} | {name:<17} | {oc:9.3f} | {mc:12.3f} | {100 * (oc / mc - 1):+6.1f} | {ob:9.3f} | "
              f"{mb:12.3f} | {100 * (ob / mb - 1):+6.1f}")
    print(f"\nSpread: CV % over the {args.repeats} repeats of each per-workload median, ours next to minimal")
    print("kit                    | workload          | cand ours | cand minimal | base ours | base minimal | "
          "ratio ours | ratio minimal")
    for kit_name, name, oc, ob, mc, mb, r_o, r_m in spreads:
        print(f"{kit_name:<22} | {name:<17} | {oc:9.1f} | {mc:12.1f} | {ob:9.1f} | {mb:12.1f} | {r_o:10.1f} | {r_m:13.1f}")
    if cold_minimal is not None:
        _print_cold(medians, args.repeats)
    print("\nFirst evaluation of each kit in this process (its trusted worker started, not kept from an "
          "earlier one): overhead s")
    for kit_name, first in firsts:
        print(f"{kit_name:<22} {first:.2f}")
    if spares_cpu:
        print(f"\nSpares on (as the bench server): every evaluation after a kit's first took the timed workers "
              f"the one before left; their start (interpreter, numpy) used {statistics.median(spares_cpu):.2f} "
              "CPU s per evaluation (median) while nothing was measured, and is not in the overhead above")
    print("\nRepeatability: speedup CV over the repeats (goal <= 3% on a quiet machine, no worse than minimal), "
          "with its 95% interval: a CV from a few repeats is itself uncertain")
    for kit_name, cv, m_cv, ci, m_ci in cvs:
        print(f"{kit_name:<22} ours {cv:5.2f}% [{ci[0]:.2f}-{ci[1]:.2f}]   minimal {m_cv:5.2f}% "
              f"[{m_ci[0]:.2f}-{m_ci[1]:.2f}]")
    tmp.cleanup()
    load = os.getloadavg()
    print(f"(median over {args.repeats} evaluations each; overhead = wall time minus time inside timed "
          "kernel calls of candidate and baseline; minimal = the ~40-line honest harness MINIMAL in this file "
          "on the same workloads, warm-up and call counts, its speedup the median call's, ours the fastest "
          f"call's less the call path; overhead ratio = ours / minimal. {os.cpu_count()} CPUs, load average "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; call order: ours {_order_name(interleave.BLOCKS)}, "
          f"minimal {_order_name(minimal_blocks)})")


def cv_interval(values: list[float], level: float = 0.95) -> tuple[float, float]:
    """A confidence interval of the CV (%) of ``values``: the standard deviation's chi-square
    interval (normal spread assumed; chi-square quantiles by the Wilson-Hilferty approximation)
    over the mean. From 8 repeats it spans about 0.66x to 2.0x the CV measured."""
    n = len(values)
    if n < 3:
        return (float("nan"), float("nan"))
    k = n - 1

    def chi2(p: float) -> float:
        z = statistics.NormalDist().inv_cdf(p)
        return k * (1 - 2 / (9 * k) + z * math.sqrt(2 / (9 * k))) ** 3

    cv = cv_percent(values)
    tail = (1 - level) / 2
    return cv * math.sqrt(k / chi2(1 - tail)), cv * math.sqrt(k / chi2(tail))


def cv_percent(values: list[float]) -> float:
    """The coefficient of variation of ``values``, in percent (0 for fewer than two)."""
    return statistics.stdev(values) / statistics.mean(values) * 100 if len(values) > 1 else 0.0


def _print_cold(medians: list[tuple], repeats: int) -> None:
    """The accuracy table again against the minimal harness with a cold private cache per call."""
    print(f"\nAccuracy against the minimal harness with its core's private cache cold before each call "
          f"(--cold-minimal; median over {repeats} repeats, ms)")
    print("kit                    | workload          | cand ours | cand minimal | cand cold (min-max)  | diff % | "
          "base ours | base minimal | base cold (min-max)     | diff %")
    for kit_name, name, oc, mc, ob, mb, (cs, bs) in medians:
        cc, cb = statistics.median(cs), statistics.median(bs)
        print(f"{kit_name:<22} | {name:<17} | {oc:9.3f} | {mc:12.3f} | {cc:6.3f} ({min(cs):.3f}-{max(cs):.3f}) | "
              f"{100 * (oc / cc - 1):+6.1f} | {ob:9.3f} | {mb:12.3f} | {cb:7.3f} ({min(bs):.3f}-{max(bs):.3f}) | "
              f"{100 * (ob / cb - 1):+6.1f}")


def _order_name(blocks: bool) -> str:
    return "each side's repetitions back to back" if blocks else "one call per side per repetition"


if __name__ == "__main__":
    asyncio.run(main())
