"""The bench's data model.

Kernel kits follow FlashInfer-Bench's trace schema: a *Definition* names the axes (constant or
variable), the inputs and outputs (shapes written with axis names, dtypes) and a reference
implementation; a *Workload* binds every variable axis and says where each input comes from; a
*Solution* points at source files and an entry point (``file.py::function``). We read the
subset of that schema the harness needs and ignore the rest, so published definition files load
unchanged.

A kit adds a manifest (``kit.json``) with the task around it: goal, direction, tolerances,
timeouts, the dev workloads, the recipe for the held-out workloads and the baseline.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

from pydantic import ConfigDict, Field, field_validator

from evoteam.servers.bench.confinement.workerenv import check_worker_env
# The store's base: validators built on first use, so `evoteam bench list` builds the manifest's
# models only, not the evaluation's and comparison's (issue 24: a listing within 0.2 s).
from evoteam.servers.knowledge.models import BaseModel, CandidateStatus, Direction, WorkloadResult

Split = Literal["dev", "heldout", "all"]
KitKind = Literal["kernel", "program"]

# ---------------------------------------------------------------- FlashInfer-Bench subset


# What remeasure's list calls the kit's baseline; compare takes it as a candidate id, and
# evaluate as a parent (none).
BASELINE_ID = "baseline"

class AxisConst(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: Literal["const"]
    value: int
    description: str | None = None


class AxisVar(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: Literal["var"]
    description: str | None = None


class TensorSpec(BaseModel):
    """One input or output. ``shape`` lists axis names; ``None`` means a scalar."""

    model_config = ConfigDict(extra="allow")
    shape: list[str] | None
    dtype: str
    description: str | None = None
    optional: bool = False


class Definition(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str
    description: str | None = None
    op_type: str | None = None
    tags: list[str] = Field(default_factory=list)
    axes: dict[str, AxisConst | AxisVar]
    constraints: list[str] = Field(default_factory=list)
    inputs: dict[str, TensorSpec]
    outputs: dict[str, TensorSpec]
    reference: str

    def resolve_axes(self, var_values: dict[str, int]) -> dict[str, int]:
        """All axis values for a workload: constants from the definition, variables bound, and any
        extra workload parameters the kit's input generator reads (e.g. a per-request length)."""
        axes: dict[str, int] = {k: int(v) for k, v in var_values.items() if k not in self.axes}
        for name, axis in self.axes.items():
            if isinstance(axis, AxisConst):
                axes[name] = axis.value
            elif name in var_values:
                axes[name] = int(var_values[name])
        return axes

    def shape_of(self, spec: TensorSpec, axes: dict[str, int]) -> tuple[int, ...] | None:
        if spec.shape is None:
            return None
        return tuple(int(axes[a]) for a in spec.shape)


class InputSpec(BaseModel):
    """Where one input's values come from: ``random`` (the kit's generator decides),
    ``scalar`` (a literal value), or ``safetensors`` (a tensor in a file under the kit's or trace
    set's root; see fib.py)."""

    model_config = ConfigDict(extra="allow")
    type: Literal["random", "scalar", "safetensors"] = "random"
    value: Any = None
    path: str | None = None
    tensor_key: str | None = None


class Workload(BaseModel):
    model_config = ConfigDict(extra="allow")
    uuid: str
    axes: dict[str, int]
    inputs: dict[str, InputSpec] = Field(default_factory=dict)


class SolutionSource(BaseModel):
    path: str
    content: str


class SolutionSpec(BaseModel):
    model_config = ConfigDict(extra="allow")
    language: str = "python"
    target_hardware: list[str] = Field(default_factory=list)
    entry_point: str
    dependencies: list[str] = Field(default_factory=list)
    # FIB's default: the outputs are passed in after the inputs and written in place.
    destination_passing_style: bool = True
    binding: Literal["tvm-ffi", "torch"] | None = None  # C++/CUDA only; FIB defaults to tvm-ffi


class Solution(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str = "candidate"
    definition: str | None = None
    author: str | None = None
    spec: SolutionSpec
    sources: list[SolutionSource]

    @field_validator("sources")
    @classmethod
    def _safe_paths(cls, sources: list[SolutionSource]) -> list[SolutionSource]:
        for src in sources:
            parts = src.path.replace("\\", "/").split("/")
            if src.path.startswith("/") or ".." in parts or not src.path:
                raise ValueError(f"source path {src.path!r} must be relative and stay inside the solution")
        return sources


# ---------------------------------------------------------------- kit manifest


class Tolerance(BaseModel):
    model_config = ConfigDict(extra="forbid")
    atol: float = 1e-5
    rtol: float = 1e-5
    required_matched_ratio: float = Field(default=1.0, gt=0.0, le=1.0)


class Timeouts(BaseModel):
    model_config = ConfigDict(extra="forbid")
    startup_s: float = 60.0  # importing / compiling the candidate
    workload_s: float = 60.0  # one correctness or timing request
    program_s: float = 300.0  # a program kit's whole evaluation


class TimingPlan(BaseModel):
    model_config = ConfigDict(extra="forbid")
    warmup: int = Field(default=2, ge=0, le=100)
    rounds: int = Field(default=10, ge=1, le=100)  # 10 paired rounds: a 97.9% median interval
    reps_per_round: int = Field(default=3, ge=1, le=1000)


class HeldoutAxis(BaseModel):
    """How a held-out workload's variable axis is drawn: from ``choices``, or uniformly from
    ``[min, max]`` rounded to ``multiple_of``."""

    model_config = ConfigDict(extra="forbid")
    choices: list[int] | None = None
    min: int | None = None
    max: int | None = None
    multiple_of: int = 1


class HeldoutPlan(BaseModel):
    model_config = ConfigDict(extra="forbid")
    count: int = Field(default=3, ge=0, le=50)
    axes: dict[str, HeldoutAxis] = Field(default_factory=dict)


class ProgramHeldout(BaseModel):
    """A program kit's held-out split: ``evaluate`` takes the instances as a keyword argument
    (``argument``). The dev split passes ``dev``; the held-out split passes ``count`` values drawn
    from ``[low, high]`` with the bench's secret, which agents never see."""

    model_config = ConfigDict(extra="forbid")
    argument: str = Field(default="seeds", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    dev: list[int] = Field(min_length=1, max_length=1000)
    count: int = Field(default=5, ge=1, le=1000)
    low: int = 0
    high: int = 2**31 - 1


class KitManifest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,80}$")
    kind: KitKind
    goal: str
    direction: Direction = "maximize"
    x0: float | None = None
    best_known: float | None = None
    device: Literal["cpu", "cuda"] = "cpu"
    gpu_model: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.-]{1,40}$",
                                  description="the GPU model scores are for, as Ray names accelerator types "
                                  "(H100, A100, B200); on a Ray cluster evaluations go only to nodes of that type")
    framework: Literal["numpy", "torch"] = "numpy"
    requires: list[str] = Field(default_factory=list, description="modules the kit needs")
    tolerance: Tolerance = Field(default_factory=Tolerance)
    timeouts: Timeouts = Field(default_factory=Timeouts)
    timing: TimingPlan = Field(default_factory=TimingPlan)
    memory_limit_mb: int = Field(default=4096, ge=64)
    threads: int | None = Field(default=1, ge=1, description="BLAS/OpenMP threads in every worker of a CPU "
                                "kit (same for candidate and baseline); null leaves the library default")
    worker_env: dict[str, str] = Field(default_factory=dict, description="allocator and thread variables "
                                       "(MALLOC_ARENA_MAX, OMP_NUM_THREADS, ...) for every worker of the kit, "
                                       "baseline and candidate alike; they override the defaults and `threads`")
    max_plausible_speedup: float = Field(default=50.0, gt=1.0)
    timing_note: str | None = Field(default=None, description="why timings on this machine are not "
                                    "representative (e.g. a GPU reference running on the CPU)")
    # kernel kits
    definition: str | None = None  # path of a FlashInfer-Bench definition JSON
    workloads: str | None = None  # JSONL of dev workloads
    heldout: HeldoutPlan | None = None
    inputs: str | None = None  # python file with make_inputs(axes, specs, seed, device)
    baseline: list[str] = Field(default_factory=list, description="entry points, first usable wins")
    entry: str = "run"  # function a plain candidate file must define
    # program kits
    evaluator: str | None = None  # python file with evaluate(program_path) -> metrics
    objective: str | None = None  # metric that is the score
    initial_program: str | None = None
    cascade_thresholds: list[float] | None = Field(default=None, description="run evaluate_stage1/2/3 with "
                                                   "these thresholds when the evaluator defines them")
    evaluator_args: dict[str, Any] = Field(default_factory=dict, description="keyword arguments for evaluate()")
    program_heldout: ProgramHeldout | None = None
    enforce_evolve_blocks: bool = True  # refuse edits outside the initial program's EVOLVE-BLOCKs
    evaluator_reads: list[str] = Field(
        default_factory=list, max_length=20,
        description="read-only paths beside the kit its evaluator needs (e.g. '../runtime.py', a benchmark "
                    "suite's shared module); relative to the kit folder, inside the folder that holds it")
    source: Literal["kit.json", "openevolve"] = "kit.json"
    # examples shipped with the kit (for docs and tests)
    examples: dict[str, str] = Field(default_factory=dict)

    @field_validator("worker_env", mode="before")
    @classmethod
    def _tuning_only(cls, value: object) -> dict[str, str]:
        # Only allocator and thread variables: this environment reaches the trusted worker too.
        return check_worker_env(value)

    @field_validator("x0", "best_known")
    @classmethod
    def _finite(cls, value: float | None) -> float | None:
        if value is not None and not math.isfinite(value):
            raise ValueError("must be finite")
        return value


# ---------------------------------------------------------------- tool outputs


class KitSummary(BaseModel):
    name: str
    kind: KitKind
    device: str
    direction: Direction
    goal: str = Field(description="first line of the goal")
    available: bool = Field(description="false when the kit needs hardware or modules this machine lacks")
    unavailable_reason: str | None = None


class KitList(BaseModel):
    items: list[KitSummary]
    total: int
    next_cursor: str | None = None


class WorkloadInfo(BaseModel):
    name: str
    axes: dict[str, int]


class KitDetail(BaseModel):
    name: str
    kind: KitKind
    device: str
    framework: str
    goal: str
    direction: Direction
    x0: float | None
    best_known: float | None
    available: bool
    unavailable_reason: str | None = None
    entry: str | None = Field(default=None, description="function a candidate file must define")
    signature: str | None = Field(default=None, description="how the entry point is called")
    tolerance: Tolerance | None = None
    dev_workloads: list[WorkloadInfo] = Field(default_factory=list)
    heldout_count: int = 0
    baseline: str | None = None
    starting_point: str | None = Field(default=None, description="path of the initial program or baseline to copy")
    solutions: list[str] = Field(default_factory=list, description="named FlashInfer-Bench solutions of a "
                                 "trace-set kit; pass one's name as the candidate to run it")
    timing_note: str | None = None
    inputs: str | None = Field(default=None, description="what the kit's fresh inputs are, as its input "
                               "generator says, and where to read it (held-out workloads use it too)")
    timing_method: str | None = Field(default=None, description="how candidates are timed: warm-ups, rounds, "
                                      "repetitions, fresh inputs, caches, what is inside the clock and what is "
                                      "subtracted")
    packages: str | None = Field(default=None, description="the numerical packages a candidate can import "
                                 "beside the standard library, and those of them not installed")
    worker_env: dict[str, str] = Field(default_factory=dict, description="the allocator and thread variables "
                                       "every worker of an evaluation gets, baseline and candidate alike")
    reference: str | None = Field(default=None, description="the reference implementation (detail=true)")
    definition: dict[str, Any] | None = Field(default=None, description="the definition JSON (detail=true)")


class WorkloadOutcome(WorkloadResult):
    """One workload's result. Held-out workloads are named ``heldout-N`` and their shapes are
    not shown."""

    flagged: bool = False


class HeldoutChoice(BaseModel):
    """Which held-out inputs an evaluation uses, as the bench that holds the held-out key chose
    them: sent with a job to a Ray node (or a pool slot), so every node measures the caller's
    held-out set without ever holding the key (formats/kits.heldout_choice)."""

    set_id: str = Field(description="the set's name, a one-way digest of the key (metrics.heldout_set)")
    workloads: list[Workload] = Field(default_factory=list, description="kernel kits: the held-out workloads")
    instances: list[int] = Field(default_factory=list, description="program kits: the held-out instances")


CONTENDED_HEAD = "contended machine ("  # how machine.contention_line opens: a reply that holds it says the reasons


class Evaluation(BaseModel):
    """The result of evaluating one candidate on one split of a kit."""

    # Kept for programs (the store, reports), left out of the text an agent reads: how it was
    # confined and timed, and figures the top level or the workloads already give.
    TEXT_OMIT: ClassVar[frozenset[str]] = frozenset({
        "sandbox", "wall_s", "metrics.kit_source", "metrics.kit_hash", "metrics.timing_method", "metrics.environment",
        "metrics.harness_overhead_s", "metrics.wall_s", "metrics.baseline", "metrics.device",
        "metrics.geomean_speedup", "metrics.workloads_passed", "metrics.workloads", "metrics.min_speedup",
        "metrics.max_speedup",
        # The call path per workload and the timed CPUs (~400 characters): a workload's note says
        # when its rounds were not resolved, the message when the machine was contended.
        "metrics.timing", "metrics.pinned_cpus"})

    # A PENDING answer has no result yet: its zero counts and false flags would read as one (a
    # model took `recorded: false` for "this will not be recorded").
    PENDING_OMIT: ClassVar[frozenset[str]] = frozenset({
        "kind", "direction", "passed", "total", "flagged", "recorded", "contended", "wall_s"})

    @classmethod
    def text_omit_for(cls, structured: dict[str, Any]) -> frozenset[str]:
        if structured.get("status") == "PENDING":
            return cls.PENDING_OMIT
        # Every workload failing alike says the message the top one already holds: a candidate that
        # raised read its traceback four times, 4,082 characters (mp54).
        message, omit = str(structured.get("message") or ""), set()
        said = {w.get("message") for w in structured.get("workloads") or [] if isinstance(w, dict)}
        if len(said) == 1 and (only := said.pop()) and f": {only}" in message:
            omit.add("workloads.message")
        if CONTENDED_HEAD in message:  # the message's contention line names the reasons (mp78 read them twice)
            omit.add("metrics.contention.reasons")
        return frozenset(omit)

    kit: str
    kind: KitKind
    split: Split
    status: CandidateStatus
    # The candidate's pooled figures come before this evaluation's own: a model read the top-level
    # `score` of a re-measured candidate as the candidate's (model-play 2026-12-04).
    candidate_id: str | None = None
    candidate_score: float | None = Field(default=None, description="the recorded candidate's score from every "
                                          "measurement of its code in the run (this one pooled with earlier ones)")
    candidate_interval: list[float] | None = Field(default=None, description="95% interval of candidate_score "
                                                   "(none from under 5 runs of a program: its spread is unknown)")
    n_measurements: int | None = Field(default=None, description="evaluations of this code pooled in the candidate")
    standing: str | None = Field(default=None, description="the recorded candidate against the run's best (dev): a new "
                                 "best beyond noise, within noise of it, or worse than it (knowledge.trajectory's rule)")
    score: float | None = Field(description="this evaluation's (the candidate's is candidate_score): kernel: "
                                "geomean speedup over the baseline; program: the objective (the median of repeats)")
    score_interval: list[float] | None = Field(default=None, description="95% interval of this evaluation's score "
                                               "[lo, hi] (kernel: bootstrap over the workloads' rounds; program: "
                                               "order-statistic interval of the repeats' median; none from "
                                               "under 5 runs alike or under 5 at all: its spread is unknown)")
    direction: Direction
    passed: int
    total: int
    workloads: list[WorkloadOutcome]
    metrics: dict[str, Any] = Field(default_factory=dict)
    flagged: bool = False
    flags: list[str] = Field(default_factory=list)
    message: str | None = None
    ndg: float | None = None
    best_known: float | None = None
    run_id: str | None = None
    recorded: bool = False
    unverified: bool | None = Field(default=None, description="true where it was recorded as an unverified claim "
                                    "(the token is not a verifier's): listed, never ranked")
    code_hash: str | None = Field(default=None, description="normalised hash of the code: identical code is one "
                                  "candidate")
    contended: bool = Field(default=False, description="the machine was busier than the timing tolerates (see "
                            "metrics.contention): a new best only by paired rounds; compare it side by side")
    wall_s: float = 0.0
    sandbox: str = ""
    artifacts: dict[str, str] = Field(default_factory=dict, description="program kits: the evaluator's "
                                      "artifacts (stderr, feedback), kept with the recorded candidate")
    stages: list[dict[str, Any]] = Field(default_factory=list, description="program kits: each cascade stage")
    # Only on a PENDING answer of evaluate(wait=false) or evaluation_result (scheduling/tickets.py).
    ticket: str | None = Field(default=None, description="evaluation_result(ticket) answers the result")
    queue_position: int | None = Field(default=None, description="evaluations that start before it (0: next "
                                       "or running)")
    progress: float | None = Field(default=None, description="the running evaluation's progress, 0-1")
    samples: dict[str, list[float]] = Field(default_factory=dict, exclude=True, description="per-workload "
                                            "per-round speedups (or the program's repeated scores), recorded with "
                                            "the candidate; not shown")
    sample_ranges: dict[str, tuple[list[float], list[float]]] = Field(
        default_factory=dict, exclude=True, description="per workload where a time was below the resolution: each "
        "round's smallest and largest possible speedup (timing.Rounds.bounds), recorded with the samples; not shown")


class ComparedSide(BaseModel):
    """One side of a comparison, in brief."""

    candidate_id: str | None = Field(default=None, description="the recorded candidate (or \"baseline\") this "
                                     "side was given as; none for code or a file")
    note: str | None = Field(default=None, description="the start of that candidate's recorded note")
    status: CandidateStatus
    score: float | None
    score_interval: list[float] | None = None
    message: str | None = Field(default=None, description="the evaluation's message, shortened")


class WorkloadComparison(BaseModel):
    workload: str
    a_status: CandidateStatus
    b_status: CandidateStatus
    a_ms: float | None = Field(description="A's own median time per call over the rounds (ms); the median of "
                               "the rounds' ratios below need not equal a_ms / b_ms: a round that was slow for "
                               "both sides slows both alike, and the ratio pairs them")
    b_ms: float | None = Field(description="B's own median time per call (ms)")
    b_speedup_over_a: float | None = Field(default=None, description="median over rounds of A's time over B's, "
                                           "each round on the same inputs: above 1, B is faster")
    interval: list[float] | None = Field(default=None, description="95% interval of b_speedup_over_a")
    significant: bool = Field(default=False, description="true only when the interval excludes 1")
    note: str | None = Field(default=None, description="set where a_ms / b_ms reads otherwise than "
                             "b_speedup_over_a: which to read")


class PooledComparison(BaseModel):
    """Every kept paired batch of the same two candidates (this one included), pooled."""

    b_speedup_over_a: float = Field(description="as the batch's: a ratio (kernel kits) or B's score minus A's")
    interval: list[float]
    significant: bool = Field(description="false too where the pool is too small for a 95% interval (its verdict "
                              "clause says 'not established')")
    batches: int = Field(description="compares of the two by id and re-measurements with both, this one included")


class Comparison(BaseModel):
    """A and B measured in one interleaved batch with the baseline (kernel kits), or their
    evaluators run alternately (program kits)."""

    kit: str
    split: Split
    # The verdict and the pooled one first: a model read this batch's significant: false as the
    # answer where the pooled rounds, what the run reads, were significant (mp67).
    verdict: str = Field(description="which is better, 'no significant difference', or 'no faster kernel shown' "
                         "(B ahead only by what writing into outputs it is given saves); where the two were compared "
                         "before, it opens with every batch pooled (what the run reads), then this batch alone")
    pooled: PooledComparison | None = Field(default=None, description="where the two were compared before (by "
                                            "id, in the run): every such batch pooled, what the trajectory and "
                                            "version gains read")
    a: ComparedSide
    b: ComparedSide
    b_speedup_over_a: float | None = Field(default=None, description="kernel kits: B's speedup over A (geometric "
                                           "mean over workloads of the per-round paired ratios); program kits: "
                                           "B's score minus A's")
    interval: list[float] | None = Field(default=None, description="95% interval of b_speedup_over_a")
    significant: bool = Field(default=False, description="this batch's: true only when the interval excludes no "
                              "difference (1 for a ratio, 0 for a difference); where pooled is given, it decides")
    rounds: int | None = None
    workloads: list[WorkloadComparison]
    contended: bool = Field(default=False, description="the machine was busier than the timing tolerates: "
                            "intervals are wider (said here once, not in each side's message)")
    heldout_set: str | None = Field(default=None, description="split heldout: the held-out set both were timed on "
                                    "(an evaluation's metrics.heldout_set); held-out compares are not kept in a run")
