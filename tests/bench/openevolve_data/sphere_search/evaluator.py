"""Evaluator in OpenEvolve's format for sphere_search (test data written for evoteam).

evaluate(program_path) returns an EvaluationResult: metrics plus text artifacts. A program that
raises is reported the way OpenEvolve examples do it: combined_score 0, validity 0 and an error."""
import importlib.util
import math
import traceback

from openevolve.evaluation_result import EvaluationResult

CENTER = 1.5


def _load(program_path):
    spec = importlib.util.spec_from_file_location("candidate_program", program_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _distance(point):
    if not isinstance(point, (list, tuple)) or len(point) != 3:
        raise ValueError(f"run() must return three coordinates, got {point!r}")
    return math.sqrt(sum((float(x) - CENTER) ** 2 for x in point))


def evaluate_stage1(program_path):
    """A quick check: does the program run, and is its point anywhere near the minimum?"""
    try:
        distance = _distance(_load(program_path).run())
    except Exception as exc:  # the scaffold's idiom: report, do not raise
        return {"combined_score": 0.0, "validity": 0.0, "error": str(exc)}
    return {"combined_score": 1.0 / (1.0 + distance), "validity": 1.0, "stage1_distance": distance}


def evaluate(program_path):
    """The full evaluation: the score, the distance to the minimum and a feedback artifact."""
    try:
        program = _load(program_path)
        point = program.run()
        distance = _distance(point)
    except Exception as exc:
        return EvaluationResult(
            metrics={"combined_score": 0.0, "validity": 0.0, "error": str(exc)},
            artifacts={"stderr": traceback.format_exc(), "failure_stage": "evaluate"})
    score = 1.0 / (1.0 + distance)
    if not math.isfinite(score):
        score = float("nan")
    return EvaluationResult(
        metrics={"combined_score": score, "validity": 1.0, "distance": distance},
        artifacts={"feedback": f"the point is {distance:.4f} away from the minimum"})


evaluate_stage2 = evaluate
