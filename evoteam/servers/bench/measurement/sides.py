"""The parts of one evaluation batch, as the harness names them: a workload to run, a solution to
time (a side), and what the harness concluded about a side on a workload."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evoteam.servers.bench.measurement.workerproc import WorkerFailure, WorkerProc

BASELINE = "baseline"
CANDIDATE = "candidate"
# The empty-call worker (session.py): the baseline's code in a confined worker of its own that only
# ever makes empty calls (the call path alone); never a timed side, never in a batch's results.
EMPTY = "empty calls"
ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth")  # a side's processes (copies.py) at most


def worker_name(label: str) -> str:
    """How messages name a side's worker ("the {name} process crashed"): a side's other processes
    (copies.py: CANDIDATE'' is its third) by their place, "the candidate's third process crashed"."""
    stem = label.rstrip("'")
    if stem in (BASELINE, CANDIDATE) and stem != label and len(label) - len(stem) < len(ORDINALS):
        return f"{stem}'s {ORDINALS[len(label) - len(stem)]}"
    return {BASELINE: "baseline", EMPTY: "empty-call worker", CANDIDATE: "candidate"}.get(label, f"candidate {label}")


@dataclass
class WorkloadSpec:
    name: str
    axes: dict[str, int]  # every axis, constants included
    scalars: dict[str, Any]
    expected: dict[str, tuple[tuple[int, ...] | None, str]]
    hidden: bool = False  # a held-out workload: nothing about it may reach the candidate's author


@dataclass
class WorkloadVerdict:
    status: str = "PASSED"
    message: str | None = None
    flagged: bool = False
    max_abs: float = 0.0
    max_rel: float = 0.0
    candidate_ms: float | None = None
    baseline_ms: float | None = None
    speedup: float | None = None
    speedup_interval: list[float] | None = None
    rounds: int | None = None
    samples: list[float] = field(default_factory=list)  # one paired speedup per round
    # Per round the smallest and largest speedup its measurements allow, where a time was unresolved
    # (timing.Rounds.bounds); None when every time was resolved.
    sample_ranges: tuple[list[float], list[float]] | None = None
    times_ns: list[int] = field(default_factory=list)  # this side's time per round, path subtracted
    notes: list[str] = field(default_factory=list)
    kernel_s: float = 0.0  # time spent inside timed calls, this side (and the baseline's share)


@dataclass
class SideSpec:
    """A solution to time: its own files in a folder of its own."""

    label: str
    folder: Path
    file: str
    function: str
    dps: bool | None


@dataclass
class Side:
    label: str
    worker: WorkerProc
    trusted_code: bool = False  # the kit's baseline
    # One of the baseline's other processes (copies.py): its code is trusted, but its failure is its
    # own (the evaluation falls back to one process a side), not the kit's.
    baseline_copy: bool = False
    dead: bool = False
    error: WorkerFailure | None = None
    dps: bool = False  # destination passing style: it writes into output slots the harness fills


def new_seed() -> int:
    return secrets.randbits(62)
