"""What a timed call costs the worker itself, with and without the timed CPU kept awake.

For one workload of a CPU kit, a session like an evaluation's (the kit's baseline and its
better example, each in its confined worker) calls, per repetition, the baseline, an empty call
on the baseline's worker and the candidate, each on fresh inputs through the product's call
path. Around every timed request it reads, from /proc while the worker is stopped, the worker's
minor page faults, its CPU time (schedstat) and its wait for a CPU (schedstat), next to the
harness's clock. Sessions alternate between the product's set-up (a SCHED_IDLE keeper spinning
on the timed CPU, awake.py) and the same without the keeper, so that a change of load lands on
both. An experiment (it reads /proc of the workers), not a product check.

Usage: python benchmarks/bench_call_state.py [--kit rmsnorm_cpu] [--workloads 0,2] [--calls 30] [--pairs 2]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
from pathlib import Path

from evoteam.config import load_settings
from evoteam.servers.bench.evaluation.core import _workload_specs, prepare_candidate
from evoteam.servers.bench.formats.kits import discover
from evoteam.servers.bench.measurement import arena, awake, session as session_mod
from evoteam.servers.bench.measurement.session import KernelSession


class _NoKeeper(awake.CpuKeeper):
    def __init__(self, cpus):
        super().__init__([])


def _proc(pid: int) -> tuple[int, int, int]:
    """(minor faults, CPU time ns, run-queue wait ns) of the worker's main thread."""
    with open(f"/proc/{pid}/stat") as fh:
        text = fh.read()
    minflt = int(text[text.rindex(")") + 2:].split()[7])
    with open(f"/proc/{pid}/schedstat") as fh:
        run, wait, _ = fh.read().split()
    return minflt, int(run), int(wait)


def _call(session, side, wl, payload, calibrate=False) -> tuple[int, int, int, int]:
    w = side.worker
    layout = session._layout(side, payload, wl)
    if not calibrate:
        arena.fill(w, layout, payload, outputs=side.dps)
    before = _proc(w.proc.pid)
    header, arrays, ns = session._request(side, {"cmd": "tcall", "calibrate": calibrate,
                                                 "send": session.read_by_pipe}, "a call", timed=True)
    after = _proc(w.proc.pid)
    if not calibrate:  # the product's checks after the call, as in a round
        arena.capture(w, session.out_names, session.read_by_pipe, header, arrays, wl.expected, slot=0)
        arena.inputs_unchanged(w, layout, payload)
    return ns, after[0] - before[0], after[1] - before[1], after[2] - before[2]


def one_session(settings, kit, wl, calls: int, keeper: bool) -> dict[str, list[tuple]]:
    session_mod.CpuKeeper = awake.CpuKeeper if keeper else _NoKeeper
    m = kit.manifest
    cand = prepare_candidate(kit, str(kit.file(m.examples["better"])), None)
    s = KernelSession(
        definition=kit.definition.model_dump(), framework=m.framework, device=m.device,
        inputs_source=kit.inputs_source(), reference_source=kit.definition.reference,
        baseline=kit.baseline_solution()[0], candidate_dir=cand.folder, candidate_file=cand.file,
        function=cand.function, dps=cand.dps, deny=[], memory_mb=m.memory_limit_mb, timeouts=m.timeouts,
        tolerance=m.tolerance, timing=m.timing, threads=m.threads, worker_env=m.worker_env)
    rows: dict[str, list[tuple]] = {"baseline": [], "empty call": [], "candidate": []}
    try:
        s.start()
        v = s.check_correctness(wl)
        assert v.status == "PASSED", v.message
        if s.keeper is not None:
            s.keeper.ready()
        with s.apart():
            for i in range(calls + 5):  # 5 warm-up repetitions, dropped
                p = s._stage(wl, 1)[0]
                got = [("baseline", _call(s, s.baseline, wl, p)), ("empty call", _call(s, s.baseline, wl, p, True)),
                       ("candidate", _call(s, s.sides[1], wl, p))]
                if i >= 5:
                    for name, x in got:
                        rows[name].append(x)
    finally:
        s.close()
        shutil.rmtree(cand.folder, ignore_errors=True)
        session_mod.CpuKeeper = awake.CpuKeeper
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kit", default="rmsnorm_cpu")
    parser.add_argument("--workloads", default="0,2")
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--pairs", type=int, default=2)
    args = parser.parse_args()
    settings = load_settings()
    tmp = tempfile.TemporaryDirectory(prefix="evoteam-callstate-")
    settings.db = Path(tmp.name) / "kb.db"
    kit = discover(settings)[args.kit]
    specs = _workload_specs(kit, "dev", settings)
    print(f"{kit.name}, {args.calls} repetitions per session, medians per call; faults and CPU/wait times are "
          "the worker's own, from /proc")
    print(f"{'workload':<16} | {'keeper':<6} | {'call':<10} | {'clock us':>9} | {'min us':>8} | {'faults':>6} | "
          f"{'cpu us':>8} | {'wait us':>7}")
    for index in (int(x) for x in args.workloads.split(",")):
        wl = specs[index][0]
        for _ in range(args.pairs):
            for keeper in (True, False):
                rows = one_session(settings, kit, wl, args.calls, keeper)
                for name, xs in rows.items():
                    med = [statistics.median(x[k] for x in xs) for k in range(4)]
                    print(f"{wl.name:<16} | {'yes' if keeper else 'no':<6} | {name:<10} | {med[0] / 1e3:9.1f} | "
                          f"{min(x[0] for x in xs) / 1e3:8.1f} | {med[1]:6.0f} | {med[2] / 1e3:8.1f} | "
                          f"{med[3] / 1e3:7.1f}", flush=True)
    load = os.getloadavg()
    print(f"(load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {os.cpu_count()} CPUs)")
    tmp.cleanup()


if __name__ == "__main__":
    main()
