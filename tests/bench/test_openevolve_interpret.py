"""How an evaluator's metrics become a status: only a valid evaluation scores."""

from __future__ import annotations

import math

import pytest

from evoteam.servers.bench.evaluation.core import STATUS_ORDER
from evoteam.servers.bench.formats.openevolve import evolve_block_problem, interpret, normalise_result, ShimEvaluationResult


@pytest.mark.parametrize("metrics,status,words", [
    ({"combined_score": 0.0, "validity": 0.0, "error": "circles 3 and 4 overlap"}, "RUNTIME_ERROR", "overlap"),
    ({"error": 0.0}, "RUNTIME_ERROR", "reported an error"),  # OpenEvolve's own failure result
    ({"combined_score": 0.7, "error": 0.0}, "RUNTIME_ERROR", "reported an error"),
    ({"combined_score": 0.9, "validity": 0.0}, "INCORRECT_NUMERICAL", "invalid (validity=0)"),
    ({"combined_score": 0.9, "valid": False}, "INCORRECT_NUMERICAL", "invalid (valid=0)"),
    ({"combined_score": 0.9, "success": False}, "RUNTIME_ERROR", "success=false"),
    ({"error": 0.0, "timeout": True}, "TIMEOUT", "timeout"),
    ({"combined_score": math.nan}, "INCORRECT_NUMERICAL", "nan/inf never score"),
    ({"combined_score": 0.5, "spread": math.inf}, "INCORRECT_NUMERICAL", "'spread' is inf"),
    ({"status": "INCORRECT_SHAPE", "error": "wrong shape"}, "INCORRECT_SHAPE", "wrong shape"),
    ({"note": "text only"}, "INCORRECT_NUMERICAL", "no number for 'combined_score'"),
    # A "-inf" penalty the store cannot keep: it failed, rather than being refused after the run (review, mp43).
    ({"combined_score": -1e308}, "INCORRECT_NUMERICAL", "a penalty or an overflow"),
    ({"combined_score": -10 ** 400}, "INCORRECT_NUMERICAL", "a penalty or an overflow"),
])
def test_failures(metrics, status, words):
    verdict = interpret(metrics, "combined_score", STATUS_ORDER)
    assert verdict.status == status and verdict.score is None
    assert words in verdict.message.lower()


def test_passes():
    assert interpret({"combined_score": 0.8, "validity": 1.0}, "combined_score", STATUS_ORDER).score == 0.8
    # "error" is the objective of some evaluators (lower is better): then it is a score.
    assert interpret({"error": 0.25, "speedup": 1.2}, "error", STATUS_ORDER).score == 0.25
    # Without combined_score, OpenEvolve ranks by the mean of the numeric metrics; so do we, and say so.
    mean = interpret({"a": 1.0, "b": 3, "flag": True, "name": "x"}, "combined_score", STATUS_ORDER)
    assert mean.status == "PASSED" and mean.score == 2.0 and "mean of the numeric metrics" in mean.message


def test_normalise_result():
    metrics, artifacts = normalise_result(ShimEvaluationResult({"s": 1, "v": 2.5}, {"log": b"bytes \xff", "n": 3}))
    assert metrics == {"s": 1, "v": 2.5} and artifacts == {"log": "bytes \ufffd", "n": "3"}
    with pytest.raises(TypeError, match="returned float"):
        normalise_result(0.5)


def test_evolve_block_problem():
    base = "import x\n# EVOLVE-BLOCK-START\ndef f():\n    return 1\n# EVOLVE-BLOCK-END\nprint(f())\n"
    assert evolve_block_problem(base, base.replace("return 1", "return 2  # better")) is None
    assert evolve_block_problem(base, base.replace("print(f())", "print(f())   ")) is None
    assert "before the first" in evolve_block_problem(base, base.replace("import x", "import y"))
    assert "after the last" in evolve_block_problem(base, base + "f = lambda: 99\n")
    assert "markers were changed" in evolve_block_problem(base, "def f():\n    return 3\n")
    assert evolve_block_problem("def f():\n    return 1\n", "anything at all") is None  # no markers, no contract
