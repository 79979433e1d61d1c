"""OpenEvolve and SkyDiscover task folders as program kits.

A folder with ``evaluator.py`` (``evaluate(program_path)``), an ``initial_program.*`` and,
usually, a ``config.yaml`` loads as a kit without a ``kit.json``. From ``config.yaml`` we read:

- ``prompt.system_message``: the goal;
- ``evaluator.timeout`` (per evaluation stage), ``evaluator.cascade_evaluation`` and
  ``evaluator.cascade_thresholds``, ``evaluator.evaluator_args`` (keyword arguments for
  ``evaluate``);
- ``early_stopping_metric`` when it is not the default: the metric that is the score;
- an optional ``evoteam:`` section (OpenEvolve ignores unknown keys) with ``name``, ``objective``,
  ``direction``, ``x0``, ``best_known``, ``goal``, ``heldout`` and ``memory_limit_mb``.

The score is ``combined_score`` unless configured otherwise; like OpenEvolve, without one the
average of the numeric metrics is the fitness (and the evaluation says so).

Two pieces run inside the evaluator worker process (see ``measurement/worker.py``):
``install_evaluation_result_shim`` (evaluators import ``openevolve.evaluation_result`` even where
OpenEvolve is not installed) and ``normalise_result`` (a dict or an ``EvaluationResult``), which
``measurement/cascade.py`` applies to each stage (direct ``evaluate``, or the
``evaluate_stage1/2/3`` cascade with the thresholds).
``interpret`` turns metrics into a status in the harness process: a failure is never a pass.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import random
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evoteam.errors import DomainError
from evoteam.servers.bench.models import ProgramHeldout

EVOLVE_START = "EVOLVE-BLOCK-START"
EVOLVE_END = "EVOLVE-BLOCK-END"
DEFAULT_OBJECTIVE = "combined_score"
MAX_ARTIFACT_CHARS = 4000  # per artifact value kept with a candidate
MAX_ARTIFACTS_CHARS = 16000  # all of one candidate's artifacts together

# ---------------------------------------------------------------- folder detection and config


def initial_program_of(folder: Path) -> Path | None:
    """The scaffold's starting program: ``initial_program.py`` (or another extension)."""
    preferred = folder / "initial_program.py"
    if preferred.is_file():
        return preferred
    others = sorted(p for p in folder.glob("initial_program.*") if p.is_file())
    return others[0] if others else None


def is_scaffold_folder(folder: Path) -> bool:
    """An OpenEvolve example or SkyDiscover/EvoDuet benchmark folder: an evaluator plus an
    initial program (config.yaml optional)."""
    return (folder / "evaluator.py").is_file() and initial_program_of(folder) is not None


class EvoteamSection(BaseModel):
    """The optional ``evoteam:`` section of a scaffold's config.yaml."""

    model_config = ConfigDict(extra="forbid")
    name: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.-]{1,80}$")
    goal: str | None = None
    objective: str | None = None
    direction: str | None = Field(default=None, pattern="^(maximize|minimize)$")
    x0: float | None = None
    best_known: float | None = None
    memory_limit_mb: int | None = Field(default=None, ge=64)
    heldout: ProgramHeldout | None = None
    enforce_evolve_blocks: bool = True
    evaluator_reads: list[str] = Field(default_factory=list, max_length=20)


class ScaffoldConfig(BaseModel):
    """What evoteam reads from a scaffold's config.yaml (everything else is OpenEvolve's)."""

    system_message: str | None = None
    timeout_s: float = 300.0
    cascade: bool = True
    cascade_thresholds: list[float] = Field(default_factory=lambda: [0.5, 0.75, 0.9])
    evaluator_args: dict[str, Any] = Field(default_factory=dict)
    metric: str = DEFAULT_OBJECTIVE
    evoteam: EvoteamSection = Field(default_factory=EvoteamSection)


def _section(data: dict, key: str, where: Path) -> dict:
    value = data.get(key) or {}
    if not isinstance(value, dict):
        raise DomainError(f"{where}: '{key}' must be a mapping")
    return value


def read_config(folder: Path) -> ScaffoldConfig:
    """Read the parts of ``config.yaml`` a bench needs; a missing file means OpenEvolve's defaults."""
    path = folder / "config.yaml"
    if not path.is_file():
        return ScaffoldConfig()
    try:
        import yaml
    except ImportError:  # pragma: no cover - pyyaml is a dependency
        raise DomainError("reading config.yaml needs PyYAML: pip install pyyaml") from None
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise DomainError(f"{path} is not readable YAML: {exc}") from None
    if not isinstance(data, dict):
        raise DomainError(f"{path} must hold a mapping")
    prompt, evaluator = _section(data, "prompt", path), _section(data, "evaluator", path)
    values: dict[str, Any] = {}
    if isinstance(prompt.get("system_message"), str):
        values["system_message"] = prompt["system_message"]
    for ours, theirs in (("timeout_s", "timeout"), ("cascade", "cascade_evaluation"),
                         ("cascade_thresholds", "cascade_thresholds"), ("evaluator_args", "evaluator_args")):
        if evaluator.get(theirs) is not None:
            values[ours] = evaluator[theirs]
    if isinstance(data.get("early_stopping_metric"), str):
        values["metric"] = data["early_stopping_metric"]
    values["evoteam"] = _section(data, "evoteam", path)
    try:
        return ScaffoldConfig(**values)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise DomainError(f"{path}: bad value for {where}: {first['msg']}") from None


def _goal(config: ScaffoldConfig, folder: Path) -> str:
    if config.evoteam.goal:
        return config.evoteam.goal
    message = (config.system_message or "").strip()
    # OpenEvolve lets system_message name a template ("system_message"); that is no goal.
    if message and " " in message:
        return message
    readme = folder / "README.md"
    if readme.is_file():
        for line in readme.read_text(errors="replace").splitlines():
            if line.strip() and not line.startswith("#"):
                return line.strip()
    return f"Improve {folder.name}: maximise the evaluator's score"


def manifest_fields(folder: Path) -> dict[str, Any]:
    """The KitManifest fields of a scaffold folder."""
    config = read_config(folder)
    ours = config.evoteam
    initial = initial_program_of(folder)
    fields_: dict[str, Any] = {
        "name": ours.name or folder.name, "kind": "program", "goal": _goal(config, folder),
        "direction": ours.direction or "maximize", "x0": ours.x0, "best_known": ours.best_known,
        "evaluator": "evaluator.py", "objective": ours.objective or config.metric,
        "initial_program": initial.name if initial else None,
        "timeouts": {"program_s": config.timeout_s},
        "cascade_thresholds": list(config.cascade_thresholds) if config.cascade else None,
        "evaluator_args": dict(config.evaluator_args),
        "program_heldout": ours.heldout.model_dump() if ours.heldout else None,
        "enforce_evolve_blocks": ours.enforce_evolve_blocks,
        "evaluator_reads": list(ours.evaluator_reads),
        "source": "openevolve",
    }
    if ours.memory_limit_mb:
        fields_["memory_limit_mb"] = ours.memory_limit_mb
    return fields_


# ---------------------------------------------------------------- EVOLVE-BLOCK markers


def _regions(code: str) -> tuple[list[list[str]], list[list[str]]] | None:
    """(outside segments, block bodies), or None when the markers are unbalanced."""
    outside: list[list[str]] = [[]]
    blocks: list[list[str]] = []
    inside = False
    for line in code.splitlines():
        if EVOLVE_START in line:
            if inside:
                return None
            outside[-1].append(line)
            blocks.append([])
            inside = True
        elif EVOLVE_END in line:
            if not inside:
                return None
            outside.append([line])
            inside = False
        elif inside:
            blocks[-1].append(line)
        else:
            outside[-1].append(line)
    return None if inside else (outside, blocks)


def evolve_block_problem(initial: str, candidate: str) -> str | None:
    """Why ``candidate`` breaks the scaffold's contract (code outside the EVOLVE-BLOCKs of the
    initial program must stay as it is), or None. Trailing whitespace is not a change."""
    base = _regions(initial)
    if base is None or not base[1]:
        return None
    mine = _regions(candidate)
    if mine is None or len(mine[1]) != len(base[1]):
        return (f"the EVOLVE-BLOCK-START/END markers were changed or removed: the initial program has "
                f"{len(base[1])} evolve block(s); edit only inside them")
    for n, (a, b) in enumerate(zip(base[0], mine[0])):
        sa, sb = [x.rstrip() for x in a], [x.rstrip() for x in b]
        while sa and not sa[-1]:
            sa.pop()
        while sb and not sb[-1]:
            sb.pop()
        if sa != sb:
            where = "before the first evolve block" if n == 0 else (
                "after the last evolve block" if n == len(base[0]) - 1 else f"between evolve blocks {n} and {n + 1}")
            k = next((i for i, (x, y) in enumerate(zip(sa, sb)) if x != y), min(len(sa), len(sb)))
            changed = sb[k] if k < len(sb) else sa[k]
            return (f"the candidate changes code outside the EVOLVE-BLOCKs ({where}, near {changed.strip()[:80]!r}); "
                    "only the code between EVOLVE-BLOCK-START and EVOLVE-BLOCK-END may change")
    return None


# ---------------------------------------------------------------- held-out instances


def heldout_instances(secret: bytes, kit_name: str, plan: ProgramHeldout) -> list[int]:
    """The held-out instances of a program kit: drawn from the secret, never from the dev list."""
    digest = hmac.new(secret, f"program-heldout:{kit_name}".encode(), hashlib.sha256).digest()
    rng = random.Random(int.from_bytes(digest, "big"))
    dev, out = set(plan.dev), []
    span = plan.high - plan.low + 1
    if span - len(dev & set(range(plan.low, plan.high + 1))) < plan.count:
        raise DomainError(f"kit {kit_name}: the held-out range [{plan.low}, {plan.high}] has too few values "
                          f"outside the dev instances for {plan.count} held-out ones")
    while len(out) < plan.count:
        value = rng.randint(plan.low, plan.high)
        if value not in dev and value not in out:
            out.append(value)
    return out


# ---------------------------------------------------------------- inside the evaluator worker


@dataclass
class ShimEvaluationResult:
    """Stands in for ``openevolve.evaluation_result.EvaluationResult`` where OpenEvolve is not
    installed: metrics plus an optional side channel of artifacts (text or bytes)."""

    metrics: dict[str, Any]
    artifacts: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, metrics: dict[str, Any]) -> ShimEvaluationResult:
        return cls(metrics=metrics)

    def to_dict(self) -> dict[str, Any]:
        return self.metrics

    def has_artifacts(self) -> bool:
        return bool(self.artifacts)

    def get_artifact_keys(self) -> list[str]:
        return list(self.artifacts)


def install_evaluation_result_shim() -> bool:
    """Make ``from openevolve.evaluation_result import EvaluationResult`` work without
    OpenEvolve. Returns True when the shim was installed (False: the real package is there)."""
    import importlib.util

    if "openevolve" in sys.modules or importlib.util.find_spec("openevolve") is not None:
        return False
    package = types.ModuleType("openevolve")
    package.__path__ = []  # a package, so submodule imports resolve through sys.modules
    module = types.ModuleType("openevolve.evaluation_result")
    module.EvaluationResult = ShimEvaluationResult
    package.evaluation_result = module
    sys.modules["openevolve"] = package
    sys.modules["openevolve.evaluation_result"] = module
    return True


def _artifact_text(value: Any) -> str:
    if isinstance(value, bytes):
        text = value.decode("utf-8", "replace")
    else:
        text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= MAX_ARTIFACT_CHARS else text[:MAX_ARTIFACT_CHARS] + " ...[truncated]"


def normalise_result(result: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """(metrics, artifacts as text) from a dict or an EvaluationResult (real or shim): anything
    with a ``metrics`` dict and an optional ``artifacts`` dict. Raises TypeError otherwise."""
    if isinstance(result, dict):
        metrics, artifacts = result, {}
    elif isinstance(getattr(result, "metrics", None), dict):
        metrics = result.metrics
        artifacts = getattr(result, "artifacts", None) or {}
        if not isinstance(artifacts, dict):
            artifacts = {"artifacts": artifacts}
    else:
        raise TypeError(f"the evaluator returned {type(result).__name__}; return a dict of metrics or an "
                        "EvaluationResult(metrics=..., artifacts=...)")
    clean: dict[str, Any] = {}
    for key, value in metrics.items():
        if isinstance(value, bool) or isinstance(value, (int, str)) or value is None:
            clean[str(key)] = value
        else:
            try:
                clean[str(key)] = float(value)
            except (TypeError, ValueError):
                clean[str(key)] = str(value)[:500]
    return clean, {str(k): _artifact_text(v) for k, v in artifacts.items()}


def fitness(metrics: dict[str, Any]) -> float | None:
    """OpenEvolve's fitness: ``combined_score`` if numeric, else the mean of the numeric metrics
    (flags and ``error`` left out)."""
    value = metrics.get(DEFAULT_OBJECTIVE)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    numbers = [float(v) for k, v in metrics.items() if k != "error" and isinstance(v, (int, float))
               and not isinstance(v, bool) and math.isfinite(float(v))]
    return sum(numbers) / len(numbers) if numbers else None


# ---------------------------------------------------------------- interpreting metrics (harness side)


@dataclass
class Verdict:
    status: str
    message: str
    score: float | None = None


def _falsy_flag(value: Any) -> bool:
    return value is False or (isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0)


def interpret(metrics: dict[str, Any], objective: str, statuses: list[str]) -> Verdict:
    """A status for an evaluator's metrics. Only a valid evaluation scores: an explicit failing
    ``status``, ``timeout``, an ``error`` entry (unless it is the objective), ``validity``/``valid``
    false, ``success`` false, or any NaN/inf metric is a failure with the evaluator's message."""
    error = metrics.get("error")
    detail = str(error) if isinstance(error, str) and error else None
    explicit = metrics.get("status")
    if isinstance(explicit, str) and explicit in statuses and explicit != "PASSED":
        return Verdict(explicit, str(detail or metrics.get("message") or explicit))
    if metrics.get("timeout") is True:
        return Verdict("TIMEOUT", detail or "the evaluator reported a timeout")
    if objective != "error" and error is not None and error is not False and error != "":
        return Verdict("RUNTIME_ERROR", detail or f"the evaluator reported an error (error={error!r}); its artifacts "
                                                  "say more")
    for flag in ("validity", "valid"):
        if flag in metrics and _falsy_flag(metrics[flag]):
            return Verdict("INCORRECT_NUMERICAL", detail or f"the evaluator marked the result invalid ({flag}=0)")
    if metrics.get("success") is False:
        return Verdict("RUNTIME_ERROR", detail or "the evaluator reported success=false")
    for key, value in metrics.items():
        if isinstance(value, float) and not math.isfinite(value):
            return Verdict("INCORRECT_NUMERICAL", f"metric {key!r} is {value}; NaN/inf never score")
    value = metrics.get(objective)
    note = ""
    if value is None and objective == DEFAULT_OBJECTIVE:
        value = fitness(metrics)
        note = " (no combined_score: the mean of the numeric metrics, as OpenEvolve ranks it)"
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return Verdict("INCORRECT_NUMERICAL", f"the evaluator gave no number for {objective!r} ({value!r})")
    if not -1e300 < value < 1e300:  # a "-inf"-like penalty the store refuses (knowledge/models.py), an int past a float
        return Verdict("INCORRECT_NUMERICAL", f"{objective} is beyond ±1e300: a penalty or an overflow, not a score "
                                              "(an evaluator marks a failed program valid=0 or success=false)")
    return Verdict("PASSED", f"{objective} = {float(value):.6g}{note}", float(value))


def stored_extras(artifacts: dict[str, str], stages: list[dict[str, Any]]) -> dict[str, Any]:
    """What a recorded candidate keeps of an evaluation besides its metrics: the artifacts
    (capped in total, so agents read why it failed) and the cascade stages."""
    out: dict[str, Any] = {}
    if artifacts:
        kept, used = {}, 0
        for key, text in artifacts.items():
            room = MAX_ARTIFACTS_CHARS - used
            if room <= 0:
                break
            kept[key] = text if len(text) <= room else text[:room] + " ...[truncated]"
            used += len(kept[key])
        out["artifacts"] = kept
    if stages:
        out["stages"] = stages
    return out


_HINT_KEYS = ("stderr", "error", "error_message", "failure_reason", "stage1_stderr", "stage2_stderr")


def with_artifact_hint(message: str, artifacts: dict[str, str]) -> str:
    """A failure message plus the evaluator's own words from its artifacts, when it gave any."""
    for key in _HINT_KEYS:
        text = (artifacts.get(key) or "").strip()
        if text and text not in message and text[-300:] not in message:  # not a copy of what it says
            return f"{message}; {key}: {text[-300:]}"
    return message
