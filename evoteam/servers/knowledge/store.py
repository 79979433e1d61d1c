"""The knowledge store's interface, shared by the embedded store and the shared-server client.

Every other part of evoteam (the bench, team and retrieval servers, the CLI, hooks) talks to
a `KnowledgeStore` and never needs to know whether it is a local SQLite file or a knowledge
server on another host.
"""

from __future__ import annotations

import abc
import getpass
from typing import Literal

from pydantic import BaseModel

from evoteam.servers.knowledge.models import (
    Artifact,
    ArtifactCreate,
    ArtifactInfo,
    Candidate,
    CandidateCreate,
    CandidateSummary,
    CostCreate,
    CostEntry,
    HistoryDocument,
    HistoryEntry,
    HistoryEntryCreate,
    Learning,
    LearningCreate,
    LearningKind,
    LearningsDocument,
    Page,
    Run,
    RunCreate,
    RunStatus,
    SearchHit,
    SearchPage,
    SearchKind,
    Spend,
)
from evoteam.servers.knowledge.trajectory import Trajectory
from evoteam.servers.knowledge.scope import Ref, ServerChosen, scoped

RUN = Ref("run_id", "runs")  # the run a method works on
SPEC_RUN = Ref("spec.run_id", "runs")  # the run a write goes to


class Actor(BaseModel):
    """Who is calling. `user` and `project` come from the bearer token (or the local
    account); `role` and `team_version` describe which part of a team is writing."""

    user: str
    client: str | None = None
    project: str | None = None  # a token's project scope; None = may see every project
    default_project: str = "default"
    role: str | None = None
    team_version: int | None = None
    # May record bench-verified scores: the in-process bench, or a `--verifier` token.
    verifier: bool = False

    @classmethod
    def local(cls, client: str = "cli", **extra) -> Actor:
        try:
            user = getpass.getuser()
        except Exception:  # no passwd entry in some containers
            user = "local"
        return cls(user=user, client=client, **extra)


class KnowledgeStore(abc.ABC):
    """What every store offers. Lists page with `limit` + `cursor` and say `total`."""

    actor: Actor

    @abc.abstractmethod
    def with_actor(self, actor: Actor) -> KnowledgeStore:
        """The same store, writing as another actor (cheap; shares the connection)."""

    async def close(self) -> None:  # pragma: no cover - default is nothing to close
        return None

    # runs
    @abc.abstractmethod
    @scoped(ServerChosen("spec.run_id"), Ref("spec.seeded_from", "runs"))
    async def start_run(self, spec: RunCreate) -> Run: ...

    @abc.abstractmethod
    @scoped(RUN)
    async def get_run(self, run_id: str) -> Run: ...

    @abc.abstractmethod
    @scoped()
    async def list_runs(self, status: RunStatus | None = None, limit: int = 20,
                        cursor: str | None = None) -> Page[Run]: ...

    @abc.abstractmethod
    @scoped(RUN)
    async def update_run(self, run_id: str, status: RunStatus | None = None,
                         current_version: int | None = None, reason: str | None = None) -> Run: ...

    # learnings
    @abc.abstractmethod
    @scoped(SPEC_RUN, Ref("spec.supersedes", "learnings"), Ref("spec.evidence[]", "candidates", "artifacts"))
    async def add_learning(self, spec: LearningCreate) -> Learning: ...

    @abc.abstractmethod
    @scoped(RUN)
    async def list_learnings(self, run_id: str, kind: LearningKind | None = None,
                             include_superseded: bool = False, limit: int = 50,
                             cursor: str | None = None) -> Page[Learning]: ...

    @abc.abstractmethod
    @scoped(RUN)
    async def render_learnings(self, run_id: str, max_chars: int | None = None) -> LearningsDocument: ...

    # history
    @abc.abstractmethod
    @scoped(SPEC_RUN)
    async def add_history(self, spec: HistoryEntryCreate) -> HistoryEntry: ...

    @abc.abstractmethod
    @scoped(RUN)
    async def list_history(self, run_id: str, limit: int = 50,
                           cursor: str | None = None) -> Page[HistoryEntry]: ...

    @abc.abstractmethod
    @scoped(RUN)
    async def render_history(self, run_id: str, max_chars: int | None = None) -> HistoryDocument: ...

    # artifacts
    @abc.abstractmethod
    @scoped(SPEC_RUN)
    async def put_artifact(self, spec: ArtifactCreate) -> ArtifactInfo: ...

    @abc.abstractmethod
    @scoped(Ref("artifact_id", "artifacts"))
    async def get_artifact(self, artifact_id: str) -> Artifact: ...

    @abc.abstractmethod
    @scoped(RUN)
    async def list_artifacts(self, run_id: str, kind: str | None = None, limit: int = 50,
                             cursor: str | None = None) -> Page[ArtifactInfo]: ...

    # candidates
    @abc.abstractmethod
    @scoped(SPEC_RUN, Ref("spec.parent_id", "candidates"), Ref("spec.artifact_id", "artifacts"))
    async def record_candidate(self, spec: CandidateCreate) -> Candidate: ...

    @abc.abstractmethod
    @scoped(Ref("candidate_id", "candidates"))
    async def get_candidate(self, candidate_id: str) -> Candidate: ...

    @abc.abstractmethod
    @scoped(RUN)
    async def list_candidates(self, run_id: str, limit: int = 50,
                              cursor: str | None = None) -> Page[CandidateSummary]: ...

    @abc.abstractmethod
    @scoped(RUN)
    async def best_candidates(self, run_id: str, k: int = 5,
                              split: Literal["dev", "heldout", "all"] | None = None) -> list[CandidateSummary]: ...

    @abc.abstractmethod
    @scoped(RUN)
    async def trajectory(self, run_id: str) -> Trajectory: ...

    # costs
    @abc.abstractmethod
    @scoped(SPEC_RUN)
    async def record_cost(self, spec: CostCreate) -> CostEntry: ...

    @abc.abstractmethod
    @scoped(RUN)
    async def list_costs(self, run_id: str) -> list[CostEntry]: ...

    @abc.abstractmethod
    @scoped(RUN)
    async def spend(self, run_id: str) -> Spend: ...

    # search
    @abc.abstractmethod
    @scoped(RUN)
    async def search(self, query: str, run_id: str | None = None, kinds: list[SearchKind] | None = None,
                     limit: int = 10, cursor: str | None = None) -> SearchPage: ...
