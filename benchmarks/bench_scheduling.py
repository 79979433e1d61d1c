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

try:
    from evoteam.servers.bench.scheduling.dispatch import warm_backend
except ImportError:  # a bench from before standby runners at start (to compare with): no warm-up
    warm_backend = None

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


async def latency(settings: Settings, backend: str, repeats: int, cores: list[int] | None = None,
                  idle_s: float = 0.0) -> dict[str, float]:
    """Median wall of ``repeats`` sequential evaluations, and its parts: before the slot's
    measurement starts (queue, runner, kit), the measurement, and after it (the reply's way back).
    ``cores``: the slot's cores (pool), or this process's own while it evaluates in-process.
    ``idle_s``: the pool is made, then left idle that long before the first evaluation (a server
    that was started before its first request)."""
    walls, before, measured, after = [], [], [], []
    s = settings
    if backend != "local":
        s = settings.model_copy(update={"bench_backend": backend, "bench_devices": ["cpu:0"],
                                        "cores_per_eval": len(cores or [0])})
        if idle_s and warm_backend is not None:
            warm_backend(s)
            await asyncio.sleep(idle_s)
    mask = os.sched_getaffinity(0)
    for i in range(repeats):
        if backend == "local" and cores:
            os.sched_setaffinity(0, cores)  # the harness's workers inherit it, as a slot's do
        t0 = time.time()
        try:
            if backend == "local":
                r = await evaluate_candidate(s, "rmsnorm_sched", code=GOOD + f"# lat {i}\n")
            else:
                r = await evaluate_scheduled(s, "rmsnorm_sched", code=GOOD + f"# lat {i}\n")
        finally:
            os.sched_setaffinity(0, mask)
        t1 = time.time()
        assert r.status == "PASSED", r.message
        walls.append(t1 - t0)
        placed = r.metrics.get("placement", {})
        if "started_at" in placed:
            before.append(placed["started_at"] - t0)
            measured.append(placed["finished_at"] - placed["started_at"])
            after.append(t1 - placed["finished_at"])
        else:
            measured.append(t1 - t0)
    out = {"wall": statistics.median(walls), "spread": max(walls) - min(walls), "measure": statistics.median(measured)}
    if before:
        out.update(before=statistics.median(before), after=statistics.median(after))
    return out


def show(name: str, fig: dict[str, float], local: dict[str, float] | None = None) -> str:
    parts = f"{fig['wall']:.2f} s (spread {fig['spread']:.2f})"
    if "before" in fig:
        parts += f" = {fig['before']:.2f} before + {fig['measure']:.2f} measuring + {fig['after']:.2f} after"
    if local is not None:
        parts += f"; {fig['wall'] - local['wall']:+.2f} s over in-process"
    return f"latency, {name}: {parts}"


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
    ap.add_argument("--idle", type=float, default=5.0, help="seconds the pool is up before its first evaluation")
    ap.add_argument("--no-rate", action="store_true", help="latency only")
    args = ap.parse_args()
    cores = len(os.sched_getaffinity(0))
    print(f"bench_scheduling: {cores} cores usable, load average {load()} before")
    with tempfile.TemporaryDirectory(prefix="evoteam-sched-") as tmp:
        root = Path(tmp)
        kit = make_kit(root)
        settings = Settings(db=root / "state" / "kb.db", kits_dirs=[kit.parent])
        await latency(settings, "local", 1)  # warm the page cache and the kit's hash
        rates = {}
        for width in () if args.no_rate else (1, 2, 4):
            rates[width] = await pool_rate(settings, width, args.count)
            ideal = min(width, cores)
            print(f"pool, {width} slot(s): {rates[width]:.1f} evaluations/min "
                  f"({rates[width] / rates[1]:.2f}x of 1 slot; ideal {ideal}x; "
                  f"{rates[width] / rates[1] / ideal:.2f} of linear up to {cores} cores)")
        # A fair comparison gives the slot the cores the in-process evaluation uses (all of them
        # here); a one-core slot is compared with an in-process evaluation pinned to that core.
        every = sorted(os.sched_getaffinity(0))
        local = await latency(settings, "local", args.repeats)
        print(show("in-process, all cores", local))
        pooled_first = await latency(settings, "pool", 1, every, idle_s=args.idle)
        close_backends()
        print(show(f"pool slot on all cores, first evaluation {args.idle:g} s after the pool started",
                   pooled_first, local))
        pooled = await latency(settings, "pool", args.repeats, every)
        close_backends()
        print(show("pool slot on all cores, sequential (standby runners)", pooled, local))
        local1 = await latency(settings, "local", args.repeats, every[:1])
        print(show("in-process pinned to one core", local1))
        pooled1 = await latency(settings, "pool", args.repeats, every[:1])
        close_backends()
        print(show("pool slot on one core", pooled1, local1))
        if not args.no_ray:
            try:
                ray, cluster = start_ray(root, kit.parent)
            except ImportError:
                print("Ray is not installed: pip install 'evoteam[ray]' (the Ray figure is skipped)")
            else:
                try:
                    await latency(settings, "ray", 1)  # the node's first task starts a Ray worker
                    remote = await latency(settings, "ray", args.repeats)
                    print(show("Ray node (all cores, warm worker)", remote, local)
                          + f", {remote['wall'] - pooled['wall']:+.2f} s over a pool slot")
                finally:
                    close_backends()
                    ray.shutdown()
                    cluster.shutdown()
    print(f"load average {load()} after")


if __name__ == "__main__":
    asyncio.run(main())
