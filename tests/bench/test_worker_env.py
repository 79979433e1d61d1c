"""A kit's `worker_env`: allocator and thread settings that reach every worker of an evaluation
alike (the trusted reference/baseline worker and the candidate's; a program kit's evaluator and
the programs it runs), shown by describe, and refused for anything but allocator/thread variables."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from evoteam.config import Settings
from evoteam.errors import DomainError
from evoteam.servers.bench.evaluation.catalog import describe_kit
from evoteam.servers.bench.evaluation.core import evaluate_candidate
from evoteam.servers.bench.formats.kit import Kit
from evoteam.servers.bench.confinement.workerenv import ALLOCATOR_DEFAULTS

OVERRIDE = {"MALLOC_ARENA_MAX": "3", "OMP_NUM_THREADS": "2"}
# What a process sees of OVERRIDE, as one number: 3 + 2/10.
SCALE = "(float(os.environ.get('MALLOC_ARENA_MAX', '0')) + float(os.environ.get('OMP_NUM_THREADS', '0')) / 10)"

ENV_CANDIDATE = f"""import os
import numpy as np


def run(hidden_states, weight, eps):
    x = hidden_states.astype(np.float64)
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight
    return (y * {SCALE}).astype(np.float32)
"""
# Right only if the reference saw the override.
FIXED_CANDIDATE = ENV_CANDIDATE.replace(SCALE, "3.2")


def _env_kit(fast_kit: Path, worker_env: dict | None) -> Path:
    """The fast rmsnorm kit with its reference and baseline scaled by what their worker's
    environment says (both run in the trusted worker)."""
    definition = json.loads((fast_kit / "definition.json").read_text())
    definition["reference"] = "import os\n" + definition["reference"].replace(
        "return x / np.sqrt(mean_square + float(eps)) * np.asarray(weight, dtype=np.float64)",
        f"return x / np.sqrt(mean_square + float(eps)) * np.asarray(weight, dtype=np.float64) * {SCALE}")
    assert SCALE in definition["reference"]
    (fast_kit / "definition.json").write_text(json.dumps(definition))
    (fast_kit / "baseline.py").write_text(ENV_CANDIDATE)
    manifest = json.loads((fast_kit / "kit.json").read_text())
    manifest.pop("worker_env", None)
    if worker_env is not None:
        manifest["worker_env"] = worker_env
    (fast_kit / "kit.json").write_text(json.dumps(manifest))
    return fast_kit


async def test_override_reaches_the_baseline_and_the_candidate(fast_kit, fast_settings):
    kit = _env_kit(fast_kit, OVERRIDE)
    # The candidate computes the scale from its own environment: equal outputs mean it saw what
    # the reference saw; the baseline (same code, trusted worker) is kept, so it saw it too.
    seen = await evaluate_candidate(fast_settings, str(kit), code=ENV_CANDIDATE)
    assert seen.status == "PASSED", seen.message
    assert seen.metrics["baseline"] == "baseline.py::run"
    assert not seen.metrics.get("baseline_notes")
    # ... and what the reference saw is the override (3 + 2/10), not a default.
    fixed = await evaluate_candidate(fast_settings, str(kit), code=FIXED_CANDIDATE)
    assert fixed.status == "PASSED", fixed.message


async def test_without_override_the_defaults_apply(fast_kit, fast_settings):
    kit = _env_kit(fast_kit, None)
    # threads=1 (the default) sets OMP_NUM_THREADS=1; MALLOC_ARENA_MAX is not set: scale 0.1.
    fixed = await evaluate_candidate(fast_settings, str(kit), code=FIXED_CANDIDATE)
    assert fixed.status == "INCORRECT_NUMERICAL"
    seen = await evaluate_candidate(fast_settings, str(kit), code=ENV_CANDIDATE)
    assert seen.status == "PASSED", seen.message


def test_describe_shows_the_effective_settings(fast_kit, fast_settings):
    kit = _env_kit(fast_kit, OVERRIDE)
    detail = describe_kit(fast_settings, str(kit))
    # The kit's override wins over `threads` (1) for the variable it names; the other thread
    # variables and the allocator defaults stay.
    assert detail.worker_env == {**ALLOCATOR_DEFAULTS, "OMP_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "1",
                                 "MKL_NUM_THREADS": "1", "MALLOC_ARENA_MAX": "3"}
    from evoteam.cli import main

    env = {"EVOTEAM_DB": str(fast_settings.db), "EVOTEAM_KITS": str(kit.parent)}
    out = CliRunner().invoke(main, ["bench", "describe", "rmsnorm_fast"], env=env)
    assert out.exit_code == 0, out.output
    assert "MALLOC_ARENA_MAX=3" in out.output and "OMP_NUM_THREADS=2" in out.output
    # A forbidden variable: one line naming it and what is allowed, and a failing exit.
    _env_kit(kit, {"LD_PRELOAD": "/tmp/evil.so"})
    out = CliRunner().invoke(main, ["bench", "describe", "rmsnorm_fast"], env=env)
    assert out.exit_code != 0 and "'LD_PRELOAD' is not one" in out.output and "MALLOC_ARENA_MAX" in out.output


@pytest.mark.parametrize("env,words", [
    ({"LD_PRELOAD": "/tmp/evil.so"}, ["'LD_PRELOAD' is not one", "MALLOC_ARENA_MAX", "OMP_NUM_THREADS"]),
    ({"PYTHONPATH": "/tmp"}, ["'PYTHONPATH' is not one", "OPENBLAS_NUM_THREADS"]),
    ({"OMP_TOOL_LIBRARIES": "/tmp/evil.so"}, ["'OMP_TOOL_LIBRARIES' is not one"]),
    ({"MALLOC_ARENA_MAX": "2 /tmp/x"}, ["MALLOC_ARENA_MAX", "is not a plain value"]),
    ({"OMP_NUM_THREADS": True}, ["must be a string or an integer"]),
    (["OMP_NUM_THREADS"], ["must be an object"]),
])
async def test_forbidden_variables_are_refused(fast_kit, fast_settings, env, words):
    kit = _env_kit(fast_kit, env)
    with pytest.raises(DomainError) as err:
        Kit.load(kit)
    for word in words:
        assert word in str(err.value)
    # An evaluation refuses the kit before any worker starts.
    with pytest.raises(DomainError, match="bad manifest"):
        await evaluate_candidate(fast_settings, str(kit), code=ENV_CANDIDATE)


def test_integers_are_accepted(fast_kit):
    kit = _env_kit(fast_kit, {"MALLOC_ARENA_MAX": 2, "OMP_PLACES": "{0:4}"})
    assert Kit.load(kit).manifest.worker_env == {"MALLOC_ARENA_MAX": "2", "OMP_PLACES": "{0:4}"}


PROBE = "{k: os.environ.get(k, '0') for k in ('MALLOC_ARENA_MAX', 'OMP_NUM_THREADS')}"


async def test_program_kit_override_reaches_the_evaluator_and_its_programs(tmp_path):
    root = tmp_path / "kits" / "env_probe"
    root.mkdir(parents=True)
    (root / "kit.json").write_text(json.dumps({
        "name": "env_probe", "kind": "program", "goal": "report the environment", "evaluator": "evaluator.py",
        "objective": "score", "initial_program": "initial_program.py", "enforce_evolve_blocks": False,
        "worker_env": OVERRIDE}))
    (root / "evaluator.py").write_text(
        "import os\nfrom evoteam.servers.bench.measurement.program import run_program\n\n\n"
        "def evaluate(program_path):\n"
        "    seen = run_program(program_path, 'run')\n"
        f"    own = {PROBE}\n"
        "    return {'score': 1.0, 'program_arena': float(seen['MALLOC_ARENA_MAX']),\n"
        "            'program_omp': float(seen['OMP_NUM_THREADS']),\n"
        "            'evaluator_arena': float(own['MALLOC_ARENA_MAX']),\n"
        "            'evaluator_omp': float(own['OMP_NUM_THREADS'])}\n")
    program = f"import os\n\n\ndef run():\n    return {PROBE}\n"
    (root / "initial_program.py").write_text(program)
    settings = Settings(db=tmp_path / "state" / "kb.db", kits_dirs=[root.parent])
    result = await evaluate_candidate(settings, "env_probe", code=program)
    assert result.status == "PASSED", result.message
    assert {k: result.metrics[k] for k in ("program_arena", "program_omp", "evaluator_arena", "evaluator_omp")} \
        == {"program_arena": 3.0, "program_omp": 2.0, "evaluator_arena": 3.0, "evaluator_omp": 2.0}
