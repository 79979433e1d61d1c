"""Issue 23: the harness trusts no field of a worker's reply. A candidate that makes its own
worker answer with a malformed reply fails, flagged, as the candidate: never a harness crash,
never "kit ... is broken"."""

from __future__ import annotations

import pytest

from evoteam.servers.bench.measurement import protocol, replies
from evoteam.servers.bench.evaluation.core import evaluate_candidate
from tests.bench.conftest import fast_kit, fast_settings  # noqa: F401 - fixtures

GOOD = """
import numpy as np

def run(hidden_states, weight, eps):
    x = hidden_states.astype(np.float64)
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight
    return y.astype(np.float32)
"""

FORGE = """
import json, os, struct
import evoteam.servers.bench.measurement.protocol as _P
_orig = _P.write_frame


def _raw(fd, text):
    data = text.encode()
    os.write(fd, struct.pack("<I", len(data)) + data)


def _forged(fd, header, arrays=None):
    if isinstance(header, dict) and "outputs" in header:
        MODE
    return _orig(fd, header, arrays)


_P.write_frame = _forged
"""

MODES = {
    "dtype_is_a_list": 'header["outputs"][0]["dtype"] = ["float32"]',
    "status_is_a_dict": 'return _orig(fd, {"ok": False, "status": {"x": 1}, "message": "m"})',
    "message_is_a_list": 'return _orig(fd, {"ok": False, "status": "RUNTIME_ERROR", "message": ["m"]})',
    "ok_is_a_string": 'header["ok"] = "true"',
    "blobs_is_a_number": 'return _raw(fd, json.dumps(dict(header, blobs=5)))',
    "blob_shape_overflows": 'return _raw(fd, json.dumps(dict(header, blobs=[{"key": "k", "dtype": "float64", '
                            '"shape": [2**62, 2**62, 2**62]}])))',
    "deeply_nested": 'return _raw(fd, \'{"ok": true, "outputs": \' + "[" * 200000 + "]" * 200000 + "}")',
    "shape_is_huge": 'header["outputs"][0]["shape"] = [2**70]',
    "address_is_text": 'header["outputs"][0]["addr"] = "0x10"',
    "violations_hold_objects": 'header["violations"] = [{"x": 1}]',
}


@pytest.mark.parametrize("mode", sorted(MODES))
async def test_a_malformed_reply_is_the_candidates_flagged_failure(mode, fast_kit, fast_settings):
    code = GOOD + FORGE.replace("MODE", MODES[mode])
    e = await evaluate_candidate(fast_settings, "rmsnorm_fast", code=code)
    assert e.status != "PASSED" and e.flagged, (mode, e.status, e.message)
    assert "broken" not in (e.message or ""), e.message


async def test_the_harness_still_works_afterwards(fast_kit, fast_settings):
    e = await evaluate_candidate(fast_settings, "rmsnorm_fast", code=GOOD)
    assert e.status == "PASSED", e.message


@pytest.mark.parametrize("blobs, words", [(5, "not a list"), ([{"key": "k", "dtype": "object", "shape": [1]}], "dtype"),
                                          ([{"key": "k", "dtype": "float64", "shape": [2**40, 2**40]}], "elements"),
                                          ([{"key": ["k"], "dtype": "float64", "shape": [1]}], "key")])
def test_blob_descriptors_are_checked_before_any_allocation(blobs, words):
    with pytest.raises(replies.BadReply, match=words):
        replies.blobs(blobs)


def test_a_deep_reply_is_refused_without_recursion():
    deep: list = []
    for _ in range(10_000):
        deep = [deep]
    with pytest.raises(replies.BadReply, match="nested"):
        replies.common({"ok": True, "x": deep})


def test_a_deeply_nested_frame_is_a_protocol_error(tmp_path):
    import os

    r, w = os.pipe()
    text = ('{"ok": true, "x": ' + "[" * 200_000 + "]" * 200_000 + "}").encode()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.write(w, len(text).to_bytes(4, "little") + text)
        os._exit(0)
    os.close(w)
    with pytest.raises(protocol.ProtocolError):
        protocol.FrameReader(r).read()
    os.waitpid(pid, 0)
    os.close(r)


@pytest.mark.parametrize("call, words", [
    ({"function": "os.system", "kwargs": {}}, "function"),
    ({"function": "run", "kwargs": [1]}, "kwargs"),
    ({"function": "run", "timeout_s": float("inf")}, "timeout_s"),
    ({"function": "run", "timeout_s": float("nan")}, "timeout_s"),
    ({"function": "run", "memory_mb": 10**30}, "memory_mb"),
    ({"function": "run", "memory_mb": "4096"}, "memory_mb"),
])
def test_an_evaluators_run_program_call_is_checked(call, words):
    with pytest.raises(replies.BadReply, match=words):
        replies.run_program_request(call)
