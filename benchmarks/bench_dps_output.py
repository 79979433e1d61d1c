"""The same kernel returning its output and writing into the harness's output slot, through the bench.

A candidate in destination passing style (DPS) writes into an output slot that the harness
allocated outside the clock (in the worker's shared area, 64-byte aligned, NaN-filled before each
call); a candidate that returns its output allocates it inside the clock, where numpy's
allocator puts it. Which of the two a kit's caller pays for is a convention (FlashInfer-Bench's
definitions pass outputs in), and on a memory-bound kernel it is worth a measurable share of the
time: this script runs the bench's own `compare` on rmsnorm_cpu, A one float32 RMSNorm returning
its output and B the same arithmetic in DPS, N times, and prints B's speedup over A with its
interval. (In one plain process the same two read anywhere from 0.94x to 1.3x depending on the
buffers' cache history, which such a loop does not hold fixed: model-play mp34, 2026-12-05.)

Each workload's own ratio is printed too: the share depends on the output's size against the
kernel's time, so a kit's held-out shapes can read more than its dev ones (model-play mp56,
2026-12-06: 1.25x on two held-out shapes, against 1.08-1.13x for the dev geometric mean).

Usage: python benchmarks/bench_dps_output.py [--runs 4] [--repeats 3] [--split dev|heldout|both]
"""

from __future__ import annotations

import argparse
import asyncio
import os

from evoteam import stats

# One float32 RMSNorm; the two candidates differ only in where the output comes from.
_NORM = """
    x = hidden_states
    ss = np.einsum("ij,ij->i", x, x)
    ss *= np.float32(1.0 / x.shape[-1])
    ss += np.float32(eps)
    inv = np.sqrt(ss)
    np.reciprocal(inv, out=inv)
"""
RETURNING = ("import numpy as np\n\ndef run(hidden_states, weight, eps):" + _NORM
             + "    out = np.multiply(x, inv[:, None])\n    out *= weight\n    return out\n")
DPS = ("import numpy as np\n\nDESTINATION_PASSING_STYLE = True\n\ndef run(hidden_states, weight, eps, output):" + _NORM
       + "    np.multiply(x, inv[:, None], out=output)\n    output *= weight\n")


async def _compare_once(repeats: int, split: str):
    from evoteam.config import load_settings
    from evoteam.servers.bench.evaluation.compare import compare_candidates

    return await compare_candidates(load_settings(), "rmsnorm_cpu", {"code": RETURNING}, {"code": DPS},
                                    split=split, repeats=repeats)


def through_bench(times: int, repeats: int, split: str = "dev") -> None:
    print(f"\n## The bench's compare on rmsnorm_cpu ({split}): A returns its output, B writes into the slot "
          f"({times} runs)\n")
    print("| run | B's speedup over A (95% interval) | per workload | significant | contended | load average |")
    print("| --- | --- | --- | --- | --- | --- |")
    for i in range(times):
        load = os.getloadavg()[0]
        cmp = asyncio.run(_compare_once(repeats, split))
        est = stats.Estimate(cmp.b_speedup_over_a, *cmp.interval, cmp.rounds or 0)
        each = ", ".join(f"{w.workload} {w.b_speedup_over_a:.3f}" for w in cmp.workloads
                         if w.b_speedup_over_a is not None)
        print(f"| {i + 1} | {stats.describe(est, '×')} | {each} | {cmp.significant} | {cmp.contended} | {load:.2f} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3, help="compare's repeats (times the kit's rounds)")
    parser.add_argument("--split", choices=("dev", "heldout", "both"), default="dev")
    args = parser.parse_args(argv)
    print(f"load average {os.getloadavg()[0]:.2f} at the start")
    for split in ("dev", "heldout") if args.split == "both" else (args.split,):
        through_bench(args.runs, args.repeats, split)
    print(f"\nload average {os.getloadavg()[0]:.2f} at the end")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
