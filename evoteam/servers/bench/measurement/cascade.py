"""Running an OpenEvolve-style evaluator inside the evaluator worker process.

``run_evaluation`` calls the evaluator's ``evaluate`` directly, or its ``evaluate_stage1/2/3``
cascade with the thresholds, each stage under a deadline, and turns what the stages return
(``formats/openevolve.py``: ``normalise_result``, ``fitness``) into metrics, artifacts and a
failure. A raised exception or a timeout is a failure, never a score.
"""

from __future__ import annotations

import threading
import time
import traceback
from typing import Any

from evoteam.servers.bench.formats.openevolve import MAX_ARTIFACT_CHARS, fitness, normalise_result


class _StageTimeout(Exception):
    pass


def _call_with_deadline(fn, args: tuple, kwargs: dict, timeout_s: float | None):
    """Call ``fn`` in a thread and wait at most ``timeout_s``. A stage that overruns is
    abandoned: the harness stops the whole worker process after the reply."""
    if not timeout_s:
        return fn(*args, **kwargs)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise _StageTimeout()
    if "error" in box:
        raise box["error"]
    return box.get("value")


def _failure(stage: str, exc: BaseException) -> dict[str, str]:
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return {"stderr": f"{type(exc).__name__}: {exc}", "traceback": tb[-MAX_ARTIFACT_CHARS:], "failure_stage": stage}


def run_evaluation(module: Any, program: str, options: dict[str, Any]) -> dict[str, Any]:
    """Evaluate ``program`` with the evaluator ``module`` as OpenEvolve would. ``options``:
    ``cascade_thresholds`` (None: direct ``evaluate``), ``kwargs`` for ``evaluate``, ``stage_timeout_s``.

    Returns ``{"metrics", "artifacts", "stages", "failure"}``; ``failure`` is None or
    ``{"status", "message"}`` for a raised exception or a timeout (never a score)."""
    thresholds = options.get("cascade_thresholds")
    kwargs = dict(options.get("kwargs") or {})
    timeout = options.get("stage_timeout_s")
    stages: list[dict[str, Any]] = []
    artifacts: dict[str, str] = {}
    metrics: dict[str, Any] = {}
    names = ["evaluate_stage1", "evaluate_stage2", "evaluate_stage3"]
    cascade = thresholds is not None and callable(getattr(module, "evaluate_stage1", None))
    # Stages run in order while they exist; a missing stage ends the cascade, as in OpenEvolve.
    plan = [n for i, n in enumerate(names) if all(callable(getattr(module, m, None)) for m in names[:i + 1])] \
        if cascade else ["evaluate"]
    for i, name in enumerate(plan):
        fn = getattr(module, name)
        start = time.perf_counter()
        try:
            # Keyword arguments (evaluator_args, held-out instances) go to evaluate() only.
            result = _call_with_deadline(fn, (program,), kwargs if name == "evaluate" else {}, timeout)
            stage_metrics, stage_artifacts = normalise_result(result)
        except _StageTimeout:
            stages.append({"stage": name, "status": "TIMEOUT", "wall_s": round(time.perf_counter() - start, 3)})
            return {"metrics": metrics, "artifacts": artifacts, "stages": stages,
                    "failure": {"status": "TIMEOUT", "message": f"{name} did not finish within {timeout:g} s "
                                                                "(evaluator.timeout) and was stopped"}}
        except BaseException as exc:  # noqa: BLE001 - the evaluator's or the program's failure
            from evoteam.servers.bench.measurement.program import ProgramFailure

            if isinstance(exc, ProgramFailure):  # evoteam's run_program says what went wrong
                # ...in its message, with the program's own traceback: the harness's frames and a
                # copy of that message as stderr told a model nothing more (6,079 characters of one
                # missing import, the traceback four times; model-play 2026-12-04).
                status, message = exc.status, exc.message
                artifacts["failure_stage"] = name
            else:
                artifacts.update(_failure(name, exc))
                status, message = "RUNTIME_ERROR", f"{name} raised {type(exc).__name__}: {exc}"
            stages.append({"stage": name, "status": status, "wall_s": round(time.perf_counter() - start, 3)})
            return {"metrics": metrics, "artifacts": artifacts, "stages": stages,
                    "failure": {"status": status, "message": message}}
        metrics.update(stage_metrics)
        artifacts.update(stage_artifacts)
        score = fitness(stage_metrics)
        row: dict[str, Any] = {"stage": name, "fitness": score, "wall_s": round(time.perf_counter() - start, 3)}
        stages.append(row)
        if cascade and i < len(plan) - 1:
            threshold = thresholds[i] if i < len(thresholds) else None
            if threshold is None:
                break
            row["threshold"] = threshold
            row["passed"] = score is not None and score >= threshold
            if not row["passed"]:
                break
    return {"metrics": metrics, "artifacts": artifacts, "stages": stages, "failure": None}
