"""The team model: a team version T_v = (roles, coordination, knowledge plan), the sessions
that run its roles, spawn plans, and the reports the team tools return.

Roles are invented per diagnosis by the supervisor; nothing here lists role names.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, ClassVar, Literal

from pydantic import ConfigDict, Field, field_validator

from evoteam.evalqueue import QueueSummary

# The store's base: validators are built on first use, so `evoteam team status` does not build
# every team model at import.
from evoteam.servers.knowledge.models import BaseModel, Provenance

Isolation = Literal["worktree", "shared"]
RunnerKind = Literal["claude", "codex", "subagent"]
SessionStatus = Literal[
    "planned",      # in the spawn plan, not started yet (in-session roles wait for the Agent tool)
    "queued",       # asked to start headless; waits for a free slot or its stage
    "running",
    "finished",
    "failed",       # crashed or ended with an error
    "over_budget",  # stopped by its USD cap
    "stopped",      # stopped on request (stop_role, a new version, the budget stop)
    "interrupted",  # its driver died; resumed or restarted later
    "skipped",      # could not start here (e.g. codex is not installed)
]
# TERMINAL and slugify are read rules the CLI's quick read shares (readsql.py).
from evoteam.servers.team.readsql import TERMINAL, slugify  # noqa: E402,F401 - re-exported
ACTIVE: frozenset[str] = frozenset({"queued", "running"})

_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029\x85]")
# A Claude Code tool name, optionally with a rule in parentheses (``Bash(git diff:*)``): one line,
# no comma (agent files list tools comma-separated), no control character.
TOOL_NAME = r"^[A-Za-z][A-Za-z0-9_-]*(\([^\x00-\x1f\x7f\x85\u2028\u2029,()]{0,180}\))?$"
MODEL_NAME = r"^[A-Za-z0-9][A-Za-z0-9._:@/\[\]-]{0,99}$"


class RoleSpec(BaseModel):
    """One invented role (name: free text, e.g. "Workload Analyst")."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=80)
    mandate: str = Field(min_length=1, max_length=8_000,
                         description="what it is responsible for, and why it exists now")
    deliverables: list[str] = Field(default_factory=list, max_length=20,
                                    description="what it must leave behind")
    reads_first: list[str] = Field(default_factory=list, max_length=20,
                                   description="reads before acting (store documents, artifacts, files)")
    writes_to: list[str] = Field(default_factory=list, max_length=20,
                                 description="where it records findings")
    tools: list[Annotated[str, Field(max_length=200, pattern=TOOL_NAME)]] = Field(
        default_factory=list, max_length=60,
        description="extra Claude Code tools, e.g. WebSearch")
    mcp_servers: list[Literal["knowledge", "bench", "retrieval", "team"]] = Field(
        default_factory=lambda: ["knowledge", "bench"],
        description="evoteam servers it may use")
    model: str = Field(default="inherit", max_length=100, pattern=MODEL_NAME,
                       description="sonnet, opus, haiku, inherit or a model id")
    isolation: Isolation = Field(default="worktree",
                                 description="worktree: own git worktree and branch; shared: the project tree")
    must_not_touch: list[str] = Field(default_factory=list, max_length=20,
                                      description="paths or branches to leave alone")
    budget_usd: float | None = Field(default=None, gt=0, description="this role's USD cap when run headless")
    runner: Literal["claude", "codex"] | None = Field(default=None,
                                                      description="headless runner; default is the driver's")

    @field_validator("name")
    @classmethod
    def _name_has_letters(cls, value: str) -> str:
        value = value.strip()
        if _CONTROL.search(value):
            raise ValueError("a role name is one line of text without control characters")
        if not slugify(value):
            raise ValueError("a role name needs letters or digits (e.g. 'Profiling Scientist')")
        return value

    @property
    def slug(self) -> str:
        return slugify(self.name)


class Stage(BaseModel):
    """Its roles run in parallel."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(default="", max_length=80)
    roles: list[str] = Field(min_length=1, max_length=20, description="role names (or slugs) in this stage")


class Handoff(BaseModel):
    model_config = ConfigDict(extra="forbid")

    from_role: str
    to_role: str
    what: str = Field(min_length=1, max_length=2_000)


class Coordination(BaseModel):
    """Stage k starts when every role of stage k-1 has ended; roles in no stage start at once."""

    model_config = ConfigDict(extra="forbid")

    stages: list[Stage] = Field(default_factory=list, max_length=20)
    handoffs: list[Handoff] = Field(default_factory=list, max_length=40)
    notes: str = Field(default="", max_length=8_000)


class KnowledgePlan(BaseModel):
    """What everybody reads first and where shared findings go."""

    model_config = ConfigDict(extra="forbid")

    shared_reads: list[str] = Field(default_factory=list, max_length=20)
    shared_writes: list[str] = Field(default_factory=list, max_length=20)
    notes: str = Field(default="", max_length=8_000)


class TeamDesign(BaseModel):
    """What the supervisor submits to design_team."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    diagnosis: str = Field(min_length=1, max_length=20_000, description="why progress stalled (or, for v1, the "
                                                                          "starting assessment)")
    rationale: str = Field(min_length=1, max_length=20_000, description="how this design answers the diagnosis")
    roles: list[RoleSpec] = Field(min_length=1, max_length=12)
    coordination: Coordination = Field(default_factory=Coordination)
    knowledge_plan: KnowledgePlan = Field(default_factory=KnowledgePlan)


class TeamVersion(TeamDesign):
    """A stored team version; versions are numbered per run from 1 and never overwritten."""

    model_config = ConfigDict(extra="ignore")

    version: int
    created_by: Provenance

    def role(self, name_or_slug: str) -> RoleSpec | None:
        key = slugify(name_or_slug)
        return next((r for r in self.roles if r.slug == key), None)


class TeamVersionSummary(BaseModel):
    run_id: str
    version: int
    roles: list[str]
    diagnosis: str
    created_at: datetime


# ---------------------------------------------------------------- role sessions


class RoleSession(BaseModel):
    """One execution of one role of one version (headless, or an in-session subagent)."""

    # record_role_result's and spawn_role's answer: the report was just sent; team_status shows it.
    TEXT_OMIT: ClassVar[frozenset[str]] = frozenset({"last_message", "updated_at"})

    id: str
    run_id: str
    version: int
    role: str           # the role's name
    slug: str
    runner: RunnerKind
    status: SessionStatus
    stage: int = 0
    cap_usd: float | None = None
    cost_usd: float = 0.0
    turns: int = 0
    last_message: str = ""
    error: str | None = None
    session_id: str | None = None
    worktree: str | None = None
    branch: str | None = None
    owner: str | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    updated_at: datetime


class SessionUpdate(BaseModel):
    """A partial update of a role session; None leaves a field unchanged."""

    model_config = ConfigDict(extra="forbid")

    status: SessionStatus | None = None
    cost_usd: float | None = Field(default=None, ge=0)
    turns: int | None = Field(default=None, ge=0)
    last_message: str | None = None
    error: str | None = None
    session_id: str | None = None
    worktree: str | None = None
    branch: str | None = None
    owner: str | None = None
    cap_usd: float | None = None
    runner: RunnerKind | None = None


# ---------------------------------------------------------------- spawn plans


class AgentCall(BaseModel):
    """The input of one Agent (Task) tool call."""

    subagent_type: str
    description: str
    prompt: str
    run_in_background: bool = True


class SpawnStep(BaseModel):
    """One step of a spawn plan: start every call in it at once (parallel); wait for the step
    to end before the next step."""

    stage: int
    name: str
    roles: list[str]
    calls: list[AgentCall]


class SpawnPlan(BaseModel):
    run_id: str
    version: int
    subagent_type: str
    steps: list[SpawnStep]
    materialised: list[str] = Field(default_factory=list, description="agent files written")
    instructions: str


class DesignResult(BaseModel):
    """What design_team returns: the stored version and how to start it."""

    # The plan's run, version and agent files are already at the top level or in its prompts.
    TEXT_OMIT: ClassVar[frozenset[str]] = frozenset({"plan.run_id", "plan.version", "plan.materialised"})

    version: int
    run_id: str
    roles: list[str]
    plan: SpawnPlan
    warnings: list[str] = Field(default_factory=list)


# ---------------------------------------------------------------- reports


class RoleState(BaseModel):
    role: str
    slug: str
    status: SessionStatus
    runner: RunnerKind
    stage: int
    cost_usd: float
    cap_usd: float | None
    turns: int
    last_message: str
    error: str | None = None
    session_id: str | None = None
    branch: str | None = None


class TeamStatus(BaseModel):
    run_id: str
    run_status: str
    version: int | None
    finished: bool = Field(description="every role of the version has ended (finished, failed, over budget, ...)")
    roles: list[RoleState]
    best_score: float | None
    best_interval: list[float] | None = Field(default=None, description="the best's 95% interval (none where "
                                              "its runs are too few for one, or all alike: knowledge.get_run)")
    best_candidate_id: str | None = None
    paired_best: str | None = Field(default=None, description="a candidate the run's compares find better than "
                                    "best_candidate_id side by side: the one to beat and to crown (get_run's)")
    best_within_noise_of: str | None = Field(default=None, description="the last new best, which the best is not "
                                             "told apart from: one result (get_run's)")
    ndg: float | None
    candidates: int
    learnings: int
    spent_usd: float
    budget_usd: float | None
    left_usd: float | None
    costs_recorded: bool = Field(default=True, description="false where the run has work and no cost was "
                                 "recorded (no evoteam hooks here): spent_usd is not what was spent, left_usd is "
                                 "unknown (null), and team.budget says what ends the run instead")
    evaluations: QueueSummary | None = Field(default=None, description="this run's evaluations on this host's "
                                             "device pool or Ray queue (running, waiting, slots busy); null when "
                                             "no pool or Ray queue is active (evaluations then run in turn)")


class BudgetLine(BaseModel):
    role: str | None
    team_version: int | None
    usd: float


class BudgetReport(BaseModel):
    run_id: str
    budget_usd: float | None
    spent_usd: float
    left_usd: float | None = Field(description="null: no budget set, or costs unrecorded (costs_recorded false)")
    exhausted: bool
    costs_recorded: bool = Field(default=True, description="false: nothing records this run's costs (no hooks); "
                                                           "exhausted then counts finished team versions")
    note: str | None = None
    by_version: dict[str, float]
    by_role: dict[str, float]
    lines: list[BudgetLine]


class SupervisorWake(BaseModel):
    """One wake of the headless supervisor (kept so that a restarted driver can resume)."""

    id: str
    run_id: str
    seq: int
    trigger: str
    status: Literal["running", "done", "failed", "interrupted"]
    version_before: int | None
    version_after: int | None = None
    cost_usd: float = 0.0
    session_id: str | None = None
    error: str | None = None
    owner: str | None = None
    started_at: datetime
    ended_at: datetime | None = None


class CostRecord(BaseModel):
    """The result of pricing a transcript or an SDK result."""

    usd: float
    model: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    messages: int = 0
    priced_with: str = ""
    detail: dict[str, Any] = Field(default_factory=dict)
