"""What a timed call costs the worker itself, with and without the timed CPU kept awake.

For one workload of a CPU kit, a session like an evaluation's (the kit's baseline and its
better example, each in its confined worker) calls, per repetition, the baseline, an empty call
on the baseline's worker and the candidate, each on fresh inputs through the product's call
path. Around every timed request it reads, from /proc while the worker is stopped, the worker's
minor page faults, its CPU time (schedstat) and its wait for a CPU (schedstat), next to the
harness's clock. Sessions alternate between the product's set-up and the same with a *keeper*
(a SCHED_IDLE process spinning on each timed CPU, so that it never idles between calls), so that
a change of load lands on both. The keeper was tried in the product on branch m21e and not adopted
(docs/bench.md); it lives here only as this experiment's variant, started as m21e's was (see
start_keepers). An experiment (it reads /proc of the workers), not a product check.

Usage: python benchmarks/bench_call_state.py [--kit rmsnorm_cpu] [--workloads 0,2] [--calls 30] [--pairs 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from evoteam.config import load_settings
from evoteam.servers.bench.evaluation.core import _workload_specs, prepare_candidate
from evoteam.servers.bench.formats.kits import discover
from evoteam.servers.bench.confinement import scratch
from evoteam.servers.bench.measurement import arena
from bench_call_anatomy import kit_session  # noqa: E402 - the benchmarks folder is this script's path[0]


# Pins itself, drops to the lowest policy, says so, then spins: any other runnable thread on its
# CPU (the timed worker first) preempts it at once.
SPIN = ("import os, sys\n"
        "os.sched_setaffinity(0, {int(sys.argv[1])})\n"
        "os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))\n"
        "sys.stdout.write('1'); sys.stdout.flush()\n"
        "while True:\n"
        "    pass\n")


def start_keepers(cpus: list[int]) -> list[subprocess.Popen]:
    """One spinning SCHED_IDLE process per CPU, each in a session of its own whose scheduling
    group gets the lowest weight (autogroup nice 19): where the kernel groups tasks by session a
    task's policy counts only inside its group, and in the same group as the harness a keeper
    competed with the timed worker as an equal (m21e measured a 15 ms call waiting 14 ms)."""
    procs = []
    for cpu in cpus:
        p = subprocess.Popen([sys.executable, "-S", "-I", "-c", SPIN, str(cpu)], stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, start_new_session=True)
        try:
            with open(f"/proc/{p.pid}/autogroup", "w") as fh:
                fh.write("19")
        except OSError:
            pass  # no autogroup here: the policy alone decides
        procs.append(p)
    for p in procs:  # spinning at its place before the first timed call
        assert p.stdout is not None and p.stdout.read(1) == b"1", "a keeper did not start"
    return procs


def stop_keepers(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.kill()
        p.wait()
        if p.stdout is not None:
            p.stdout.close()


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
    m = kit.manifest
    cand = prepare_candidate(kit, str(kit.file(m.examples["better"])), None)
    s = kit_session(kit, cand)
    rows: dict[str, list[tuple]] = {"baseline": [], "empty call": [], "candidate": []}
    keepers: list[subprocess.Popen] = []
    try:
        s.start()
        v = s.check_correctness(wl)
        assert v.status == "PASSED", v.message
        with s.apart():
            # Started after apart() has read the load average (it counts a spinning keeper as
            # load), as m21e's product keeper was not counted.
            if keeper:
                keepers = start_keepers(s.pinned)
            for i in range(calls + 5):  # 5 warm-up repetitions, dropped
                p = s._stage(wl, 1)[0]
                got = [("baseline", _call(s, s.baseline, wl, p)), ("empty call", _call(s, s.empty, wl, p, True)),  # as the product (method 3)
                       ("candidate", _call(s, s.sides[1], wl, p))]
                if i >= 5:
                    for name, x in got:
                        rows[name].append(x)
    finally:
        stop_keepers(keepers)
        s.close()
        scratch.remove_folder(cand.folder)
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
