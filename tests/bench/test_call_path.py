"""The trusted side of the call path: the inputs and the reference's outputs of a correctness
call come from one request to the trusted worker, and what the candidate gets is the inputs as
made, whatever the reference does with its own copy."""

from __future__ import annotations

import json
import textwrap

from evoteam.servers.bench.evaluation.core import evaluate_candidate

GOOD = """
import numpy as np

def run(hidden_states, weight, eps):
    x = hidden_states.astype(np.float64)
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight
    return y.astype(np.float32)
"""

# The kit's reference scribbles over its inputs after computing its answer (sloppy kit code does
# such things). Were the candidate given those same arrays, its answer would be for the
# scribbled inputs and fail the comparison.
SCRIBBLING_REFERENCE = textwrap.dedent("""
    import numpy as np


    def run(hidden_states, weight, eps):
        x = np.asarray(hidden_states, dtype=np.float64)
        out = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + float(eps)) * np.asarray(weight, dtype=np.float64)
        hidden_states *= 3.0
        weight[:] = -1.0
        return out
""")


async def test_a_reference_that_writes_into_its_inputs_does_not_change_the_candidate_s(fast_kit, fast_settings):
    definition = json.loads((fast_kit / "definition.json").read_text())
    definition["reference"] = SCRIBBLING_REFERENCE
    (fast_kit / "definition.json").write_text(json.dumps(definition))
    result = await evaluate_candidate(fast_settings, str(fast_kit), code=GOOD)
    assert result.status == "PASSED", result.message
    assert (result.workloads[0].max_abs_error or 0.0) < 1e-5, result.workloads[0]


async def test_a_wrong_candidate_is_told_where_it_is_wrong(fast_kit, fast_settings):
    """The reference's outputs read back from the staging area carry the comparison: a candidate
    off by a constant fails on its first call, with the worst element named."""
    result = await evaluate_candidate(fast_settings, str(fast_kit), code=GOOD.replace(
        "return y.astype(np.float32)", "return (y + 0.5).astype(np.float32)"))
    assert result.status == "INCORRECT_NUMERICAL", result.message
    text = " ".join(w.message or "" for w in result.workloads)
    assert "exceed atol" in text and "worst at" in text, text
    assert "second call" not in text, text


DPS = """
import numpy as np

DESTINATION_PASSING_STYLE = True
_calls = [0]

def run(hidden_states, weight, eps, output):
    _calls[0] += 1
    if SKIP and _calls[0] > 2:
        return  # the correctness calls done, nothing more is written
    x = hidden_states.astype(np.float64)
    output[...] = (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight).astype(np.float32)
"""


async def test_a_destination_passing_candidate_writes_into_slots_the_harness_refills(fast_kit, fast_settings):
    """Only a solution in destination passing style gets NaN-filled output slots before each
    call: written, it passes; left alone after its correctness calls, its timed calls fail."""
    ok = await evaluate_candidate(fast_settings, str(fast_kit), code="SKIP = False\n" + DPS)
    assert ok.status == "PASSED", ok.message
    lazy = await evaluate_candidate(fast_settings, str(fast_kit), code="SKIP = True\n" + DPS)
    assert lazy.status == "INCORRECT_NUMERICAL", lazy.message
    text = " ".join(w.message or "" for w in lazy.workloads)
    assert "timed call" in text and "NaN" in text, text
    assert lazy.flagged
