"""Held-out instances are secret for every kit kind: what a held-out evaluation reports to an
agent carries nothing the candidate or the evaluator said.

A kernel kit's held-out shapes are redacted per workload (core.redact_heldout). A program kit's
held-out instances (seeds drawn with the bench's secret) reach the program as arguments, so a
program can print them, raise with them in the message, or get the evaluator to echo them in a
metric, an artifact or a stage row. For the held-out split every such field is dropped: the
status, the score, the number of instances and the wall time are what an agent sees (and what
the store keeps).
"""

from __future__ import annotations

import math
from typing import Any

HIDDEN = ("details are hidden because held-out instances are secret (reproduce it on the dev instances, "
          "split='dev')")


def program_heldout(status: str, score: float | None, objective: str, metrics: dict[str, Any],
                    stages: list[dict[str, Any]]) -> tuple[str, dict[str, Any], dict[str, str], list[dict[str, Any]]]:
    """(message, metrics, artifacts, stages) fit for an agent after a held-out program evaluation."""
    message = (f"PASSED on the held-out instances; {HIDDEN}" if status == "PASSED"
               else f"{status} on the held-out instances; {HIDDEN}")
    kept: dict[str, Any] = {}
    if score is not None and math.isfinite(score):
        kept[objective] = score
    for key in ("wall_s", "instances"):
        if isinstance(metrics.get(key), (int, float)) and not isinstance(metrics.get(key), bool):
            kept[key] = metrics[key]
    rows = [{"stage": str(r.get("stage"))[:40], "passed": r.get("passed") if isinstance(r.get("passed"), bool)
             else None} for r in stages]
    return message, kept, {}, rows
