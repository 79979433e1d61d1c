"""Issue 23: memory and process caps hold for a worker's whole process tree (cgroup memory.max
and pids.max), with a clear status when hit. Skipped, with the reason, where no cgroup can be
written (the per-process limits still hold there: docs/trust.md)."""

from __future__ import annotations

import json
import shutil
import sys
import textwrap
from pathlib import Path

import pytest

from evoteam.config import Settings
from evoteam.servers.bench.evaluation.core import evaluate_candidate
from evoteam.servers.bench.confinement.limits import TreeLimits
from tests.bench.conftest import fast_kit, fast_settings  # noqa: F401 - fixtures

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="cgroups are Linux-only")


def _require_tree_limits() -> None:
    probe = TreeLimits(64, 64)
    kind = probe.kind
    probe.close()
    if kind == "none":
        pytest.skip("no writable cgroup (v2 with memory/pids, or v1) here: only per-process limits apply")


FORKS = """
import os, time
import numpy as np

def run(hidden_states, weight, eps):
    kids = []
    for _ in range(6):
        pid = os.fork()
        if pid == 0:
            block = np.ones(150 * 1024 * 1024 // 8)  # 150 MiB each, six of them
            time.sleep(0.5)
            os._exit(0)
        kids.append(pid)
    for pid in kids:
        os.waitpid(pid, 0)
    x = hidden_states.astype(np.float64)
    return (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight).astype(np.float32)
"""

MANY = """
import os, time
import numpy as np

def run(hidden_states, weight, eps):
    kids = []
    for _ in range(2000):
        try:
            pid = os.fork()
        except OSError:
            raise RuntimeError("fork refused")
        if pid == 0:
            time.sleep(5)
            os._exit(0)
        kids.append(pid)
    return hidden_states
"""


async def test_a_candidates_forks_share_its_memory_cap(fast_kit, fast_settings):
    _require_tree_limits()
    manifest = json.loads((fast_kit / "kit.json").read_text())
    # six 150 MiB children take a while to page in on a busy machine: the cap, not the clock,
    # must be what stops them
    manifest["timeouts"]["workload_s"] = 60
    (fast_kit / "kit.json").write_text(json.dumps(dict(manifest, memory_limit_mb=400)))
    e = await evaluate_candidate(fast_settings, "rmsnorm_fast", code=FORKS)
    assert e.status == "RUNTIME_ERROR" and "memory cap of" in (e.message or ""), (e.status, e.message)
    assert "tree-limits(" in e.sandbox


async def test_a_candidate_cannot_start_thousands_of_processes(fast_kit, fast_settings):
    _require_tree_limits()
    manifest = json.loads((fast_kit / "kit.json").read_text())  # forks of a worker are slow on a busy machine
    (fast_kit / "kit.json").write_text(json.dumps(dict(manifest, timeouts={"startup_s": 20, "workload_s": 60})))
    e = await evaluate_candidate(fast_settings, "rmsnorm_fast", code=MANY)
    assert e.status == "RUNTIME_ERROR", (e.status, e.message)
    assert "fork refused" in (e.message or "") or "processes" in (e.message or ""), e.message


EVALUATOR = '''
import json, subprocess, sys

RUNNER = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("p", sys.argv[1])
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
print(json.dumps(m.solve()))
"""


def evaluate(program_path):
    out = subprocess.run([sys.executable, "-c", RUNNER, program_path], capture_output=True, text=True, timeout=60)
    return {"combined_score": float(json.loads(out.stdout)) if out.returncode == 0 else 0.0}
'''

HOG = '''
# EVOLVE-BLOCK-START
def solve():
    block = bytearray(1200 * 1024 * 1024)  # 1.2 GiB against a 300 MiB kit
    return 1.0 + len(block) * 0
# EVOLVE-BLOCK-END
'''


async def test_a_program_started_by_its_evaluator_is_held_to_the_kits_cap(tmp_path: Path):
    _require_tree_limits()
    kit = tmp_path / "kits" / "hog"
    kit.mkdir(parents=True)
    (kit / "evaluator.py").write_text(textwrap.dedent(EVALUATOR))
    (kit / "initial_program.py").write_text(HOG.replace("1200 * 1024 * 1024", "1024"))
    (kit / "config.yaml").write_text("evaluator:\n  timeout: 60\n  cascade_evaluation: false\n"
                                     "evoteam:\n  name: hog\n  memory_limit_mb: 300\n")
    settings = Settings(db=tmp_path / "state" / "kb.db", kits_dirs=[kit.parent])
    small = await evaluate_candidate(settings, "hog", code=(kit / "initial_program.py").read_text())
    assert small.status == "PASSED", small.message
    e = await evaluate_candidate(settings, "hog", code=HOG)
    assert e.status != "PASSED" and "memory cap of 556 MiB" in (e.message or ""), (e.status, e.message)
    shutil.rmtree(kit)

