"""The `bench` MCP server: list and describe task kits, evaluate candidates honestly, compare two.

Each tool validates its arguments, calls the core (evoteam.servers.bench.core) and returns a
pydantic model. Evaluations record the candidate in the knowledge store.
"""

from __future__ import annotations

import contextlib
from typing import Annotated, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import Field

from evoteam.servers.guard import EvoServer
from evoteam.config import Settings
from evoteam.servers.bench import core
from evoteam.servers.bench.compare import compare_candidates
from evoteam.report.remeasure import MeasurementSet, remeasure_run
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
Use split='heldout' only to confirm a final candidate: held-out shapes are secret."""

Limit = Annotated[int, Field(ge=1, le=100, description="page size")]
Cursor = Annotated[str | None, Field(description="next_cursor from the previous page; omit for the first")]


def build_server(settings: Settings, store: KnowledgeStore | None = None) -> MCPServer:
    """Build the bench server. Without `store`, it opens the configured store for its lifetime."""
    holder = ServerStore(settings, store, "bench")
    server = EvoServer("bench", instructions=INSTRUCTIONS, lifespan=holder.lifespan, log_level="WARNING")
    kb = holder.scoped

    def reporter(ctx: Context):
        async def report(done: float, total: float, message: str) -> None:
            with contextlib.suppress(Exception):
                await ctx.report_progress(done, total, message)
        return report

    @server.tool()
    @tool_errors
    async def list_kits(kind: Literal["kernel", "program"] | None = None, limit: Limit = 20,
                        cursor: Cursor = None) -> KitList:
        """The task kits this machine knows (the repository's task_kits/ plus configured folders; every
        definition of a FlashInfer-Bench trace set there is a kit named after it):
        name, kind (kernel or program), device, direction, the goal's first line, and whether the kit
        can run here (a GPU kit on a machine without CUDA cannot; the reason says why)."""
        return core.list_kits(settings, kind=kind, limit=limit, cursor=cursor)

    @server.tool()
    @tool_errors
    async def describe_kit(kit: Annotated[str, Field(description="a kit name, a kit folder, or a FlashInfer-Bench "
                                                                  "trace-set root (or a definition JSON in one)")],
                           detail: bool = False) -> KitDetail:
        """Everything needed to write a candidate for a kit: goal, direction, x0 and best-known score,
        the entry point and its signature (input order, output order, dtypes), tolerances, dev
        workloads (shapes), how many held-out workloads exist (their shapes are secret), the baseline,
        and a starting-point file to copy; for a trace-set kit, its named solutions. detail=true adds
        the reference implementation and the full definition."""
        return core.describe_kit(settings, kit, detail=detail)

    @server.tool()
    @tool_errors
    async def evaluate(
        ctx: Context,
        kit: str,
        candidate_path: Annotated[str | None, Field(description="a .py file, a FlashInfer-Bench solution .json, "
                                                                "or the name of a solution in the kit's trace set; "
                                                                "only the candidate's own files reach the sandbox")] = None,
        code: Annotated[str | None, Field(description="the candidate's Python source, instead of a path")] = None,
        candidate_id: Annotated[str | None, Field(description="a recorded candidate (cand_...) to measure again; "
                                                              "the new measurement is pooled into it")] = None,
        split: Split = "dev",
        repeats: Annotated[int, Field(ge=1, le=20, description="kernel kits: time that many times the kit's "
                                                               "rounds; program kits: run the evaluator that many "
                                                               "times (score: the median)")] = 1,
        run_id: Annotated[str | None, Field(description="the run to record the candidate in; default: the kit's "
                                                        "newest active run, or a new one")] = None,
        parent_id: Annotated[str | None, Field(description="the candidate this one was derived from")] = None,
        documents_used: Annotated[list[str] | None, Field(description="ids of retrieved documents this "
                                                                      "candidate was built from")] = None,
        notes: Annotated[str, Field(max_length=2000, description="what this candidate tries")] = "",
        role: Annotated[str | None, Field(description="your role in the team, if any (provenance)")] = None,
        team_version: Annotated[int | None, Field(ge=0, description="your team version, if any")] = None,
    ) -> Evaluation:
        """Evaluate one candidate on a kit and record it in the knowledge store. Kernel kits: for every
        workload the candidate runs in a sandboxed process on fresh inputs and is checked against the
        reference twice (NaN/inf never pass; inputs must stay unchanged; outputs must not alias
        inputs), then timed in interleaved rounds with the baseline (confined alike, same fresh
        inputs); each workload's speedup is the median of the rounds' paired ratios with its 95%
        interval (speedup_interval), and the score is their geometric mean with score_interval,
        only when every workload passes. Program kits: the kit's evaluator scores the program
        (repeats: the median of several runs). Identical code already in the run is the same
        candidate: the measurement is pooled (n_measurements, candidate_score, candidate_interval).
        contended=true means the machine was busy: wider intervals, speedups closer to 1. Statuses:
        PASSED, INCORRECT_SHAPE, INCORRECT_DTYPE, INCORRECT_NUMERICAL, RUNTIME_ERROR, COMPILE_ERROR,
        TIMEOUT; suspicious results are flagged. Use split='heldout' to confirm a final candidate on
        secret shapes."""
        if sum(bool(x) for x in (candidate_path, code, candidate_id)) != 1:
            raise DomainError("pass exactly one of candidate_path (a file), code (its source) or candidate_id")
        return await core.evaluate_candidate(
            settings, kit, candidate_path=candidate_path, code=code, candidate_id=candidate_id, split=split,
            store=kb(role, team_version), run_id=run_id, parent_id=parent_id, documents_used=documents_used or [],
            notes=notes, progress=reporter(ctx), repeats=repeats)

    @server.tool()
    @tool_errors
    async def compare(
        ctx: Context,
        kit: str,
        a_path: str | None = None, a_code: str | None = None,
        a_candidate_id: Annotated[str | None, Field(description="a recorded candidate (cand_...)")] = None,
        b_path: str | None = None, b_code: str | None = None, b_candidate_id: str | None = None,
        split: Split = "dev",
        repeats: Annotated[int, Field(ge=2, le=20, description="program kits: evaluator runs per side")] = 3,
    ) -> Comparison:
        """Is B faster than A, or is the difference noise? Kernel kits: A, B and the baseline are timed in
        one interleaved batch on the same fresh inputs; b_speedup_over_a is B's speedup over A (above 1:
        B is faster) with its 95% interval, per workload and over the kit, and significant is true only
        when the interval excludes 1. Program kits: the evaluators run alternately `repeats` times; the
        contrast is B's median score minus A's. The verdict says which is better, or 'no significant
        difference'. Nothing is recorded in the store."""
        def spec(path, code, cid, label):
            given = [x for x in (path, code, cid) if x]
            if len(given) != 1:
                raise DomainError(f"give exactly one of {label}_path, {label}_code or {label}_candidate_id")
            return {"candidate_path": path, "code": code, "candidate_id": cid}

        return await compare_candidates(settings, kit, spec(a_path, a_code, a_candidate_id, "a"),
                                        spec(b_path, b_code, b_candidate_id, "b"), split=split,
                                        store=kb(), progress=reporter(ctx), repeats=repeats)

    @server.tool()
    @tool_errors
    async def remeasure(
        run_id: str,
        candidate_ids: Annotated[list[str] | None, Field(description="candidates to re-measure; default: the "
                                                                     "best of each team version (the finalists)")] = None,
        rounds: Annotated[int, Field(ge=2, le=100, description="interleaved rounds")] = 10,
        split: Split = "dev",
    ) -> MeasurementSet:
        """Measure a run's finalists (the best candidate of each team version, or candidate_ids) and a
        copy of the baseline again in ONE interleaved batch: every round times all of them on the
        same fresh inputs, so the machine's drift touches all alike. Each finalist's new rounds are
        recorded as one more measurement of it (pooled into the same candidate). The result orders the
        finalists by the pessimistic end of their interval before and after (changed: whose place
        moved) and lists those within noise of the top. Use it before crowning a version's best and
        before the held-out check; it takes about rounds x finalists x the kernels' time."""
        return await remeasure_run(settings, kb(), run_id, rounds=rounds, split=split,
                                   candidate_ids=candidate_ids or None)

    return server


def serve_stdio(settings: Settings) -> None:
    build_server(settings).run()
