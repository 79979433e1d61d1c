"""The `knowledge` MCP server: a thin layer over a `KnowledgeStore`.

Each tool validates its arguments, calls the store as the caller's actor and returns a
pydantic model. Over HTTP the actor's user and project come from the bearer token.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Annotated, ClassVar, Literal

from mcp.server import MCPServer
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.mcpserver import Context
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from evoteam.servers.guard import EvoServer
from evoteam.config import Settings
from evoteam.servers.common import ServerStore, resource_errors, tool_errors
from evoteam.servers.knowledge.models import (
    Artifact,
    ArtifactCreate,
    ArtifactInfo,
    Candidate,
    CandidateCreate,
    CandidateStatus,
    CandidateSummary,
    Direction,
    HistoryEntry,
    HistoryEntryCreate,
    Lead,
    Learning,
    LearningCreate,
    LearningKind,
    Page,
    Run,
    RunStatus,
    SearchPage,
    SearchKind,
    WorkloadResult,
)
from evoteam.servers.knowledge.pairedbest import with_paired_best
from evoteam.servers.knowledge.prior import KitFacts, StartedRun, start_run_with_prior
from evoteam.servers.knowledge.services import guard
from evoteam.servers.knowledge.store import Actor, KnowledgeStore
from evoteam.servers.knowledge.trajectory import Trajectory

INSTRUCTIONS = """\
The evoteam knowledge store: the shared memory of an optimisation run (the team's file system K).
Start or pick a run (start_run / list_runs): start_run returns the prior work on the same kit (other
engineers' runs, best candidates, learnings, dead ends); read it, and a run's learnings document
and history, before you act;
record what you learn with evidence (add_learning), keep files you produce (put_artifact), and
record every evaluated candidate (record_candidate; bench.evaluate does it for you). Use search
to find anything across learnings, history, artifacts and candidate notes. End a run with finish_run.
A reply's text leaves out empty and null fields."""

Limit = Annotated[int, Field(ge=1, le=200)]
Cursor = Annotated[str | None, Field(description="the previous page's next_cursor")]
Role = Annotated[str | None, Field()]  # your team role, if any (provenance)
Version = Annotated[int | None, Field(ge=0)]  # your team version, if any
IdemKey = Annotated[str | None, Field(max_length=200, description="retry-safe: a repeat returns the "
                                                                   "first result")]


class LearningsView(BaseModel):
    """The learnings of a run: a rendered Markdown document, or a page of entries."""

    run_id: str
    document: str | None = None
    items: list[Learning] = Field(default_factory=list)
    total: int
    shown: int
    truncated: bool = False
    next_cursor: str | None = None


class HistoryView(BaseModel):
    run_id: str
    document: str | None = None
    items: list[HistoryEntry] = Field(default_factory=list)
    total: int
    shown: int | None = None
    truncated: bool = False
    next_cursor: str | None = None


class CandidateList(BaseModel):
    run_id: str
    items: list[CandidateSummary]
    # A listing of the best hid the run's true best, one run above them (mp28, 2026-12-04).
    leads_from_too_few_runs: list[Lead] = Field(default_factory=list, description="candidates not listed whose "
                                               "score, from too few runs for a 95% interval, reads beyond the "
                                               "best: they rank after it until measured 5 times (bench.remeasure "
                                               "with candidate_ids)")
    # A bare {"run_id": ...} for a run whose candidates all failed said nothing (mp53).
    note: str | None = None

    TEXT_OMIT: ClassVar[frozenset[str]] = frozenset({"items.rank_score"})


class ArtifactView(BaseModel):
    """An artifact's metadata, with its content when asked for."""

    artifact: ArtifactInfo | Artifact


ActorResolver = Callable[[Context], Actor]


def token_actor(default: Actor) -> ActorResolver:
    """Over HTTP: user and project from the bearer token; role and version are per call."""

    def resolve(ctx: Context) -> Actor:
        token = get_access_token()
        if token is None:
            return default
        project = (token.claims or {}).get("project")
        client = None
        with contextlib.suppress(Exception):
            params = ctx.session.client_params
            client = params.client_info.name if params and params.client_info else None
        return Actor(user=token.client_id, project=project, client=client or "http",
                     default_project=project or default.default_project,
                     verifier=bool((token.claims or {}).get("verifier")))

    return resolve


def build_server(settings: Settings, store: KnowledgeStore | None = None, *,
                 actor_resolver: ActorResolver | None = None,
                 local_kit: Callable[[str], KitFacts | None] | None = None) -> MCPServer:
    """Build the knowledge server. Without `store`, it opens the configured store for its lifetime.
    ``local_kit``: what a kit says of itself where the kits are at hand (evoteam/servers/stdio.py),
    so that start_run gives a run of a kit the kit's name and direction and refuses the other one."""
    holder = ServerStore(settings, store, "knowledge")
    server = EvoServer("knowledge", instructions=INSTRUCTIONS, lifespan=holder.lifespan, log_level="WARNING")

    def kb(ctx: Context, role: str | None = None, team_version: int | None = None) -> KnowledgeStore:
        return guard(holder.scoped(role, team_version, actor=actor_resolver(ctx) if actor_resolver else None),
                     "knowledge")

    # ------------------------------------------------------------ runs

    @server.tool()
    @tool_errors
    async def start_run(ctx: Context, goal: str | None = None, direction: Direction | None = None,
                        kit: str | None = None, x0: float | None = None, best_known: float | None = None,
                        budget_usd: float | None = None, project: str | None = None,
                        seed_from: Annotated[str | None, Field(
                            description="an earlier run (run_…) of this project to continue from: its goal, "
                                        "kit, direction, x0, best-known are the defaults")] = None) -> StartedRun:
        """Start a run (goal, kit, x0, best-known, USD budget; direction: a local kit sets it);
        pass its id to every tool. `prior_work`: the kit's earlier runs, best candidates,
        learnings, dead ends: build on it."""
        return await start_run_with_prior(kb(ctx), goal=goal, kit=kit, direction=direction, x0=x0,
                                          best_known=best_known, budget_usd=budget_usd, project=project,
                                          seed_from=seed_from, local_kit=local_kit)

    @server.tool(annotations=ToolAnnotations(destructiveHint=False, idempotentHint=True))
    @tool_errors
    async def finish_run(ctx: Context, run_id: str,
                         reason: Annotated[str, Field(min_length=1, max_length=2000,
                                                      description="why it ends: the result, or why it stops")],
                         status: Literal["finished", "paused", "failed", "active"] = "finished") -> Run:
        """End (finished), pause or fail a run, with a one-sentence reason; status=active resumes it."""
        return await kb(ctx).update_run(run_id, status=status, reason=reason)

    @server.tool()
    @tool_errors
    async def get_run(ctx: Context, run_id: str) -> Run:
        """A run's state: goal, direction, budget, spend, best, counts; NDG where best_known is set."""
        return await with_paired_best(kb(ctx), await kb(ctx).get_run(run_id))

    @server.tool()
    @tool_errors
    async def list_runs(ctx: Context, status: RunStatus | None = None, limit: Limit = 20,
                        cursor: Cursor = None) -> Page[Run]:
        """Your project's runs (every engineer's), newest first: owner, kit, status, best."""
        return await kb(ctx).list_runs(status=status, limit=limit, cursor=cursor)

    # ------------------------------------------------------------ learnings

    @server.tool()
    @tool_errors
    async def add_learning(ctx: Context, run_id: str, text: str, kind: LearningKind = "observation",
                           tags: list[str] | None = None, evidence: list[str] | None = None,
                           confidence: float = 0.5, supersedes: str | None = None,
                           role: Role = None, team_version: Version = None,
                           idempotency_key: IdemKey = None) -> Learning:
        """Record one empirical learning with its evidence (this run's cand_/art_ ids; other runs'
        ids and documents go in the text) and a confidence 0-1. `supersedes`: a learning it corrects."""
        spec = LearningCreate(run_id=run_id, text=text, kind=kind, tags=tags or [], evidence=evidence or [],
                              confidence=confidence, supersedes=supersedes, idempotency_key=idempotency_key)
        return await kb(ctx, role, team_version).add_learning(spec)

    @server.tool()
    @tool_errors
    async def learnings(ctx: Context, run_id: str, view: Literal["document", "list"] = "document",
                        kind: LearningKind | None = None, include_superseded: bool = False,
                        max_chars: Annotated[int, Field(ge=500, le=60_000)] = 12_000,
                        limit: Limit = 50, cursor: Cursor = None) -> LearningsView:
        """A run's learnings: view=document, Markdown grouped by kind (superseded ones hidden), or
        view=list, a page of entries with ids and provenance."""
        store = kb(ctx)
        if view == "document":
            doc = await store.render_learnings(run_id, max_chars=max_chars)
            return LearningsView(run_id=run_id, document=doc.markdown, total=doc.total, shown=doc.shown,
                                 truncated=doc.truncated)
        page = await store.list_learnings(run_id, kind=kind, include_superseded=include_superseded,
                                          limit=limit, cursor=cursor)
        return LearningsView(run_id=run_id, items=page.items, total=page.total, shown=len(page.items),
                             next_cursor=page.next_cursor)

    # ------------------------------------------------------------ history

    @server.tool()
    @tool_errors
    async def history(ctx: Context, run_id: str, view: Literal["document", "list"] = "document",
                      max_chars: Annotated[int, Field(ge=500, le=200_000)] = 20_000,
                      limit: Limit = 50, cursor: Cursor = None) -> HistoryView:
        """A run's evolution history (per team version: behaviour, diagnosis, design change,
        outcome): view=document (Markdown, newest that fit) or list (a page, oldest first)."""
        store = kb(ctx)
        if view == "document":
            doc = await store.render_history(run_id, max_chars=max_chars)
            return HistoryView(run_id=run_id, document=doc.markdown, total=doc.entries, shown=doc.shown,
                               truncated=doc.truncated)
        page = await store.list_history(run_id, limit=limit, cursor=cursor)
        return HistoryView(run_id=run_id, items=page.items, total=page.total, next_cursor=page.next_cursor)

    @server.tool()
    @tool_errors
    async def add_history(ctx: Context, run_id: str, team_version: Version = None, observed_behaviour: str = "",
                          diagnosis: str = "", design_change: str = "", outcome: str = "", role: Role = None,
                          idempotency_key: IdemKey = None) -> HistoryEntry:
        """Append an evolution-history entry (team.reflect is the usual way; this is for notes)."""
        spec = HistoryEntryCreate(run_id=run_id, team_version=team_version, observed_behaviour=observed_behaviour,
                                  diagnosis=diagnosis, design_change=design_change, outcome=outcome,
                                  idempotency_key=idempotency_key)
        return await kb(ctx, role, team_version).add_history(spec)

    # ------------------------------------------------------------ artifacts

    @server.tool()
    @tool_errors
    async def put_artifact(ctx: Context, run_id: str, name: str, text: str | None = None,
                           content_base64: str | None = None, kind: str = "file", role: Role = None,
                           team_version: Version = None, idempotency_key: IdemKey = None) -> ArtifactInfo:
        """Keep a file your work produced (text, or content_base64 for binary; name without
        folders). Returns the artifact id to cite as evidence."""
        spec = ArtifactCreate(run_id=run_id, name=name, kind=kind, text=text, content_base64=content_base64,
                              idempotency_key=idempotency_key)
        return await kb(ctx, role, team_version).put_artifact(spec)

    @server.tool()
    @tool_errors
    async def get_artifact(ctx: Context, artifact_id: str, detail: bool = True) -> ArtifactView:
        """Fetch an artifact by id; detail=false: only its metadata (name, kind, size, who)."""
        artifact = await kb(ctx).get_artifact(artifact_id)
        if not detail:
            return ArtifactView(artifact=ArtifactInfo(**artifact.model_dump(exclude={"text", "content_base64"})))
        return ArtifactView(artifact=artifact)

    @server.tool()
    @tool_errors
    async def list_artifacts(ctx: Context, run_id: str, kind: str | None = None, limit: Limit = 50,
                             cursor: Cursor = None) -> Page[ArtifactInfo]:
        """A run's artifacts (metadata only), oldest first; filter by kind."""
        return await kb(ctx).list_artifacts(run_id, kind=kind, limit=limit, cursor=cursor)

    # ------------------------------------------------------------ candidates

    @server.tool()
    @tool_errors
    async def record_candidate(ctx: Context, run_id: str, code: str | None = None, artifact_id: str | None = None,
                               status: CandidateStatus = "PENDING", score: float | None = None,
                               split: Literal["dev", "heldout", "all"] = "dev",
                               metrics: dict | None = None, workloads: list[WorkloadResult] | None = None,
                               parent_id: str | None = None, documents_used: list[str] | None = None,
                               notes: str = "", cost_usd: float | None = None, role: Role = None,
                               team_version: Version = None, idempotency_key: IdemKey = None) -> Candidate:
        """Record a candidate measured elsewhere (unverified: listed, never ranked). Prefer
        bench.evaluate, which measures and records."""
        spec = CandidateCreate(run_id=run_id, code=code, artifact_id=artifact_id, status=status, score=score,
                               split=split, metrics=metrics or {}, workloads=workloads or [], parent_id=parent_id,
                               documents_used=documents_used or [], notes=notes, cost_usd=cost_usd,
                               idempotency_key=idempotency_key)
        return await kb(ctx, role, team_version).record_candidate(spec)

    @server.tool()
    @tool_errors
    async def get_candidate(ctx: Context, candidate_id: str, detail: bool = False,
                            include_code: bool = False) -> Candidate:
        """A candidate: scores with intervals, per-workload results, notes, owner. include_code=true
        adds its code (build on it: pass its id as parent_id)."""
        candidate = await kb(ctx).get_candidate(candidate_id)
        if detail:
            return candidate
        return candidate.summary(include_code)

    @server.tool()
    @tool_errors
    async def best_candidates(ctx: Context, run_id: str, k: Annotated[int, Field(ge=1, le=50)] = 5,
                              split: Literal["dev", "heldout", "all"] | None = None) -> CandidateList:
        """The k best passing candidates of a run, best first (direction-aware); split: dev by
        default (all: both, on different workloads)."""
        store = kb(ctx)
        items = await store.best_candidates(run_id, k=k + 1, split=split)  # one more: whether any was left out
        more, items = len(items) > k, items[:k]
        leads = (await store.get_run(run_id)).leads_from_too_few_runs if split in (None, "dev") else []
        listed = {c.id for c in items}
        left = [c for c in leads if c.candidate_id not in listed]
        # Five of seven came back with nothing to say two were left out (mp73).
        where = "knowledge.trajectory lists every one" if k >= 50 else "k up to 50 lists them"
        note = (f"the {k} best; more rank below them ({where})" if more else None) if items or left \
            else ("no candidate of this run ranks on this split: only passing, verified, unflagged ones do "
                  "(knowledge.trajectory lists every dev record with its status)")
        return CandidateList(run_id=run_id, items=items, leads_from_too_few_runs=left, note=note)

    @server.tool()
    @tool_errors
    async def trajectory(ctx: Context, run_id: str) -> Trajectory:
        """Dev candidates, best so far. new_best: beat the last new best (or x0); else
        within_noise_of, worse_than, better_than (below, better side by side) or too_few_runs.
        Both new_best and within_noise_of: it trails a best ahead by output style alone."""
        return await kb(ctx).trajectory(run_id)

    # ------------------------------------------------------------ search

    @server.tool()
    @tool_errors
    async def search(ctx: Context, query: str, run_id: str | None = None, kinds: list[SearchKind] | None = None,
                     limit: Annotated[int, Field(ge=1, le=50)] = 10, cursor: Cursor = None) -> SearchPage:
        """Full-text search of learnings, history, artifacts and candidate notes (all your runs, or
        one), best first; any text is a valid query."""
        return await kb(ctx).search(query, run_id=run_id, kinds=kinds, limit=limit, cursor=cursor)

    # ------------------------------------------------------------ resources

    @server.resource("evoteam://runs/{run_id}/learnings.md", mime_type="text/markdown")
    @resource_errors
    async def learnings_resource(run_id: str, ctx: Context) -> str:
        """The learnings document of a run."""
        return (await kb(ctx).render_learnings(run_id)).markdown

    @server.resource("evoteam://runs/{run_id}/history.md", mime_type="text/markdown")
    @resource_errors
    async def history_resource(run_id: str, ctx: Context) -> str:
        """The evolution history of a run."""
        return (await kb(ctx).render_history(run_id)).markdown

    return server


def serve_stdio(settings: Settings, local_kit: Callable[[str], KitFacts | None] | None = None) -> None:
    build_server(settings, local_kit=local_kit).run()
