"""A local Ray cluster for the bench's Ray tests: a head and two device nodes, all on 127.0.0.1.

Started once per test run (the ``ray_cluster`` session fixture in tests/bench/conftest.py).
Devices are a custom resource (``evoteam_device``: there are no GPUs here); each device node reads
its own evoteam configuration from the environment it was started with (its kit folders and state
folder), never the caller's settings. That environment is set only while a node starts: its
raylet and the workers it spawns keep it, and the rest of the test run does not see it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from evoteam.config import SOURCE_ROOT

LOOPBACK = "127.0.0.1"
KIT = "rmsnorm_ray"
# A second copy of the kit that names a GPU model; only the first device node is of that type.
TYPED_KIT = "rmsnorm_ray_typed"
GPU_MODEL = "TESTGPU"
DEVICES_PER_NODE = 2
# Quick failure detection, so a killed node is noticed within seconds.
SYSTEM = {"health_check_period_ms": 500, "health_check_failure_threshold": 3, "health_check_timeout_ms": 500}


def make_kit(root: Path, name: str = KIT, gpu_model: str | None = None) -> Path:
    """rmsnorm_cpu, shrunk as tests/bench/conftest.py's fast_kit."""
    kit = root / name
    shutil.copytree(SOURCE_ROOT / "task_kits" / "rmsnorm_cpu", kit)
    manifest = json.loads((kit / "kit.json").read_text())
    manifest.update(name=name, memory_limit_mb=2048, timeouts={"startup_s": 30, "workload_s": 8},
                    timing={"warmup": 1, "rounds": 2, "reps_per_round": 2})
    if gpu_model:
        manifest["gpu_model"] = gpu_model
    manifest.pop("heldout", None)
    (kit / "kit.json").write_text(json.dumps(manifest))
    (kit / "workloads.jsonl").write_text(json.dumps(
        {"uuid": "t128_h1024", "axes": {"num_tokens": 128, "hidden_size": 1024},
         "inputs": {"eps": {"type": "scalar", "value": 1e-6}}}) + "\n")
    return kit


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class LocalCluster:
    """Ray's own cluster utilities, on loopback; ``restore`` replaces killed nodes."""

    def __init__(self, home: Path):
        import ray
        from ray._private import ray_constants
        from ray.cluster_utils import Cluster

        self.home = home
        self.kits = home / "kits"
        make_kit(self.kits)
        make_kit(self.kits, TYPED_KIT, GPU_MODEL)
        self.locks = home / "node-state" / "bench" / "locks"
        self._killed: list[int] = []
        # RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0: otherwise Ray swaps 127.0.0.1 for the machine's
        # interface address when nodes dial the head; with it every node stays on loopback.
        self.env = {"EVOTEAM_DB": str(home / "node-state" / "kb.db"), "EVOTEAM_KITS": str(self.kits),
                    "RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
        self._constants = ray_constants
        self._was_cluster, ray_constants.ENABLE_RAY_CLUSTER = ray_constants.ENABLE_RAY_CLUSTER, False
        with _environment(self.env):
            self.cluster = Cluster(initialize_head=True, head_node_args={
                "num_cpus": 1, "node_ip_address": LOOPBACK, "include_dashboard": False, "_system_config": SYSTEM})
            self.nodes = [self._add(typed=True), self._add()]
        ray.init(address=self.cluster.address, _node_ip_address=LOOPBACK, log_to_driver=False)

    def _add(self, typed: bool = False):
        # Ray's accelerator type as a GPU node declares it (here, with no GPU, by hand).
        extra = {f"accelerator_type:{GPU_MODEL}": 1} if typed else {}
        return self.cluster.add_node(num_cpus=DEVICES_PER_NODE, node_ip_address=LOOPBACK,
                                     resources={"evoteam_device": DEVICES_PER_NODE, **extra})

    def kill(self, node) -> None:
        """Take a device node away at once (no graceful shutdown)."""
        self.cluster.remove_node(node, allow_graceful=False)
        self._killed.append(self.nodes.index(node))
        self.nodes.remove(node)

    def restore(self) -> None:
        """Start a node like each one killed, so the next test finds the cluster as it was."""
        while self._killed:
            index = self._killed.pop()
            with _environment(self.env):
                self.nodes.insert(index, self._add(typed=index == 0))
        self.cluster.wait_for_nodes()

    def shutdown(self) -> None:
        import ray

        ray.shutdown()
        self.cluster.shutdown()
        self._constants.ENABLE_RAY_CLUSTER = self._was_cluster
