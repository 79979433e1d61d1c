"""Evaluator for seeded_mean (test data written for evoteam): evaluate(program_path, seeds)
scores the program on the given instances. Plain dict results, no openevolve import."""
import importlib.util


def target(seed):
    return float((seed * 37) % 101)


def evaluate(program_path, seeds=(1, 2, 3)):
    spec = importlib.util.spec_from_file_location("candidate_program", program_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    errors = [abs(float(module.solve(s)) - target(s)) for s in seeds]
    mean_error = sum(errors) / len(errors)
    return {"combined_score": 1.0 / (1.0 + mean_error), "mean_error": mean_error,
            "instances": len(seeds), "smallest_instance": min(seeds)}
