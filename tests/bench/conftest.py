"""Fixtures for the bench tests: isolated settings and a fast copy of a CPU kernel kit."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import textwrap
from pathlib import Path

import pytest

from evoteam.config import SOURCE_ROOT, Settings
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.store import Actor

KITS = SOURCE_ROOT / "task_kits"

# A correct RMSNorm for the scheduling tests' kits (the pool's and Ray's).
RMSNORM = textwrap.dedent("""
    import numpy as np

    def run(hidden_states, weight, eps):
        x = hidden_states.astype(np.float64)
        return (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight).astype(np.float32)
""")


def slow_rmsnorm(seconds: float) -> str:
    """RMSNORM that sleeps `seconds` per call: evaluations started together overlap whatever the
    runners' start-up costs, and a node can be killed while one runs."""
    return RMSNORM.replace("def run(", "def _run(") + textwrap.dedent(f"""
        import time

        def run(hidden_states, weight, eps):
            time.sleep({seconds})
            return _run(hidden_states, weight, eps)
    """)


def repeated(code: str, times: int) -> str:
    """A kernel (`code` defining `run`) that does its whole work `times` times per call: slower
    by that factor by construction. Tests that need one candidate faster than another use such a
    gap rather than a real optimisation's 2x, which a machine at load 10-16 can blur (issue 24:
    no test may need a quiet machine). Keep `times` under the kit's max_plausible_speedup."""
    assert code.count("def run(") == 1, "the kernel's entry must be one `def run(`"
    return code.replace("def run(", "def _run_once(") + textwrap.dedent(f"""

        def run(*args):
            for _ in range({times - 1}):
                _run_once(*args)
            return _run_once(*args)
    """)


def _tree_hash(folder: Path) -> str:
    """A hash of every file's path and bytes under `folder` (and of the folder listing)."""
    h = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        h.update(str(path.relative_to(folder)).encode())
        if path.is_file():
            h.update(path.read_bytes())
    return h.hexdigest()



def lock_is_held(path: Path) -> bool:
    """Whether some process holds a flock on ``path`` (an exclusive one cannot be taken now)."""
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)

@pytest.fixture
def tree_hash():
    return _tree_hash


@pytest.fixture
async def store(tmp_path: Path):
    """A store of its own for the test (files that need another actor or file define their own)."""
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="tester", client="pytest")) as kb:
        yield kb


@pytest.fixture
def bench_settings(tmp_path: Path) -> Settings:
    return Settings(db=tmp_path / "state" / "kb.db", kits_dirs=[KITS])


def kill_before_timing(monkeypatch) -> tuple[list[set[str]], list[str]]:
    """KernelSession.measure_sides patched: each workload's timed labels are added to the first
    list, and a label put in the second has its worker killed (SIGKILL) just before that timing."""
    import signal

    from evoteam.servers.bench.measurement import session as session_module

    timed: list[set[str]] = []
    kill: list[str] = []
    measure = session_module.KernelSession.measure_sides

    def measure_killing(self, wl, verdicts):
        timed.append(set(verdicts))
        if kill:
            os.kill(self.side(kill.pop()).worker.proc.pid, signal.SIGKILL)
        return measure(self, wl, verdicts)

    monkeypatch.setattr(session_module.KernelSession, "measure_sides", measure_killing)
    return timed, kill


def steady_kit_at(tmp_path: Path) -> Path:
    """rmsnorm_cpu with one mid-size dev workload (about a millisecond) and the default plan of
    ten rounds, so that every interval exists: ``tmp_path``/kits/rmsnorm_steady."""
    root = tmp_path / "kits" / "rmsnorm_steady"
    shutil.copytree(KITS / "rmsnorm_cpu", root)
    manifest = json.loads((root / "kit.json").read_text())
    manifest.update(name="rmsnorm_steady", timing={"warmup": 1, "rounds": 10, "reps_per_round": 2})
    (root / "kit.json").write_text(json.dumps(manifest))
    (root / "workloads.jsonl").write_text(json.dumps(
        {"uuid": "t256_h2048", "axes": {"num_tokens": 256, "hidden_size": 2048},
         "inputs": {"eps": {"type": "scalar", "value": 1e-6}}}) + "\n")
    return root


def small_kit(root: Path, workload_s: float = 4, **manifest_update) -> Path:
    """rmsnorm_cpu copied to ``root`` (named after it) with one small dev workload, a short
    timeout and a short timing plan; ``manifest_update`` changes the manifest further."""
    shutil.copytree(KITS / "rmsnorm_cpu", root)
    manifest = json.loads((root / "kit.json").read_text())
    manifest.update({"name": root.name, "memory_limit_mb": 2048, "timeouts": {"startup_s": 20, "workload_s": workload_s},
                     "timing": {"warmup": 1, "rounds": 2, "reps_per_round": 2}, **manifest_update})
    (root / "kit.json").write_text(json.dumps(manifest))
    (root / "workloads.jsonl").write_text(json.dumps(
        {"uuid": "t128_h1024", "axes": {"num_tokens": 128, "hidden_size": 1024},
         "inputs": {"eps": {"type": "scalar", "value": 1e-6}}}) + "\n")
    return root


@pytest.fixture
def fast_kit(tmp_path: Path) -> Path:
    """rmsnorm_fast: small_kit with a 4 s workload timeout and one held-out instance."""
    return small_kit(tmp_path / "kits" / "rmsnorm_fast",
                     heldout={"count": 1, "axes": {"num_tokens": {"choices": [32]}, "hidden_size": {"choices": [512]}}})


@pytest.fixture
def fast_settings(tmp_path: Path, fast_kit: Path) -> Settings:
    return Settings(db=tmp_path / "state" / "kb.db", kits_dirs=[fast_kit.parent, KITS])


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory):
    """One local Ray cluster for the whole test run (tests/support/ray_cluster.py)."""
    pytest.importorskip("ray", reason="Ray is not installed: pip install 'evoteam[ray]' (.ci/run does)")
    from tests.support.ray_cluster import LocalCluster

    cluster = LocalCluster(tmp_path_factory.mktemp("ray-bench"))
    try:
        yield cluster
    finally:
        from evoteam.servers.bench.scheduling.dispatch import close_backends

        close_backends()
        cluster.shutdown()


def kernel_session(settings: Settings, kit_folder: Path, code: str):
    """A measurement session of `code` on the kit in `kit_folder`, set up as the bench sets one
    up from the kit's manifest (not started), with the kit and the prepared candidate: for the
    tests that drive a session step by step."""
    from evoteam.servers.bench.evaluation.core import prepare_candidate
    from evoteam.servers.bench.formats.kits import find_kit
    from evoteam.servers.bench.measurement.session import KernelSession

    kit = find_kit(settings, str(kit_folder))
    m = kit.manifest
    cand = prepare_candidate(kit, None, code)
    return kit, cand, KernelSession(
        definition=kit.definition.model_dump(), framework=m.framework, device=m.device,
        inputs_source=kit.inputs_source(), reference_source=kit.definition.reference,
        baseline=kit.baseline_solution()[0], candidate_dir=cand.folder, candidate_file=cand.file,
        function=cand.function, dps=cand.dps, deny=[], memory_mb=m.memory_limit_mb, timeouts=m.timeouts,
        tolerance=m.tolerance, timing=m.timing, threads=m.threads, kit_hash=kit.content_hash)
