"""The call clock against load: `examples/better.py` evaluated on each CPU kit, quiet and with busy loops
running, read by the wall clock (EVOTEAM_BENCH_CLOCK=wall) and by the bench's clock (the wall time
less the worker's waits for a CPU, guarded by its cgroup's CPU time: measurement/callclock.py),
the two alternating evaluation by evaluation in one run. Prints, per kit, clock and load, the
median score with its min-max, its CV, and the shift of the busy median from the quiet one: a
clock that load does not move keeps that shift small.

Usage: python benchmarks/bench_clock.py [--evaluations 4] [--rounds 2] [--busy 2] [--kits a,b]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys

from evoteam.config import load_settings
from evoteam.servers.bench.evaluation.core import evaluate_candidate
from evoteam.servers.bench.formats.kits import discover
from evoteam.servers.bench.measurement.callclock import CLOCK_ENV

CLOCKS = ("wall", "cpu-guarded")


def busy_loops(n: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--evaluations", type=int, default=4, help="per kit, clock and load, each round")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--busy", type=int, default=2)
    parser.add_argument("--kits", default="pairwise_distance_cpu,rmsnorm_cpu")
    args = parser.parse_args()
    settings = load_settings()
    kits = discover(settings)
    names = [n for n in args.kits.split(",") if n in kits]
    scores: dict[tuple[str, str, str], list[float]] = {}
    seen: set[str] = set()
    print(f"# bench_clock.py {' '.join(sys.argv[1:])}; {os.cpu_count()} CPUs; load before: "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    for _ in range(args.rounds):
        for load in ("quiet", "busy"):
            loops = busy_loops(args.busy) if load == "busy" else []
            try:
                for _ in range(args.evaluations):
                    for clock in CLOCKS:  # alternating, so a drift of the machine touches both alike
                        os.environ[CLOCK_ENV] = "wall" if clock == "wall" else ""
                        for name in names:
                            kit = kits[name]
                            e = await evaluate_candidate(settings, kit, candidate_path=str(kit.root / "examples" / "better.py"))
                            seen.add(str(e.metrics.get("clock")))
                            if e.status == "PASSED" and e.score:
                                scores.setdefault((name, clock, load), []).append(e.score)
            finally:
                for p in loops:
                    p.kill()
                    p.wait()
    print(f"# clocks the evaluations recorded: {', '.join(sorted(seen))}")
    print(f"{'kit':22} | {'clock':11} | {'load':5} | {'n':>3} | {'score median [min-max]':26} | {'CV %':>5} | busy/quiet")
    for name in names:
        for clock in CLOCKS:
            quiet = scores.get((name, clock, "quiet"), [])
            for load in ("quiet", "busy"):
                xs = scores.get((name, clock, load), [])
                if len(xs) < 2:
                    continue
                med = statistics.median(xs)
                cv = 100 * statistics.stdev(xs) / statistics.mean(xs)
                shift = f"{med / statistics.median(quiet):.3f}" if load == "busy" and quiet else ""
                print(f"{name:22} | {clock:11} | {load:5} | {len(xs):3} | {med:8.3f} [{min(xs):.3f}-{max(xs):.3f}]"
                      f"{'':4} | {cv:5.2f} | {shift}")
    print(f"# load after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    asyncio.run(main())
