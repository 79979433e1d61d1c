"""An evaluation with repeats, in copies, against one process a side: how steady is the score?

On each CPU kernel kit (dev split), three ways of evaluating the same code, taking turns
evaluation by evaluation (a drift of the machine touches all three alike):

- **plain**: what `evaluate` does without repeats (one process a side, the kit's rounds);
- **3x rounds**: one process a side for three times the kit's rounds (what `repeats: 3` did
  until 2026-12-05);
- **copies**: `evaluate` with `repeats: 3` as it stands: the candidate and the baseline in three
  processes each for the kit's rounds (measurement/copies.py, batch._grouped);
- **copies r4**, **copies r6**: three processes a side for 4 or 6 rounds (4: about a plain
  evaluation's number of timed calls; 6: the fewest rounds whose median interval covers 95%):
  candidates for a steadier default, not what any tool does.

With ``--spares N`` the process keeps up to N spare workers (measurement/sparepool.py), as the
bench server does, and waits for them to be ready before each evaluation's clock starts (a team's
evaluations come minutes apart, so the server's spares are ready): the wall time is then what an
evaluation costs in the server rather than in a one-shot CLI call.

For `examples/better.py` and for a copy of the baseline (whose true speedup is 1), it prints the
score's median and its CV over the evaluations (the repeat-to-repeat spread a team sees), the
median interval width hi/lo, how many intervals exclude 1 (for the copy: false alarms, goal about
1 in 20 or fewer) and the median wall time of one evaluation.

Usage: python benchmarks/bench_eval_copies.py [--evaluations 10] [--kits a,b] [--busy 0|2]
       [--ways plain,copies,...] [--spares 0|N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_noise import busy_loops  # noqa: E402

from evoteam.config import load_settings  # noqa: E402
from evoteam.servers.bench.evaluation.core import _noop, _run_kernel, evaluate_candidate, prepare_candidate  # noqa: E402
from evoteam.servers.bench.confinement import scratch  # noqa: E402
from evoteam.servers.bench.measurement import sparepool  # noqa: E402
from evoteam.servers.bench.formats.kits import find_kit  # noqa: E402

WAYS = ("plain", "3x rounds", "copies", "copies r4", "copies r6")


async def one(settings, kit, code: str, way: str):
    """(score, lo, hi, wall seconds) of one evaluation the given way."""
    sparepool.settle()
    t = time.perf_counter()
    if way == "copies":
        e = await evaluate_candidate(settings, kit.name, code=code, repeats=3)
    else:
        cand = prepare_candidate(kit, None, code, settings)
        try:
            rounds = {"3x rounds": 3 * kit.manifest.timing.rounds, "copies r4": 4, "copies r6": 6}.get(way)
            e = await _run_kernel(settings, kit, cand, "dev", _noop, True, rounds,
                                  copied=way.startswith("copies r"))
        finally:
            scratch.remove_folder(cand.folder)
    if e.status != "PASSED" or not e.score_interval:
        raise SystemExit(f"{kit.name}: {way}: {e.status}: {e.message}")
    return e.score, *e.score_interval, time.perf_counter() - t


async def main(args) -> None:
    settings = load_settings()
    kits = {name: find_kit(settings, name) for name in args.kits.split(",")}
    ways = tuple(args.ways.split(","))
    if args.spares:
        sparepool.MAX_SPARES = args.spares
        sparepool.keep()
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load average {os.getloadavg()}; "
          f"{args.evaluations} evaluations of each, the ways in a drawn order each time; busy loops {args.busy}; "
          f"spares {args.spares or 'off'}")
    print(f"{'kit':22} | {'code':6} | {'way':9} | {'score':>8} | {'CV %':>6} | {'hi/lo':>6} | {'excl. 1':>7} | "
          f"{'s/eval':>6}")
    for name in args.kits.split(","):
        kit = kits[name]
        codes = {"better": kit.file(kit.manifest.examples["better"]).read_text(),
                 "copy": kit.starting_point().read_text() + "\n# a copy\n"}
        for what, code in codes.items():
            found: dict[str, list] = {way: [] for way in ways}
            for _ in range(args.evaluations):
                for way in random.sample(ways, len(ways)):
                    found[way].append(await one(settings, kit, code, way))
            for way, rows in found.items():
                scores = [r[0] for r in rows]
                cv = 100 * statistics.stdev(scores) / statistics.mean(scores) if len(scores) > 1 else float("nan")
                print(f"{name:22} | {what:6} | {way:9} | {statistics.median(scores):8.3f} | {cv:6.2f} | "
                      f"{statistics.median(r[2] / r[1] for r in rows):6.3f} | "
                      f"{sum(not r[1] <= 1 <= r[2] for r in rows):3} of {len(rows):<2} | "
                      f"{statistics.median(r[3] for r in rows):6.2f}", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evaluations", type=int, default=10)
    parser.add_argument("--kits", default="rmsnorm_cpu,pairwise_distance_cpu")
    parser.add_argument("--busy", type=int, default=0)
    parser.add_argument("--ways", default=",".join(WAYS))
    parser.add_argument("--spares", type=int, default=0, help="keep up to N spare workers, as the bench server does")
    args = parser.parse_args()
    if unknown := set(args.ways.split(",")) - set(WAYS):
        parser.error(f"unknown ways {sorted(unknown)}; known: {', '.join(WAYS)}")
    with busy_loops(args.busy):
        asyncio.run(main(args))
