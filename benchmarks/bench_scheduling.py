"""Throughput of the device pool and the added latency of an evaluation on Ray.

On a shrunk CPU kernel kit (rmsnorm_cpu, one small workload, a short timing plan):
- evaluations per minute through the local pool with 1, 2 and 4 CPU slots (`cores_per_eval` 1),
  each slot's evaluations pinned to its core; the scaling is shown against 1 slot and against
  the ideal (linear up to this machine's cores, flat beyond);
- the latency of one evaluation run here in-process (`core.evaluate_candidate`), through a pool
  slot (a slot runner process), and on a local Ray cluster of one device node on 127.0.0.1
  (median of --repeats, sequential); the difference is what the slot runner and Ray add.

Goals (issue #26): >= 0.8x linear up to the machine's cores; a remote evaluation adds <= 0.5 s.
The load average is printed before and after: on a shared 2-core machine figures are noisy.
Usage: python benchmarks/bench_scheduling.py [--count 6] [--repeats 3] [--no-ray]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from evoteam.config import SOURCE_ROOT, Settings
from evoteam.servers.bench.evaluation.core import evaluate_candidate
from evoteam.servers.bench.scheduling.dispatch import close_backends, evaluate_scheduled

GOOD = """
import numpy as np

def run(hidden_states, weight, eps):
    x = hidden_states.astype(np.float64)
    return (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight).astype(np.float32)
"""


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def make_kit(root: Path) -> Path:
    kit = root / "kits" / "rmsnorm_sched"
    shutil.copytree(SOURCE_ROOT / "task_kits" / "rmsnorm_cpu", kit)
    manifest = json.loads((kit / "kit.json").read_text())
    manifest.update(name="rmsnorm_sched", memory_limit_mb=2048, timeouts={"startup_s": 60, "workload_s": 20},
                    timing={"warmup": 1, "rounds": 3, "reps_per_round": 3})
    manifest.pop("heldout", None)
    (kit / "kit.json").write_text(json.dumps(manifest))
    (kit / "workloads.jsonl").write_text(json.dumps(
        {"uuid": "t128_h1024", "axes": {"num_tokens": 128, "hidden_size": 1024},
         "inputs": {"eps": {"type": "scalar", "value": 1e-6}}}) + "\n")
    return kit


async def pool_rate(settings: Settings, slots: int, count: int) -> float:
    s = settings.model_copy(update={"bench_backend": "pool", "bench_devices": [f"cpu:{i}" for i in range(slots)]})
    t = time.perf_counter()
    results = await asyncio.gather(*[evaluate_scheduled(s, "rmsnorm_sched", code=GOOD + f"# {i}\n")
                                     for i in range(count)])
    wall = time.perf_counter() - t
    close_backends()
    assert all(r.status == "PASSED" for r in results), [r.message for r in results]
    return count / wall * 60


async def latency(settings: Settings, backend: str, repeats: int) -> float:
    walls = []
    for i in range(repeats):
        t = time.perf_counter()
        if backend == "local":
            r = await evaluate_candidate(settings, "rmsnorm_sched", code=GOOD + f"# lat {i}\n")
        else:
            s = settings.model_copy(update={"bench_backend": backend, "bench_devices": ["cpu:0"]})
            r = await evaluate_scheduled(s, "rmsnorm_sched", code=GOOD + f"# lat {i}\n")
        walls.append(time.perf_counter() - t)
        assert r.status == "PASSED", r.message
    return statistics.median(walls)


def start_ray(home: Path, kits: Path):
    os.environ.update(EVOTEAM_DB=str(home / "node-state" / "kb.db"), EVOTEAM_KITS=str(kits),
                      RAY_USAGE_STATS_ENABLED="0", RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0")
    import ray
    from ray._private import ray_constants
    from ray.cluster_utils import Cluster

    ray_constants.ENABLE_RAY_CLUSTER = False  # stay on 127.0.0.1 (see tests/bench/test_scheduling_ray.py)
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "node_ip_address": "127.0.0.1",
                                                      "include_dashboard": False})
    c.add_node(num_cpus=2, node_ip_address="127.0.0.1", resources={"evoteam_device": 1})
    ray.init(address=c.address, _node_ip_address="127.0.0.1", log_to_driver=False)
    return ray, c


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=6, help="evaluations per pool width")
    ap.add_argument("--repeats", type=int, default=3, help="sequential evaluations per latency figure")
    ap.add_argument("--no-ray", action="store_true")
    args = ap.parse_args()
    cores = len(os.sched_getaffinity(0))
    print(f"bench_scheduling: {cores} cores usable, load average {load()} before")
    with tempfile.TemporaryDirectory(prefix="evoteam-sched-") as tmp:
        root = Path(tmp)
        kit = make_kit(root)
        settings = Settings(db=root / "state" / "kb.db", kits_dirs=[kit.parent])
        await latency(settings, "local", 1)  # warm the page cache and the kit's hash
        rates = {}
        for width in (1, 2, 4):
            rates[width] = await pool_rate(settings, width, args.count)
            ideal = min(width, cores)
            print(f"pool, {width} slot(s): {rates[width]:.1f} evaluations/min "
                  f"({rates[width] / rates[1]:.2f}x of 1 slot; ideal {ideal}x; "
                  f"{rates[width] / rates[1] / ideal:.2f} of linear up to {cores} cores)")
        local = await latency(settings, "local", args.repeats)
        pooled = await latency(settings, "pool", args.repeats)
        close_backends()
        print(f"latency, one evaluation: in-process {local:.2f} s; pool slot {pooled:.2f} s "
              f"(+{pooled - local:.2f} s)")
        if not args.no_ray:
            try:
                ray, cluster = start_ray(root, kit.parent)
            except ImportError:
                print("Ray is not installed: pip install 'evoteam[ray]' (the Ray figure is skipped)")
            else:
                try:
                    await latency(settings, "ray", 1)  # the node's first task starts a Ray worker
                    remote = await latency(settings, "ray", args.repeats)
                    print(f"latency, one evaluation on Ray (warm worker): {remote:.2f} s "
                          f"(+{remote - local:.2f} s over in-process, +{remote - pooled:.2f} s over a pool slot)")
                finally:
                    close_backends()
                    ray.shutdown()
                    cluster.shutdown()
    print(f"load average {load()} after")


if __name__ == "__main__":
    asyncio.run(main())
