"""Hostile candidates: each is caught with the right status and a clear message, the kit is left
unchanged, and the harness keeps working afterwards."""

from __future__ import annotations

import textwrap

import pytest

from evoteam.servers.bench.confinement import sandbox
from evoteam.servers.bench.evaluation.core import evaluate_candidate

GOOD = """
import numpy as np

def run(hidden_states, weight, eps):
    x = hidden_states.astype(np.float64)
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight
    return y.astype(np.float32)
"""


def _hostile(kit_dir):
    k = str(kit_dir)
    return {
        "hang": ("TIMEOUT", "did not finish", """
def run(hidden_states, weight, eps):
    while True:
        pass
"""),
        "segfault": ("RUNTIME_ERROR", "SIGSEGV", """
import ctypes

def run(hidden_states, weight, eps):
    ctypes.memmove(16, b"x", 1)
"""),
        "cache_keyed_on_inputs": ("INCORRECT_NUMERICAL", "fresh inputs", GOOD.replace("def run(", "def _run(") + """
_cache = {}

def run(hidden_states, weight, eps):
    key = (hidden_states.shape, hidden_states.dtype.str)
    if key not in _cache:
        _cache[key] = _run(hidden_states, weight, eps)
    return _cache[key]
"""),
        "mutates_inputs": ("RUNTIME_ERROR", "modified its input 'hidden_states'", GOOD.replace(
            "    x = hidden_states", "    hidden_states[0, 0] += 1.0\n    x = hidden_states")),
        "returns_input": ("RUNTIME_ERROR", "shares memory with input 'hidden_states'", """
def run(hidden_states, weight, eps):
    return hidden_states
"""),
        "patches_perf_counter": ("RUNTIME_ERROR", "perf_counter", GOOD + """
import time
time.perf_counter_ns = lambda: 0
time.perf_counter = lambda: 0.0
"""),
        "patches_clock_in_call": ("RUNTIME_ERROR", "perf_counter", GOOD.replace("def run(", "def _run(") + """
import time

def run(hidden_states, weight, eps):
    time.perf_counter_ns = lambda: 0
    return _run(hidden_states, weight, eps)
"""),
        "reads_reference": ("RUNTIME_ERROR", "not allowed", f"""
def run(hidden_states, weight, eps):
    with open({k + '/definition.json'!r}) as fh:
        fh.read()
    raise SystemExit("should not get here")
"""),
        "reads_reference_quietly": ("RUNTIME_ERROR", "not allowed", GOOD.replace("def run(", "def _run(") + f"""
def run(hidden_states, weight, eps):
    try:
        open({k + '/definition.json'!r}).read()
    except OSError:
        pass
    return _run(hidden_states, weight, eps)
"""),
        "floods_stdout": ("RUNTIME_ERROR", "stdout", """
def run(hidden_states, weight, eps):
    for _ in range(200000):
        print("x" * 100)
"""),
        "allocates_too_much": ("RUNTIME_ERROR", "memory", """
import numpy as np

def run(hidden_states, weight, eps):
    return np.ones((64, 1024, 1024, 1024), dtype=np.float32)
"""),
        "writes_into_kit": ("RUNTIME_ERROR", "not allowed", GOOD.replace("def run(", "def _run(") + f"""
def run(hidden_states, weight, eps):
    with open({k + '/baseline.py'!r}, "w") as fh:
        fh.write("def run(*a):\\n    raise SystemExit\\n")
    return _run(hidden_states, weight, eps)
"""),
        "syntax_error": ("COMPILE_ERROR", "SyntaxError", "def run(:\n"),
        "lies_after_correctness": ("INCORRECT_NUMERICAL", "timed call", GOOD.replace("def run(", "def _run(") + """
_calls = [0]

def run(hidden_states, weight, eps):
    _calls[0] += 1
    if _calls[0] <= 2:
        return _run(hidden_states, weight, eps)
    return np.zeros_like(hidden_states)
"""),
        # Timed outputs are compared at positions drawn after each call: leaving one element in a
        # thousand undone on the timed calls is caught as surely as leaving all of them.
        "skips_a_little_after_correctness": ("INCORRECT_NUMERICAL", "timed call", GOOD.replace("def run(", "def _run(") + """
_calls = [0]

def run(hidden_states, weight, eps):
    _calls[0] += 1
    out = _run(hidden_states, weight, eps)
    if _calls[0] > 2:
        out.reshape(-1)[::1000] = 0.0
    return out
"""),
        # Inputs come from the harness, so making the candidate's own generator predictable gives
        # it nothing: its answer for the predictable inputs is wrong for the real ones.
        "tampers_input_generator": ("INCORRECT_NUMERICAL", "exceed", GOOD.replace("def run(", "def _run(") + """
_orig = np.random.default_rng
np.random.default_rng = lambda seed=None: _orig(0)
_known = {}

def run(hidden_states, weight, eps):
    key = hidden_states.shape
    if key not in _known:
        rng = np.random.default_rng(1)
        x = rng.random(hidden_states.shape, dtype=np.float32) - np.float32(0.5)
        _known[key] = _run(x, weight, eps)
    return _known[key]
"""),
    }


CASES = list(_hostile("/x").keys())


@pytest.mark.parametrize("case", CASES)
async def test_hostile_candidate_is_caught(case, fast_kit, fast_settings, tree_hash):
    status, needle, code = _hostile(fast_kit)[case]
    before = tree_hash(fast_kit)
    result = await evaluate_candidate(fast_settings, str(fast_kit), code=textwrap.dedent(code))
    assert result.status == status, (case, result.status, result.message)
    assert result.score is None
    text = (result.message or "") + " ".join(w.message or "" for w in result.workloads)
    assert needle.lower() in text.lower(), (case, text)
    assert tree_hash(fast_kit) == before, f"{case} changed the kit folder"
    if case in ("reads_reference_quietly", "writes_into_kit", "patches_perf_counter", "returns_input",
                "lies_after_correctness", "skips_a_little_after_correctness"):
        assert result.flagged, case


async def test_harness_unharmed_after_hostile_runs(fast_kit, fast_settings):
    result = await evaluate_candidate(fast_settings, str(fast_kit), code=GOOD)
    assert result.status == "PASSED", result.message
    assert result.score is not None and result.score > 0
    assert not result.flagged


@pytest.mark.skipif(sandbox.landlock_abi() < 1, reason="Landlock is not available on this kernel")
async def test_native_write_is_stopped_by_landlock(fast_kit, fast_settings):
    target = fast_kit / "planted.txt"
    code = GOOD + textwrap.dedent(f"""
    import ctypes, os
    _libc = ctypes.CDLL(None, use_errno=True)
    _fd = _libc.open({str(target).encode()!r}, os.O_WRONLY | os.O_CREAT, 0o644)
    if _fd >= 0:
        _libc.write(_fd, b"planted", 7)
        _libc.close(_fd)
    """)
    result = await evaluate_candidate(fast_settings, str(fast_kit), code=code)
    assert not target.exists()
    assert result.status == "PASSED"
    assert "landlock" in result.sandbox


async def test_candidate_cannot_read_the_heldout_secret(fast_kit, fast_settings):
    from evoteam.servers.bench.formats.kits import heldout_secret, state_dir

    heldout_secret(fast_settings)
    secret = state_dir(fast_settings) / "heldout.secret"
    code = GOOD.replace("def run(", "def _run(") + f"""
def run(hidden_states, weight, eps):
    open({str(secret)!r}).read()
    return _run(hidden_states, weight, eps)
"""
    result = await evaluate_candidate(fast_settings, str(fast_kit), code=code)
    assert result.status == "RUNTIME_ERROR" and "not allowed" in result.message


async def test_heldout_split_hides_shapes_and_is_stable(fast_kit, fast_settings):
    first = await evaluate_candidate(fast_settings, str(fast_kit), code=GOOD, split="heldout")
    assert first.status == "PASSED"
    assert [w.workload for w in first.workloads] == ["heldout-1"]
    both = await evaluate_candidate(fast_settings, str(fast_kit), code=GOOD, split="all")
    assert [w.workload for w in both.workloads] == ["t128_h1024", "heldout-1"]
