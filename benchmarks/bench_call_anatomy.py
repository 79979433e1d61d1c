"""Where a short kernel's extra time inside the harness comes from: the kernel's own time (as the
candidate measures it from inside, which the product never trusts) next to the harness's clock,
under variations of the call path.

For one workload of a CPU kit, a session like an evaluation's runs the kit's known-better example
wrapped so that it times its own kernel with perf_counter_ns. Variants, each N calls, every call on
fresh inputs made by the trusted worker:

- ``as timed``: the baseline, an empty call and the candidate in turn (the rounds' order), inputs
  written by the harness thread from its own CPU (the product's path on a quiet machine);
- ``fill on worker cpu``: the same, the harness thread moved to the timed workers' CPU while it
  writes the inputs;
- ``no other side``: the candidate alone, call after call (only the trusted worker, making each
  call's inputs, runs between); ``inputs made beforehand``: every call's inputs made in one
  request first, so that nothing at all runs between;
- ``cpu kept awake``: the same with a lowest-priority (SCHED_IDLE) process spinning on the timed
  CPU, so that it never goes idle between calls (a virtual machine's idle CPU halts);
- ``in one process``: the kernel called in this process on inputs it just made (the minimal
  harness's situation), on the same CPU.

Printed per variant: median of the kernel's own time, of the harness's clock, and of the empty
calls' (where run). An experiment, not a product check; its numbers go into docs/bench.md.
Usage: python benchmarks/bench_call_anatomy.py [--kit pairwise_distance_cpu] [--workload 0] [--calls 40]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import re
import statistics
import tempfile
import time
from pathlib import Path

from evoteam.config import load_settings
from evoteam.servers.bench.evaluation.core import _workload_specs, prepare_candidate
from evoteam.servers.bench.formats.kits import discover
from evoteam.servers.bench.confinement import scratch
from evoteam.servers.bench.measurement import arena
from evoteam.servers.bench.measurement.session import KernelSession
from evoteam.servers.bench.confinement.workerenv import tuning_env

SPIN = r"""
import json, os, sys
os.sched_setaffinity(0, json.loads(sys.argv[1]))
os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
while True:
    pass
"""

ONE_PROCESS = r"""
import json, os, statistics, sys, time
cfg = json.loads(sys.argv[1])
if cfg["cpus"]:
    os.sched_setaffinity(0, cfg["cpus"])
ns, mod = {}, {}
exec(cfg["inputs"], ns)
exec(cfg["kernel"], mod)
fn, own = mod[cfg["entry"]], []
for i in range(cfg["n"] + 10):
    made = ns["make_inputs"](dict(cfg["axes"]), i, "cpu")
    args = [made[k] if k in made else cfg["scalars"][k] for k in cfg["names"]]
    t0 = time.perf_counter_ns()
    fn(*args)
    if i >= 10:
        own.append(time.perf_counter_ns() - t0)
print(statistics.median(own))
"""

WRAP = """

import time as _t
_seen = []


def run(*args):
    t0 = _t.perf_counter_ns()
    out = _run(*args)
    _seen.append(_t.perf_counter_ns() - t0)
    if len(_seen) % 10 == 0:
        print(" ".join(f"T{x}" for x in _seen[-10:]), flush=True)
    return out
"""


def own_times(session: KernelSession, n: int) -> list[int]:
    time.sleep(0.2)  # the drain thread reads the worker's output on its own time
    text = session.candidate.output_tail()
    return [int(x) for x in re.findall(r"T(\d+)", text)][-n:]


def call(session, side, wl, payload, fill_cpus=None, calibrate=False, capture=True) -> int:
    """One call through the product's path (session._call), optionally writing the inputs and
    reading the outputs from ``fill_cpus``, or not reading the outputs at all."""
    w = side.worker
    layout = session._layout(side, payload, wl)
    if not calibrate:
        before = os.sched_getaffinity(0)
        if fill_cpus:
            os.sched_setaffinity(0, fill_cpus)
        arena.fill(w, layout, payload, outputs=side.dps)
        if fill_cpus:
            os.sched_setaffinity(0, before)
    header, arrays, ns = session._request(side, {"cmd": "tcall", "calibrate": calibrate,
                                                 "send": session.read_by_pipe}, "anatomy", timed=True)
    if not calibrate and capture:
        before = os.sched_getaffinity(0)
        if fill_cpus:
            os.sched_setaffinity(0, fill_cpus)
        arena.capture(w, session.out_names, session.read_by_pipe, header, arrays, wl.expected, slot=0)
        if fill_cpus:
            os.sched_setaffinity(0, before)
    return ns



def kit_session(kit, cand) -> KernelSession:
    """A measurement session (not started) of the prepared candidate ``cand`` on ``kit``, set up
    from the kit's manifest as the bench sets one up (bench_call_state.py uses it too)."""
    m = kit.manifest
    return KernelSession(
        definition=kit.definition.model_dump(), framework=m.framework, device=m.device,
        inputs_source=kit.inputs_source(), reference_source=kit.definition.reference,
        baseline=kit.baseline_solution()[0], candidate_dir=cand.folder, candidate_file=cand.file,
        function=cand.function, dps=cand.dps, deny=[], memory_mb=m.memory_limit_mb, timeouts=m.timeouts,
        tolerance=m.tolerance, timing=m.timing, threads=m.threads, worker_env=m.worker_env)

def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kit", default="pairwise_distance_cpu")
    parser.add_argument("--workload", type=int, default=0)
    parser.add_argument("--calls", type=int, default=40)
    args = parser.parse_args()
    n = args.calls // 10 * 10
    settings = load_settings()
    tmp = tempfile.TemporaryDirectory(prefix="evoteam-anatomy-")
    settings.db = Path(tmp.name) / "kb.db"
    kit = discover(settings)[args.kit]
    m = kit.manifest
    better = kit.file(m.examples["better"]).read_text()
    code = better.replace(f"def {m.entry}(", "def _run(") + WRAP.replace("def run(", f"def {m.entry}(")
    cand = prepare_candidate(kit, None, code)
    wl = _workload_specs(kit, "dev", settings)[args.workload][0]
    session = kit_session(kit, cand)
    rows = []
    try:
        session.start()
        v = session.check_correctness(wl)
        assert v.status == "PASSED", v.message
        base, cside = session.baseline, session.sides[1]
        pinned = session.pinned
        with session.apart():
            for name, fill_cpus, others, capture in (
                    ("as timed", None, True, True), ("fill and read on worker cpu", pinned, True, True),
                    ("as timed, outputs not read", None, True, False),
                    ("no other side", None, False, True),
                    ("no other side, fill and read on worker cpu", pinned, False, True),
                    ("no other side, outputs not read", None, False, False),
                    ("no other side, inputs made beforehand", None, False, True),
                    ("cpu kept awake, as timed", None, True, True),
                    ("cpu kept awake, no other side", None, False, True)):
                harness_ns, nulls = [], []
                spinner = None
                if name.startswith("cpu kept awake") and pinned:
                    # A process of the lowest priority (SCHED_IDLE) spinning on the timed CPU:
                    # it never idles (a VM's idle vCPU halts), and any worker preempts it.
                    spinner = subprocess.Popen([sys.executable, "-c", SPIN, json.dumps(pinned)])
                    time.sleep(0.2)
                ahead = session._stage(wl, n + 10) if name.endswith("made beforehand") else None
                for i in range(n + 10):  # 10 warm-up calls, dropped
                    p = ahead[i] if ahead else session._stage(wl, 1)[0]
                    if others:
                        call(session, base, wl, p, fill_cpus)
                        null = call(session, session.empty, wl, p, calibrate=True)  # as the product (method 3)
                    ns = call(session, cside, wl, p, fill_cpus, capture=capture)
                    if i >= 10:
                        harness_ns.append(ns)
                        if others:
                            nulls.append(null)
                if spinner is not None:
                    spinner.kill()
                    spinner.wait()
                own = own_times(session, n)
                rows.append((name, statistics.median(own), statistics.median(harness_ns),
                             statistics.median(nulls) if nulls else None))
        print(f"pinned CPUs {pinned}, harness CPUs {session.harness_cpus}")
    finally:
        session.close()
        scratch.remove_folder(cand.folder)
    # The minimal harness's situation: the kernel in a process of its own (the workers' allocator
    # and thread settings) on inputs it has just made, on the timed workers' CPUs.
    one = subprocess.run([sys.executable, "-c", ONE_PROCESS, json.dumps({
        "inputs": kit.inputs_source(), "kernel": better, "entry": m.entry, "axes": wl.axes,
        "scalars": wl.scalars, "names": list(kit.definition.inputs), "n": n, "cpus": pinned})],
        capture_output=True, text=True, check=True, timeout=300,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **tuning_env(m.threads, False, m.worker_env)})
    rows.append(("in one process", float(one.stdout.strip().splitlines()[-1]), None, None))
    print(f"{kit.name} {wl.name}, {n} calls per variant, medians in us; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'variant':<38} | {'kernel (own)':>12} | {'harness clock':>13} | {'empty call':>10}")
    for name, own_med, h, e in rows:
        print(f"{name:<38} | {own_med / 1e3:12.1f} | {'' if h is None else f'{h / 1e3:13.1f}':>13} | "
              f"{'' if e is None else f'{e / 1e3:10.1f}':>10}")
    tmp.cleanup()


if __name__ == "__main__":
    main()
