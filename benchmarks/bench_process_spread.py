"""How much does one process's time for a kernel differ from another's, in the plainest harness?

`bench_coverage.py` found the score of `examples/better.py` on `pairwise_distance_cpu` spreading
4% (CV) over separate evaluations whether each had 10 or 20 rounds: not the rounds' sampling
noise. Each evaluation runs every side in processes of its own, so this measures what a process
alone brings: the kit's baseline timed in a loop (median of 40 calls after 3 warm-ups, the
workers' allocator and thread settings) in N fresh processes, with numpy's transparent huge
pages on and off (`NUMPY_MADVISE_HUGEPAGE`), the processes of both settings in turn.
Prints a table; numbers come with their spread.

Usage: python benchmarks/bench_process_spread.py [--processes 12]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

KIT = Path(__file__).resolve().parents[1] / "task_kits" / "pairwise_distance_cpu"
CHILD = r'''
import sys, time
import numpy as np
sys.path.insert(0, sys.argv[1])
from baseline import run
rng = np.random.default_rng(0)
x = rng.standard_normal((512, 32), dtype=np.float32)
y = rng.standard_normal((512, 32), dtype=np.float32)
for _ in range(3):
    run(x, y)
times = []
for _ in range(40):
    t = time.perf_counter_ns()
    run(x, y)
    times.append(time.perf_counter_ns() - t)
huge = 0
for line in open("/proc/self/smaps_rollup"):
    if line.startswith("AnonHugePages"):
        huge = int(line.split()[1])
print(sorted(times)[len(times) // 2] / 1e6, huge)
'''
# The workers' settings (evoteam/servers/bench/confinement/workerenv.py).
ENV = {"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(1 << 30), "OMP_NUM_THREADS": "1",
       "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--processes", type=int, default=12)
    args = parser.parse_args()
    print(f"# bench_process_spread.py --processes {args.processes}; pairwise_distance_cpu baseline, "
          f"n512_m512_d32; load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    got: dict[str, list[tuple[float, int]]] = {"on": [], "off": []}
    for _ in range(args.processes):
        for mode, flag in (("on", "1"), ("off", "0")):
            out = subprocess.run([sys.executable, "-c", CHILD, str(KIT)], capture_output=True, text=True, check=True,
                                 env={**os.environ, **ENV, "NUMPY_MADVISE_HUGEPAGE": flag}).stdout.split()
            got[mode].append((float(out[0]), int(out[1])))
    print(f"{'huge pages':<10} | {'n':>3} | median ms [min-max]      | CV between processes | AnonHugePages kB")
    for mode, rows in got.items():
        ms = [t for t, _ in rows]
        cv = statistics.stdev(ms) / statistics.mean(ms) * 100
        huge = sorted({h for _, h in rows})
        print(f"{mode:<10} | {len(ms):>3} | {statistics.median(ms):7.3f} [{min(ms):.3f}-{max(ms):.3f}] | "
              f"{cv:19.1f}% | {huge}")
    print(f"# load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
