"""The `bench` MCP server: list and describe task kits, evaluate candidates honestly, compare two.

Each tool validates its arguments, calls the core (evoteam.servers.bench.evaluation.core) and returns a
pydantic model. Evaluations record the candidate in the knowledge store.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
from collections.abc import Callable
from typing import Annotated, Literal

from mcp.server import MCPServer
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.mcpserver import Context
from pydantic import Field

from evoteam.servers.guard import EvoServer
from evoteam.config import Settings
from evoteam.servers.bench.evaluation import catalog
from evoteam.servers.bench.formats.kits import find_kit
from evoteam.servers.bench.measurement import sparepool
from evoteam.servers.bench.scheduling import route
from evoteam.servers.bench.scheduling.tickets import Ticket, TicketBook
from evoteam.servers.bench.evaluation.compare import compare_candidates
from evoteam.report.measurementset import MeasurementSet
from evoteam.report.summary import remeasure_with_gains
from evoteam.servers.bench.models import Comparison, Evaluation, KitDetail, KitList, Split
from evoteam.servers.common import DomainError, ServerStore, tool_errors
from evoteam.servers.knowledge.store import KnowledgeStore

INSTRUCTIONS = """\
Honest benchmarks for optimisation candidates. list_kits shows the task kits; describe_kit gives a
kit's goal, the function signature a candidate must implement, tolerances and dev workloads, and a
starting point to copy. evaluate runs a candidate (a file path or its code) in a sandboxed process:
correctness against the reference on fresh inputs, then timing interleaved with the baseline.
Kernel kits score the geometric-mean speedup over the baseline; program kits score their objective.
Every score comes with a 95% interval: a difference inside the intervals is noise. compare tells
whether B beats A significantly; remeasure measures a run's finalists again in one batch.
Every evaluation is recorded as a candidate in the knowledge store (pass run_id and parent_id).
Use split='heldout' only to confirm a final candidate: which held-out shapes are drawn is secret.
A long evaluation can run on a ticket: evaluate(wait=false), then evaluation_result(ticket, wait_s).
A reply's text leaves out empty and null fields: remeasure's changed, within_noise_of_top and
better_than_top, where absent, are empty."""

Limit = Annotated[int, Field(ge=1, le=100)]
Cursor = Annotated[str | None, Field(description="the previous page's next_cursor")]


CallerStore = Callable[[Context], KnowledgeStore]


def build_server(settings: Settings, store: KnowledgeStore | None = None, *,
                 caller_store: CallerStore | None = None) -> MCPServer:
    """Build the bench server. Without `store`, it opens the configured store for its lifetime.
    `caller_store` makes it the evaluation service (service.py): each call records through the
    store acting for the caller's token."""
    holder = ServerStore(settings, store, "bench")

    @contextlib.asynccontextmanager
    async def lifespan(app):
        async with holder.lifespan(app) as state:
            if settings.bench_backend == "pool":  # the first evaluation finds its runner started
                from evoteam.servers.bench.scheduling.dispatch import warm_backend

                with contextlib.suppress(DomainError):  # a bad device list is said by evaluate
                    warm_backend(settings)
            # Evaluations run in this process: each one leaves spare workers for the next
            # (sparepool.py); none outlive the server.
            spares = settings.bench_backend == "local" and not sparepool.kept()
            if spares:
                sparepool.keep()
            try:
                yield state
            finally:
                if spares:
                    sparepool.keep(False)

    server = EvoServer("bench", instructions=INSTRUCTIONS, lifespan=lifespan, log_level="WARNING")

    def kb(role: str | None = None, team_version: int | None = None, ctx: Context | None = None) -> KnowledgeStore:
        if caller_store is None or ctx is None:
            return holder.scoped(role, team_version)
        base = caller_store(ctx)
        update = {k: v for k, v in (("role", role), ("team_version", team_version)) if v is not None}
        return base.with_actor(base.actor.model_copy(update=update)) if update else base

    tickets = TicketBook()

    def said(ctx: Context):
        """A line of a long batch's progress (remeasure: "dev 3.0/10: ...") as an MCP progress
        notification, numbered: a remeasure on the evaluation service was silent up to its timeout."""
        report, count, loop = reporter(ctx), itertools.count(1), asyncio.get_running_loop()
        pending: set[asyncio.Task] = set()

        def line(message: str) -> None:
            task = loop.create_task(report(next(count), None, message))  # no total: lines, not a fraction
            pending.add(task)  # held until done: a task nobody holds may be collected mid-flight
            task.add_done_callback(pending.discard)
        return line

    def reporter(ctx: Context):
        async def report(done: float, total: float | None, message: str) -> None:
            with contextlib.suppress(Exception):
                await ctx.report_progress(done, total, message)
        return report

    @server.tool()
    @tool_errors
    async def list_kits(kind: Literal["kernel", "program"] | None = None, limit: Limit = 20,
                        cursor: Cursor = None) -> KitList:
        """The task kits here: name, kind, device, direction, goal, and whether it can run here
        (and why not)."""
        return catalog.list_kits(settings, kind=kind, limit=limit, cursor=cursor)

    @server.tool()
    @tool_errors
    async def describe_kit(kit: Annotated[str, Field(description="a kit name, a kit folder, or a FlashInfer-Bench "
                                                                  "trace-set root (or a definition JSON in one)")],
                           detail: bool = False) -> KitDetail:
        """What a candidate must do: goal, direction, x0, best-known, the entry point's signature,
        tolerances, dev workloads, how timing works, the baseline and a starting-point file.
        detail=true adds the reference."""
        return catalog.describe_kit(settings, kit, detail=detail)

    @server.tool()
    @tool_errors
    async def evaluate(
        ctx: Context,
        kit: str,
        candidate_path: Annotated[str | None, Field(description="a .py file, a FlashInfer-Bench solution "
                                                                ".json, or a trace-set solution's name")] = None,
        code: Annotated[str | None, Field(description="its source, not a path")] = None,
        candidate_id: Annotated[str | None, Field(description="a recorded candidate to measure again")] = None,
        split: Split = "dev",
        repeats: Annotated[int, Field(ge=1, le=20, description="kernel: 2+ = 3 processes a side, N/3× the rounds "
                                                               "(≥1×); program: N runs, median")] = 1,
        run_id: Annotated[str | None, Field(description="default: your newest active run of this kit, else "
                                                          "new")] = None,
        parent_id: Annotated[str | None, Field(description="the candidate it derives from (none: the baseline)")] = None,
        documents_used: Annotated[list[str] | None, Field(description="retrieved documents it used")] = None,
        notes: Annotated[str, Field(max_length=2000, description="what it tries")] = "",
        role: Annotated[str | None, Field()] = None,
        team_version: Annotated[int | None, Field(ge=0)] = None,
        wait: Annotated[bool, Field(description="false: PENDING at once, a ticket")] = True,
    ) -> Evaluation:
        """Evaluate and record a candidate: sandboxed, checked, a kernel timed in rounds with
        the baseline; 95% intervals. Same code is one candidate (pooled); standing: new best or
        not. split='heldout' checks a final one."""
        store = kb(role, team_version, ctx)

        def run(progress):
            return route.evaluate(
                settings, kit, candidate_path=candidate_path, code=code, candidate_id=candidate_id, split=split,
                store=store, run_id=run_id, parent_id=parent_id, documents_used=documents_used or [],
                notes=notes, role=role, team_version=team_version, progress=progress,
                in_service=caller_store is not None, repeats=repeats)

        if wait:
            return await run(reporter(ctx))
        ticket = tickets.submit(caller_identity(store), ticketed(settings, kit, split), run)
        return tickets.pending(ticket)

    @server.tool()
    @tool_errors
    async def evaluation_result(
        ctx: Context,
        ticket: str,
        wait_s: Annotated[float, Field(ge=0, le=600, description="wait this long for it to end")] = 0,
    ) -> Evaluation:
        """A ticket's evaluation (evaluate with wait=false): the result once it has ended, else
        PENDING with queue_position and progress. Tickets last while this server runs."""
        return await tickets.result(caller_identity(kb(ctx=ctx)), ticket, wait_s)

    @server.tool()
    @tool_errors
    async def compare(
        ctx: Context,
        kit: str,
        a_path: str | None = None, a_code: str | None = None,
        a_candidate_id: Annotated[str | None, Field(description="a recorded candidate (cand_...) or baseline")] = None,
        b_path: str | None = None, b_code: str | None = None, b_candidate_id: str | None = None,
        split: Split = "dev",
        repeats: Annotated[int | None, Field(ge=1, le=20, description="kernel: N× the kit's rounds (default "
                                                                      "3); program: ≤N runs a side, 2+ (5)")] = None,
    ) -> Comparison:
        """Is B better than A, or noise? One interleaved batch: b_speedup_over_a (program kits:
        B's score minus A's), its 95% interval, significant if it excludes no change."""
        def spec(path, code, cid, label):
            given = [x for x in (path, code, cid) if x]
            if len(given) != 1:
                raise DomainError(f"give exactly one of {label}_path, {label}_code or {label}_candidate_id")
            if path and caller_store is not None:  # on the service a path names the service's files
                raise DomainError(f"the evaluation service takes code or a candidate id, not {label}_path")
            return {"candidate_path": path, "code": code, "candidate_id": cid}

        a, b = spec(a_path, a_code, a_candidate_id, "a"), spec(b_path, b_code, b_candidate_id, "b")
        if settings.bench_url and caller_store is None:  # measured on the team's evaluation service
            arguments = {"kit": route.kit_name_for_service(settings, kit), "split": split,
                         **({"repeats": repeats} if repeats is not None else {}),  # else the kit kind's default there
                         **route.side_for_service(settings, a, "a"), **route.side_for_service(settings, b, "b")}
            return Comparison.model_validate(await route.call_service(settings, "compare", arguments, reporter(ctx)))
        store = kb(ctx=ctx)  # on the evaluation service its actor is the caller: runs pool only into theirs
        return await compare_candidates(settings, kit, a, b, split=split, store=store, progress=reporter(ctx),
                                        repeats=repeats, owner=store.actor.user if caller_store is not None else None)

    @server.tool()
    @tool_errors
    async def remeasure(
        ctx: Context,
        run_id: str,
        candidate_ids: Annotated[list[str] | None, Field(description="default: each version's best, and up to 2 within noise of it")] = None,
        rounds: Annotated[int, Field(ge=2, le=100)] = 10,
        split: Split = "dev",
    ) -> MeasurementSet:
        """Measure a run's finalists (and a kernel kit's baseline) again in interleaved batches,
        pooling the new rounds; says whose rank changed, who is within noise of the top. Use
        before crowning a best or a held-out check. Programs stop at 5+ runs alike."""
        if settings.bench_url and caller_store is None:  # measured and pooled on the evaluation service
            arguments = {"run_id": run_id, "candidate_ids": candidate_ids, "rounds": rounds, "split": split}
            return MeasurementSet.model_validate(await route.call_service(settings, "remeasure", arguments,
                                                                          reporter(ctx)))
        return await remeasure_with_gains(settings, kb(ctx=ctx), run_id, rounds=rounds, split=split,
                                          candidate_ids=candidate_ids or None, progress=said(ctx))

    return server


def caller_identity(store: KnowledgeStore) -> str:
    """Whose ticket it is: the bearer token's holder on an HTTP server (a hash of the token, so
    two tokens are two owners), else the store's actor (a stdio server's one user)."""
    access = get_access_token()
    if access is not None:
        return "token:" + hashlib.sha256(access.token.encode()).hexdigest()
    return f"user:{store.actor.user}"


def ticketed(settings: Settings, kit: str, split: Split) -> Ticket:
    """A ticket for ``kit``, checked now so a wrong name is refused at once; the kit's kind and
    direction fill its PENDING answers (a kit only the evaluation service knows: a kernel's)."""
    try:
        found = find_kit(settings, kit)
    except DomainError:
        if not settings.bench_url:
            raise
        return Ticket(id="", owner="", kit=kit, split=split)
    return Ticket(id="", owner="", kit=found.name, kind=found.manifest.kind, direction=found.manifest.direction,
                  split=split)


def serve_stdio(settings: Settings) -> None:
    build_server(settings).run()
