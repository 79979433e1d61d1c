"""The knowledge store's schema: one pydantic model per thing, used by the store, the MCP
tools, the remote client and the CLI alike."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any, ClassVar, Generic, Literal, TypeVar

from pydantic import BaseModel as PydanticModel
from pydantic import ConfigDict, Field, field_validator, model_validator
from pydantic.json_schema import SkipJsonSchema


class BaseModel(PydanticModel):
    # Validators are built on first use, not at import: a hook or a CLI command that touches a
    # few of these models does not pay for all of them.
    model_config = ConfigDict(defer_build=True)


Direction = Literal["maximize", "minimize"]
RunStatus = Literal["active", "paused", "finished", "failed", "budget_spent"]
LearningKind = Literal["observation", "technique", "dead_end", "bug", "hypothesis", "workload", "process",
                       "checkpoint"]
CandidateStatus = Literal["PASSED", "INCORRECT_SHAPE", "INCORRECT_DTYPE", "INCORRECT_NUMERICAL", "RUNTIME_ERROR",
                          "COMPILE_ERROR", "TIMEOUT", "PENDING"]
SearchKind = Literal["learning", "history", "artifact", "candidate"]

T = TypeVar("T")


class Provenance(BaseModel):
    """Who wrote a row, from where. `user` always comes from the caller's identity (the
    bearer token, or the local account), never from a tool argument."""

    user: str
    client: str | None = None
    role: str | None = None
    team_version: int | None = None
    created_at: datetime


class Page(BaseModel, Generic[T]):
    """One page of a listing. Pass `next_cursor` back as `cursor` for the next page."""

    items: list[T]
    total: int
    next_cursor: str | None = None


# ---------------------------------------------------------------- runs


class RunCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    goal: str = Field(min_length=1, max_length=20_000)
    kit: str | None = Field(default=None, max_length=500)
    direction: Direction = "maximize"
    x0: float | None = None
    best_known: float | None = None
    budget_usd: float | None = Field(default=None, ge=0)
    project: str | None = Field(default=None, max_length=100)
    run_id: str | None = Field(default=None, pattern=r"^run_[A-Za-z0-9_-]{1,60}$")
    # The earlier run (same project) this one continues from: its work is the new run's first read.
    seeded_from: str | None = Field(default=None, max_length=100)

    @field_validator("x0", "best_known")
    @classmethod
    def _finite(cls, value: float | None) -> float | None:
        if value is not None and not math.isfinite(value):
            raise ValueError("must be a finite number")
        return value


class Lead(BaseModel):
    """A candidate whose score, from too few runs for a 95% interval, reads beyond a run's best."""

    candidate_id: str
    score: float | None = None  # None only as read from an older store or bundle (a bare id)
    runs: int | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_bare_id(cls, value: Any) -> Any:  # a bundle or server from before leads had scores
        return {"candidate_id": value} if isinstance(value, str) else value


class Run(BaseModel):
    id: str
    project: str
    goal: str
    kit: str | None
    direction: Direction
    x0: float | None
    best_known: float | None
    budget_usd: float | None
    status: RunStatus
    spent_usd: float = 0.0
    best_score: float | None = None
    best_interval: list[float] | None = Field(default=None, description="95% interval of the best score")
    best_runs: int | None = Field(default=None, description="where that interval has no width, or is from too "
                                  "few runs for a 95% interval, the runs behind it: under 5, its spread is unknown")
    best_exact: bool | None = Field(default=None, description="true where every one of those runs is alike: the "
                                    "best is exact (absent otherwise)")
    best_candidate_id: str | None = None
    paired_best: str | None = Field(default=None, description="a candidate the kept paired rounds (bench.compare, "
                                    "bench.remeasure) find better than best_candidate_id side by side: crown it")
    best_within_noise_of: str | None = Field(default=None, description="the last new best, which best_candidate_id "
                                             "(first by the pessimistic end of its interval) is not told apart from: "
                                             "the two are one result, whichever score reads higher")
    leads_from_too_few_runs: list[Lead] = Field(default_factory=list, description="candidates from too few runs "
                                               "for a 95% interval whose score reads beyond that best: they rank "
                                               "after it until measured 5 times (bench.remeasure with "
                                               "candidate_ids)")
    ndg: float | None = Field(default=None, description="normalised discovery gain, 100 (best - x0) / (best_known "
                              "- x0): set where the run has x0, best_known and a best")
    candidates: int = Field(default=0, description="candidates recorded in the run, held-out checks included")
    learnings: int = 0
    current_version: int | None = None
    seeded_from: str | None = None
    status_reason: str | None = None  # why the run was finished, paused or failed (finish_run)
    provenance: Provenance


# ---------------------------------------------------------------- learnings


class LearningCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: str
    text: str = Field(min_length=1, max_length=8_000)
    kind: LearningKind = "observation"
    tags: list[str] = Field(default_factory=list, max_length=20)
    evidence: list[str] = Field(
        default_factory=list, max_length=20,
        description="ids of candidates (cand_...) or artifacts (art_...) that back this learning",
    )
    confidence: float = Field(default=0.5, ge=0.0, le=1.0)
    supersedes: str | None = None
    idempotency_key: str | None = Field(default=None, max_length=200)

    @field_validator("evidence")
    @classmethod
    def _once_each(cls, value: list[str]) -> list[str]:
        return list(dict.fromkeys(value))  # an id cited twice is one piece of evidence


class Learning(BaseModel):
    # add_learning's answer: the caller just wrote the text; the id and provenance are the news.
    TEXT_OMIT: ClassVar[frozenset[str]] = frozenset({"text"})

    id: str
    run_id: str
    text: str
    kind: LearningKind
    tags: list[str]
    evidence: list[str]
    confidence: float
    supersedes: str | None
    superseded_by: str | None = None
    provenance: Provenance


class LearningsDocument(BaseModel):
    """The run's learnings rendered as Markdown, bounded in size."""

    run_id: str
    markdown: str
    shown: int
    total: int
    truncated: bool


# ---------------------------------------------------------------- history


class HistoryEntryCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: str
    team_version: int | None = Field(default=None, ge=0)
    observed_behaviour: str = Field(default="", max_length=20_000)
    diagnosis: str = Field(default="", max_length=20_000)
    design_change: str = Field(default="", max_length=20_000)
    outcome: str = Field(default="", max_length=20_000)
    idempotency_key: str | None = Field(default=None, max_length=200)


class HistoryEntry(BaseModel):
    # reflect's and add_history's answer: the caller just wrote these fields.
    TEXT_OMIT: ClassVar[frozenset[str]] = frozenset({"observed_behaviour", "diagnosis", "design_change", "outcome"})

    id: str
    run_id: str
    team_version: int | None
    observed_behaviour: str
    diagnosis: str
    design_change: str
    outcome: str
    provenance: Provenance


class HistoryDocument(BaseModel):
    """The evolution history rendered as Markdown: the newest entries that fit, in time order."""

    run_id: str
    markdown: str
    entries: int
    shown: int | None = None
    truncated: bool = False


# ---------------------------------------------------------------- artifacts


class ArtifactCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: str
    name: str = Field(min_length=1, max_length=200)
    kind: str = Field(default="file", min_length=1, max_length=50)
    text: str | None = None
    content_base64: str | None = None
    idempotency_key: str | None = Field(default=None, max_length=200)


class ArtifactInfo(BaseModel):
    id: str
    run_id: str
    name: str
    kind: str
    sha256: str
    size: int
    is_text: bool
    provenance: Provenance


class Artifact(ArtifactInfo):
    text: str | None = None
    content_base64: str | None = None


# ---------------------------------------------------------------- candidates


class WorkloadResult(BaseModel):
    workload: str
    status: CandidateStatus
    speedup: float | None = None
    candidate_ms: float | None = None
    baseline_ms: float | None = None
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    message: str | None = None
    speedup_interval: list[float] | None = None  # 95% interval from this workload's rounds (docs/bench.md)
    rounds: int | None = None  # paired baseline/candidate rounds behind the speedup
    # Set by the store as measurements pool: which one (1 = the first) candidate_ms and baseline_ms
    # are from, the speedup pooling them all (mp51 read the newest's times as pooled). Not an input:
    # out of the tools' schemas, whose budget it would pass.
    ms_from_measurement: SkipJsonSchema[int | None] = None


# Per-round measurements a score is estimated from: workload -> one value per round (kernel kits:
# paired speedups), or "program" -> one score per evaluation (program kits). evoteam/stats.py.
MeasurementSamples = dict[str, list[float]]
# Per workload where some round's time was below the bench's resolution: each round's smallest and
# largest possible ratio, parallel to its samples (stats.censored_score_estimate).
SampleRanges = dict[str, tuple[list[float], list[float]]]


class CandidateCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: str
    code: str | None = Field(default=None, max_length=2_000_000)
    artifact_id: str | None = None
    status: CandidateStatus = "PENDING"
    score: float | None = None
    split: Literal["dev", "heldout", "all"] = "dev"
    metrics: dict[str, Any] = Field(default_factory=dict)
    workloads: list[WorkloadResult] = Field(default_factory=list)
    parent_id: str | None = None
    documents_used: list[str] = Field(default_factory=list, max_length=50)
    notes: str = Field(default="", max_length=20_000)
    flagged: bool = False
    # Measured by the bench (only a verifier actor may set it); see knowledge/verified.py.
    verified: bool = False
    cost_usd: float | None = Field(default=None, ge=0)
    idempotency_key: str | None = Field(default=None, max_length=200)
    # Identical code is one candidate: a measured candidate with the code hash of one already in
    # the run (same split) adds its rounds to that one instead of becoming a new candidate.
    code_hash: str | None = Field(default=None, max_length=80)
    samples: MeasurementSamples | None = Field(default=None, description="per-round measurements behind "
                                               "the score (bench only)")
    sample_ranges: SampleRanges | None = Field(default=None, description="per workload, each round's smallest and "
                                               "largest possible ratio where a time was below the resolution "
                                               "(bench only); the interval covers them")

    @model_validator(mode="after")
    def _ranges_fit_samples(self) -> CandidateCreate:
        for name, (lows, highs) in (self.sample_ranges or {}).items():
            rounds = (self.samples or {}).get(name)
            if rounds is None or not len(lows) == len(highs) == len(rounds):
                raise ValueError(f"sample_ranges[{name!r}] must give a low and a high for each of its samples")
            if any(not (0 < lo <= v <= hi and math.isfinite(hi)) for lo, v, hi in zip(lows, rounds, highs)):
                raise ValueError(f"sample_ranges[{name!r}]: each round's range must be positive and hold its sample")
        return self

    @field_validator("samples")
    @classmethod
    def _finite_samples(cls, value: MeasurementSamples | None) -> MeasurementSamples | None:
        if value is None:
            return value
        if len(value) > 200 or any(len(v) > 2000 for v in value.values()):
            raise ValueError("too many samples")
        for vs in value.values():
            if any(not math.isfinite(v) or v <= -1e300 for v in vs):
                raise ValueError("samples must be finite")
        # A kernel kit's rounds are speedup ratios (evoteam/stats.py): a zero or a negative one is
        # a broken measurement, which would leave the candidate without an interval.
        if set(value) != {"program"} and any(v <= 0 for vs in value.values() for v in vs):
            raise ValueError("a kernel kit's samples are speedup ratios and must be positive")
        return value

    @field_validator("score")
    @classmethod
    def _no_nan(cls, value: float | None) -> float | None:
        # NaN/inf never score: the harness reports them as failures instead.
        if value is not None and not math.isfinite(value):
            raise ValueError("score must be finite (NaN/inf never score)")
        return value


class CandidateSummary(BaseModel):
    id: str
    run_id: str
    status: CandidateStatus
    score: float | None
    split: str
    parent_id: str | None
    flagged: bool
    verified: bool = False  # measured by the bench; only verified, unflagged candidates rank
    provenance: Provenance
    score_interval: list[float] | None = Field(default=None, description="95% interval of the score from "
                                               "all of this candidate's measurements (with runs: only their range)")
    n_measurements: int = Field(default=1, description="evaluations of this code pooled into the score")
    contended_measurements: int | None = Field(default=None, description="of those, evaluations on a busy "
                                               "machine (contended)")
    code_hash: str | None = Field(default=None, description="normalised hash of the code: identical code is "
                                  "one candidate")
    note: str | None = Field(default=None, description="first line of the candidate's notes")
    runs: int | None = Field(default=None, description="set only where the score is from too few runs for a 95% "
                             "interval (a program's 1 to 4): how many. score_interval is then just their range, "
                             "and it ranks after every candidate with a 95% interval until it has run 5 times "
                             "(bench.remeasure, or evaluate with repeats 5)")
    # Kept out of the text a model reads (CandidateSummary.TEXT_OMIT): it equals the shown interval's
    # pessimistic end unless some round was unresolved (knowledge/measurements.py, shown_and_ranked).
    rank_score: float | None = Field(default=None, description="what every ranking compares: the pessimistic "
                                     "end of the rounds' own interval")

    TEXT_OMIT: ClassVar[frozenset[str]] = frozenset({"rank_score"})


class Candidate(CandidateSummary):
    code: str | None
    artifact_id: str | None
    metrics: dict[str, Any]
    workloads: list[WorkloadResult]
    documents_used: list[str]
    notes: str
    cost_usd: float | None
    samples: MeasurementSamples | None = Field(default=None, description="the pooled per-round measurements "
                                               "(detail=true)")
    sample_ranges: SampleRanges | None = Field(default=None, description="where a round's time was below the "
                                               "resolution: its possible ratios (detail=true)")

    # Recorded for programs and detail=true; the summary an agent reads leaves them out (the bench's
    # evaluate text leaves out the same): the machine, the kit's path and hash, and figures the
    # score and the workloads already give.
    SUMMARY_DROPS_METRICS: ClassVar[frozenset[str]] = frozenset({
        "environment", "kit_source", "kit_hash", "timing_method", "harness_overhead_s", "wall_s", "baseline", "device",
        "geomean_speedup", "workloads_passed", "workloads", "min_speedup", "max_speedup",
        # The call path per workload and the timed CPUs; and this measurement's own interval, which
        # read beside the candidate's pooled `score_interval` as a second, different interval.
        "timing", "pinned_cpus", "score_interval"})

    def summary(self, include_code: bool = False) -> Candidate:
        """The candidate as get_candidate shows it without detail: no samples, fewer metrics, and
        its code only when asked for."""
        metrics = {k: v for k, v in self.metrics.items() if k not in self.SUMMARY_DROPS_METRICS}
        if isinstance(metrics.get("contention"), dict):  # the verdict; detail=true gives the readings
            contended = metrics["contention"].get("contended")
            if self.n_measurements > 1:  # pooled: whether any was busy (the first's read false beside 1 busy)
                contended = bool(self.contended_measurements)
            metrics["contention"] = {"contended": contended}
        update: dict[str, Any] = {"samples": None, "sample_ranges": None, "metrics": metrics}
        if self.n_measurements > 1:
            # The messages are the first measurement's ("18.3× (16.3–22.9)"), read beside the
            # pooled score and interval as if they were its: detail=true keeps them.
            metrics.pop("message", None)
            update["workloads"] = [w.model_copy(update={"message": None}) for w in self.workloads]
        if self.note and self.notes.strip() == self.note:  # a one-line note would be shown twice
            update["note"] = None
        if not include_code:
            update["code"] = None
        return self.model_copy(update=update)


# ---------------------------------------------------------------- search


class SearchHit(BaseModel):
    kind: SearchKind
    id: str
    run_id: str
    title: str
    snippet: str
    rank: float
    owner: str | None = None  # who wrote it (the user of its provenance)


class SearchPage(Page[SearchHit]):
    """A page of search hits. Counting stops at a bound: `total_capped` says `total` is a lower
    bound (at least that many entries match)."""

    total_capped: bool = False


# ---------------------------------------------------------------- costs


class CostCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: str
    usd: float = Field(ge=0)
    source: str = Field(min_length=1, max_length=100, description="e.g. sdk_result, transcript, predictor")
    detail: dict[str, Any] = Field(default_factory=dict)
    idempotency_key: str | None = Field(default=None, max_length=200)


class CostEntry(BaseModel):
    id: str
    run_id: str
    usd: float
    source: str
    detail: dict[str, Any]
    provenance: Provenance


class SpendLine(BaseModel):
    role: str | None
    team_version: int | None
    usd: float


class Spend(BaseModel):
    run_id: str
    budget_usd: float | None
    spent_usd: float
    left_usd: float | None
    lines: list[SpendLine]


# ---------------------------------------------------------------- whole-run bundles


class RunBundle(BaseModel):
    """Everything a run holds, as exported to and imported from a file tree."""

    run: Run
    learnings: list[Learning]
    history: list[HistoryEntry]
    artifacts: list[Artifact]
    candidates: list[Candidate]
    costs: list[CostEntry] = Field(default_factory=list)
