"""Every field of a worker's reply, checked with bounded types before the harness uses it.

A candidate controls its worker process, so it can make the worker answer anything: a list
where a dtype belongs, a dict as a status, a shape whose product overflows, JSON nested ten
thousand deep. None of that may crash the harness or read as "the kit is broken": each check
here raises ``BadReply`` (one line, naming the field), which the harness turns into the
candidate's flagged failure. Replies from the trusted worker go through the same checks (they
cost microseconds).

Imports only pydantic and numpy's dtype names: protocol.py (both sides of the pipe) uses it too.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, ValidationError

MAX_DEPTH = 64  # nesting of lists and objects in one header
MAX_NODES = 1_000_000  # values in one header (the header itself is at most 4 MiB)
MAX_DIMS = 16
MAX_DIM = 1 << 40
MAX_ELEMENTS = 1 << 40
BLOB_DTYPES = ("float64", "float32", "float16", "int64", "int32", "int16", "int8", "uint8", "bool")


class BadReply(ValueError):
    """A reply that does not have the shape the protocol promises; ``str()`` says which field."""


def _first(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "reply"
    return f"{where}: {err['msg']}"[:200]


def check_shape_of_tree(value: Any) -> None:
    """Bounded nesting and size, checked without recursion (a deep reply cannot exhaust the stack)."""
    stack = [(value, 1)]
    nodes = 0
    while stack:
        item, depth = stack.pop()
        nodes += 1
        if depth > MAX_DEPTH:
            raise BadReply(f"the reply is nested more than {MAX_DEPTH} levels deep")
        if nodes > MAX_NODES:
            raise BadReply(f"the reply holds more than {MAX_NODES} values")
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)


Dim = Annotated[StrictInt, Field(ge=0, le=MAX_DIM)]


class Blob(BaseModel):
    model_config = ConfigDict(extra="forbid")
    key: StrictStr = Field(max_length=200)
    dtype: Literal[BLOB_DTYPES]  # type: ignore[valid-type]
    shape: list[Dim] = Field(max_length=MAX_DIMS)

    def elements(self) -> int:
        count = math.prod(self.shape)
        if count > MAX_ELEMENTS:
            raise BadReply(f"blob {self.key!r} has {count} elements")
        return count


def blobs(value: Any) -> list[Blob]:
    """The header's blob descriptors (absent means none)."""
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > 10_000:
        raise BadReply("blobs is not a list of descriptors")
    try:
        out = [Blob.model_validate(b) for b in value]
    except ValidationError as exc:
        raise BadReply(f"bad blob descriptor: {_first(exc)}") from None
    for b in out:
        b.elements()
    return out


class Common(BaseModel):
    """The fields every reply may carry."""

    model_config = ConfigDict(extra="allow")
    ok: StrictBool
    status: StrictStr | None = Field(default=None, max_length=40)
    message: StrictStr | None = Field(default=None, max_length=1_000_000)
    flagged: StrictBool | None = None
    violations: list[Annotated[StrictStr, Field(max_length=100_000)]] | None = Field(default=None, max_length=1000)
    sandbox: StrictStr | None = Field(default=None, max_length=10_000)


def common(header: dict) -> Common:
    check_shape_of_tree(header)
    try:
        return Common.model_validate(header)
    except ValidationError as exc:
        raise BadReply(_first(exc)) from None


class Output(BaseModel):
    """One output a candidate call reports: where it lies in the stopped worker's memory."""

    model_config = ConfigDict(extra="ignore")
    dtype: StrictStr = Field(max_length=40)
    shape: list[Dim] = Field(max_length=MAX_DIMS)
    nbytes: StrictInt | None = Field(default=None, ge=0, le=1 << 62)  # checked against the shape by the harness
    addr: StrictInt | None = Field(default=None, ge=0, le=(1 << 64) - 1)
    value: StrictInt | float | None = None


def outputs(value: Any, count: int) -> list[Output]:
    if not isinstance(value, list) or len(value) != count:
        got = len(value) if isinstance(value, list) else type(value).__name__
        raise BadReply(f"expected {count} output descriptions, got {got}")
    try:
        return [Output.model_validate(o) for o in value]
    except ValidationError as exc:
        raise BadReply(f"bad output description: {_first(exc)}") from None


class Failure(BaseModel):
    model_config = ConfigDict(extra="forbid")
    status: Literal["INCORRECT_SHAPE", "INCORRECT_DTYPE", "INCORRECT_NUMERICAL", "RUNTIME_ERROR", "COMPILE_ERROR",
                    "TIMEOUT"]
    message: StrictStr = Field(max_length=100_000)


class Evaluation(BaseModel):
    """What a kit evaluator's worker reports (cascade.run_evaluation)."""

    model_config = ConfigDict(extra="ignore")
    metrics: dict[Annotated[str, Field(max_length=200)], Any] = Field(default_factory=dict, max_length=1000)
    artifacts: dict[Annotated[str, Field(max_length=200)], Annotated[str, Field(max_length=1_000_000)]] = Field(
        default_factory=dict, max_length=1000)
    stages: list[dict[Annotated[str, Field(max_length=200)], Any]] = Field(default_factory=list, max_length=100)
    failure: Failure | None = None


def evaluation(value: Any) -> dict[str, Any]:
    try:
        return Evaluation.model_validate(value).model_dump()
    except ValidationError as exc:
        raise BadReply(f"bad evaluation: {_first(exc)}") from None


def metrics(value: Any) -> dict[str, Any]:
    return evaluation({"metrics": value})["metrics"]


class RunProgramRequest(BaseModel):
    """A kit evaluator's ``run_program`` call, as it reaches the harness (sandbox.py)."""

    model_config = ConfigDict(extra="ignore")
    function: StrictStr = Field(default="run", pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,199}$")
    kwargs: dict[Annotated[str, Field(max_length=200)], Any] = Field(default_factory=dict, max_length=1000)
    timeout_s: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    memory_mb: StrictInt | None = Field(default=None, ge=1, le=1 << 30)


def run_program_request(value: Any) -> RunProgramRequest:
    if not isinstance(value, dict):
        raise BadReply("a run_program call is not an object")
    check_shape_of_tree(value)
    try:
        return RunProgramRequest.model_validate({k: v for k, v in value.items() if v is not None})
    except ValidationError as exc:
        raise BadReply(f"a malformed run_program call: {_first(exc)}") from None
