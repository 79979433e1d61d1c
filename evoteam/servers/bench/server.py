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
from evoteam.servers.bench.models import Comparison, Evaluation, KitDetail, KitList, Split
from evoteam.servers.common import DomainError, ServerStore, tool_errors
from evoteam.servers.knowledge.store import KnowledgeStore

INSTRUCTIONS = """\
Honest benchmarks for optimisation candidates. list_kits shows the task kits; describe_kit gives a
kit's goal, the function signature a candidate must implement, tolerances and dev workloads, and a
starting point to copy. evaluate runs a candidate (a file path or its code) in a sandboxed process:
correctness against the reference on fresh inputs, then timing interleaved with the baseline.
Kernel kits score the geometric-mean speedup over the baseline; program kits score their objective.
Every evaluation is recorded as a candidate in the knowledge store (pass run_id and parent_id).
Use split='heldout' only to confirm a final candidate: which held-out shapes are drawn is secret."""

Limit = Annotated[int, Field(ge=1, le=100, description="page size")]
Cursor = Annotated[str | None, Field(description="the previous page's next_cursor")]


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
        """The task kits this machine knows: name, kind, device, direction, goal, and whether it
        can run here (with the reason when not)."""
        return core.list_kits(settings, kind=kind, limit=limit, cursor=cursor)

    @server.tool()
    @tool_errors
    async def describe_kit(kit: Annotated[str, Field(description="a kit name, a kit folder, or a FlashInfer-Bench "
                                                                  "trace-set root (or a definition JSON in one)")],
                           detail: bool = False) -> KitDetail:
        """Everything needed to write a candidate: goal, direction, x0, best-known score, the entry
        point's signature (inputs, outputs, dtypes), tolerances, dev workloads, the held-out count
        (drawn by a secret seed), the baseline and a starting-point file. detail=true adds the reference."""
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
        split: Split = "dev",
        run_id: Annotated[str | None, Field(description="the run to record the candidate in; default: the kit's "
                                                        "newest active run, or a new one")] = None,
        parent_id: Annotated[str | None, Field(description="the candidate this one was derived from")] = None,
        documents_used: Annotated[list[str] | None, Field(description="ids of retrieved documents this "
                                                                      "candidate was built from")] = None,
        notes: Annotated[str, Field(max_length=2000, description="what this candidate tries")] = "",
        role: Annotated[str | None, Field(description="your role in the team, if any (provenance)")] = None,
        team_version: Annotated[int | None, Field(ge=0, description="your team version, if any")] = None,
    ) -> Evaluation:
        """Evaluate one candidate and record it in the store (pass run_id). Kernel kits: sandboxed,
        checked against the reference, timed against the baseline; score = geometric-mean speedup
        when every workload passes. documents_used credits those documents (no record_outcome
        needed). split='heldout' confirms a final candidate on secret shapes."""
        if not candidate_path and not code:
            raise DomainError("pass candidate_path (a file) or code (its source)")
        return await core.evaluate_candidate(
            settings, kit, candidate_path=candidate_path, code=code, split=split, store=kb(role, team_version),
            run_id=run_id, parent_id=parent_id, documents_used=documents_used or [], notes=notes,
            progress=reporter(ctx))

    @server.tool()
    @tool_errors
    async def compare(
        ctx: Context,
        kit: str,
        a_path: str | None = None, a_code: str | None = None,
        a_candidate_id: Annotated[str | None, Field(description="a recorded candidate (cand_...)")] = None,
        b_path: str | None = None, b_code: str | None = None, b_candidate_id: str | None = None,
        split: Split = "dev",
    ) -> Comparison:
        """Evaluate two candidates (A, B: each a path, code or candidate id) on one kit and split, per
        workload: status, time, and A's time over B's (above 1: B is faster). Records nothing."""
        def spec(path, code, cid, label):
            given = [x for x in (path, code, cid) if x]
            if len(given) != 1:
                raise DomainError(f"give exactly one of {label}_path, {label}_code or {label}_candidate_id")
            return {"candidate_path": path, "code": code, "candidate_id": cid}

        return await core.compare_candidates(settings, kit, spec(a_path, a_code, a_candidate_id, "a"),
                                             spec(b_path, b_code, b_candidate_id, "b"), split=split,
                                             store=kb(), progress=reporter(ctx))

    return server


def serve_stdio(settings: Settings) -> None:
    build_server(settings).run()
