"""The trusted side of the call path: the inputs and the reference's outputs of a correctness
call come from one request to the trusted worker, and what the candidate gets is the inputs as
made, whatever the reference does with its own copy."""

from __future__ import annotations

import asyncio
import json
import shutil
import textwrap

from evoteam.servers.bench.evaluation.core import _workload_specs, evaluate_candidate
from evoteam.servers.bench.measurement import arena
from tests.bench.conftest import kernel_session

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
    # Its speedup over a baseline that returns its outputs holds the style's own share, and its
    # message says so (a model read such a gain as its fusion's; mp41, 2026-12-05).
    assert ("; the candidate writes its outputs into slots allocated outside the clock (destination passing), "
            "the baseline allocates the ones it returns inside it: that alone gave other kernels "
            "1.02-1.30x of such a speedup, most on short calls") in ok.message, ok.message
    lazy = await evaluate_candidate(fast_settings, str(fast_kit), code="SKIP = True\n" + DPS)
    assert lazy.status == "INCORRECT_NUMERICAL", lazy.message
    text = " ".join(w.message or "" for w in lazy.workloads)
    assert "timed call" in text and "NaN" in text, text
    assert lazy.flagged


# Refuses to work unless its output slot is blank (NaN) when it is called, timed calls included,
# and 64-byte aligned as docs/bench.md says (a store-bound kernel wrote 5-18% faster into an
# aligned output than into one 16 or 48 bytes off, where numpy's allocator puts a returned one).
BLANK_AT_ENTRY = """
import numpy as np

DESTINATION_PASSING_STYLE = True

def run(hidden_states, weight, eps, output):
    if not np.isnan(output).all():
        raise RuntimeError("the output slot was not blank at the start of the call")
    if output.ctypes.data % 64:
        raise RuntimeError("the output slot is not 64-byte aligned")
    x = hidden_states.astype(np.float64)
    output[...] = (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight).astype(np.float32)
"""


async def test_a_returning_candidate_is_told_when_the_baseline_passes_destinations():
    """The other way round (a FlashInfer-Bench baseline writes into its slots): the candidate is
    told what returning its outputs costs it and what gives it back; alike, nothing is said."""
    from evoteam.servers.bench.measurement.batch import _styles_apart

    said = _styles_apart({"baseline": True, "cand": False}, "cand")
    assert said.startswith("the baseline writes its outputs into slots allocated outside the clock"), said
    assert said.endswith("1.02-1.30x, most on short calls; writing into given outputs gives that back"), said
    assert _styles_apart({"baseline": True, "cand": True}, "cand") is None
    assert _styles_apart({"baseline": False, "cand": False}, "cand") is None
    assert "1.02-1.30x of such a speedup" in _styles_apart({"baseline": False, "cand": True}, "cand")


async def test_every_call_of_a_destination_passing_candidate_starts_from_blank_aligned_slots(fast_kit, fast_settings):
    result = await evaluate_candidate(fast_settings, str(fast_kit), code=BLANK_AT_ENTRY)
    assert result.status == "PASSED", result.message


# Allocates nothing but its output: where the output lands shows what the worker still holds.
EMPTY_LIKE = """
import numpy as np

def run(hidden_states, weight, eps):
    return np.empty_like(hidden_states)
"""


async def test_consecutive_calls_put_their_outputs_where_the_last_ones_were(fast_kit, fast_settings):
    """The worker lets the last call's outputs go (the harness has read them) before the next
    call allocates, so a kernel's outputs reuse one block of memory, as in a plain loop of calls,
    rather than alternating between two (twice the cache footprint, a cold block every call)."""
    kit, cand, session = kernel_session(fast_settings, fast_kit, EMPTY_LIKE)

    def addresses() -> list[int]:
        side = session.sides[1]
        spec = _workload_specs(kit, "dev", fast_settings)[0][0]
        out = []
        for payload in session._stage(spec, 3):
            arena.fill(side.worker, session._layout(side, payload, spec), payload, outputs=False)
            header, _, _ = session._request(side, {"cmd": "tcall", "calibrate": False, "send": False}, "a call",
                                            timed=True)
            out.append(header["outputs"][0]["addr"])
        return out

    try:
        await asyncio.to_thread(session.start)
        addrs = await asyncio.to_thread(addresses)
    finally:
        await asyncio.to_thread(session.close)
        shutil.rmtree(cand.folder, ignore_errors=True)
    assert addrs[1] == addrs[2], addrs


async def test_a_candidate_right_only_for_its_first_inputs_fails_the_second_check(fast_kit, fast_settings):
    """The candidate's second correctness call, on other fresh inputs, is held to the reference's
    outputs on them (the reference runs twice per workload: tests/bench/test_measurement_rounds.py)."""
    first_only = GOOD.replace("def run(", "def _run(") + textwrap.dedent("""
        _first = []

        def run(hidden_states, weight, eps):
            if not _first:
                _first.append(_run(hidden_states, weight, eps))
            return _first[0].copy()
    """)
    stale = await evaluate_candidate(fast_settings, str(fast_kit), code=first_only)
    assert stale.status == "INCORRECT_NUMERICAL", stale.message
    assert "second call" in stale.message, stale.message


async def test_a_candidate_exact_only_on_its_first_call_is_held_to_the_tolerance_after(fast_kit, fast_settings):
    """Exact on the first call of each workload, then 1.5× the kit's rtol off on every later call:
    within twice the tolerance of the baseline, so it passed while the second check was against
    the baseline (a review of 2026-12-02); held to the reference at the kit's tolerance, it fails,
    and the error reported is the larger of the two calls'."""
    drifting = GOOD.replace("def run(", "def _run(") + textwrap.dedent("""
        _calls = {}

        def run(hidden_states, weight, eps):
            y = _run(hidden_states, weight, eps)
            n = _calls[hidden_states.shape] = _calls.get(hidden_states.shape, 0) + 1
            return y if n == 1 else (y * (1 + 1.5e-4)).astype(y.dtype)
    """)
    off = await evaluate_candidate(fast_settings, str(fast_kit), code=drifting)
    assert off.status == "INCORRECT_NUMERICAL", off.message
    assert "second call" in off.message, off.message
    assert any(w.max_abs_error is not None and w.max_abs_error > 1e-6 for w in off.workloads), \
        [w.max_abs_error for w in off.workloads]




def test_a_lead_the_output_style_alone_could_explain_is_said_so():
    """A supervisor credited a significant 1.10x (1.07-1.13) of a destination-passing B over a
    returning A to B's kernel, though the style alone was 1.08-1.13x (mp48)."""
    from evoteam import stats
    from evoteam.servers.bench.evaluation.compare import _styles_clause

    share = "so the whole of B's lead here may be that style's share, not a faster kernel"
    assert share in _styles_clause(True, stats.Estimate(1.10, 1.07, 1.13, 30))
    # How to tell the kernel's own gain, said with it (mp60 found it alone: 1.29x behind a 1.38x).
    assert _styles_clause(True, stats.Estimate(1.10, 1.07, 1.13, 30)).endswith(
        "(compare A with B rewritten to return its outputs: one style; where A is that already, this is the "
        "style's own share here)")
    # Beyond the style's share (up to 1.30x on short calls, mp56): said as a lead of B's own.
    assert share not in _styles_clause(True, stats.Estimate(1.45, 1.35, 1.55, 30))
    assert share in _styles_clause(True, stats.Estimate(1.16, 1.12, 1.21, 30))  # mp56's held-out rewrite
    assert "may be that style's share" not in _styles_clause(True, stats.Estimate(0.80, 0.75, 0.85, 30))
    # No lead, no share of one (mp58: said beside 1.00x and 0.989x); the style's clause itself stays.
    for tie in (stats.Estimate(1.0, 0.95, 1.05, 30), stats.Estimate(0.989, 0.94, 1.04, 30),
                stats.Estimate(1.01, 0.975, 1.05, 30)):  # mp74: "the whole of B's lead" beside no significant one
        assert "may be that style's share" not in _styles_clause(True, tie) and "destination passing" in \
            _styles_clause(True, tie)
    # A writes into the slots and leads: read as A over B.
    assert "the whole of A's lead here may be" in _styles_clause(False, stats.Estimate(0.92, 0.89, 0.95, 30))
    assert "may be that style's share" not in _styles_clause(True)  # no estimate: the clause alone
    # The returning side leads although the style favoured the other: its lead is a faster kernel (mp74), unless
    # the two are one arithmetic in both styles, whose compare read 0.89x (mp79): then it is the style's cost.
    assert _styles_clause(False, stats.Estimate(1.08, 1.04, 1.12, 30)).endswith(
        ", which favoured A there; B leads here even so: a faster kernel, unless the two are the same arithmetic "
        "(then it is what that style costs here)"), _styles_clause(False, stats.Estimate(1.08, 1.04, 1.12, 30))
    assert "faster kernel" not in _styles_clause(False, stats.Estimate(1.02, 0.98, 1.06, 30))
    # Not beside "not established": an interval of too little coverage decides nothing (review).
    assert "faster kernel" not in _styles_clause(False, stats.Estimate(1.08, 1.04, 1.12, 30, 0.75))
    # A passing side's lead whose lower end is past the share is a faster kernel, said so (mp78 did the
    # arithmetic itself beside 1.72x (1.64-1.80)); either side passing; not from too little coverage.
    assert _styles_clause(True, stats.Estimate(1.72, 1.64, 1.80, 30)).endswith(
        "; B's lead, at least 1.64x, is more than that: a faster kernel")
    assert _styles_clause(False, stats.Estimate(0.58, 0.55, 0.61, 30)).endswith(
        "; A's lead, at least 1.64x, is more than that: a faster kernel")
    assert "faster kernel" not in _styles_clause(True, stats.Estimate(1.72, 1.64, 1.80, 30, 0.75))
    assert "is more than that" not in _styles_clause(True, stats.Estimate(1.45, 1.25, 1.65, 30))  # within the share


def test_a_significant_lead_of_the_styles_share_alone_is_not_said_faster():
    """"B is faster: ..., significant; ... may be that style's share" led a model to crown a same-work
    rewrite into destination passing style by the skill's own rule ("significant" and the verdict
    names B), while the trajectory and run_report called it no gain (mp57)."""
    from evoteam import stats
    from evoteam.servers.bench.evaluation.compare import _style_lead

    said = "B is faster: B's speedup over A 1.05× (1.01–1.09), significant"
    assert _style_lead(said, True, stats.Estimate(1.05, 1.01, 1.09, 30)) == \
        "no faster kernel shown: B's speedup over A 1.05× (1.01–1.09), significant"
    # Beyond the share, a faster kernel; A writing into the slots and leading, read as A over B.
    assert _style_lead(said, True, stats.Estimate(1.45, 1.35, 1.55, 30)) == said
    assert _style_lead("A is faster: B's speedup over A 0.9× (0.85–0.95), significant", False,
                       stats.Estimate(0.9, 0.85, 0.95, 30)).startswith("no faster kernel shown: ")
    # The pooled verdict that opens a reply, alike; one that does not find the lead is left as it is.
    pooled = "both batches of the two pooled, which the run reads: B over A 1.06× (1.03–1.08), significant: B is faster"
    assert _style_lead(pooled, True, stats.Estimate(1.06, 1.03, 1.08, 30)).endswith(
        "significant, no faster kernel shown")
    tie = "no significant difference: B's speedup over A 1.01× (0.97–1.05); the interval includes 1"
    assert _style_lead(tie, True, stats.Estimate(1.01, 0.97, 1.05, 30)) == tie
    # Against the kit's baseline, as the trajectory reads x0: the speedup as measured (review 2026-12-06).
    assert _style_lead(said, True, stats.Estimate(1.05, 1.01, 1.09, 30), ("baseline", "cand_b")) == said
