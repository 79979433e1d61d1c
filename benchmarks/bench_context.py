"""What an agent reads from evoteam: characters of tool output per team cycle and per kernel-loop
iteration, and of the four servers' tool schemas. Prints tables; asserts nothing.

    .venv/bin/python benchmarks/bench_context.py [--kit rmsnorm_cpu]

Every call goes through a real MCP client (in memory) to the real servers over one real store
file, in the order the texts ask for it:

- one `/evolve-team` cycle (skills/evolve-team/SKILL.md and the role briefs): the supervisor
  describes the kit, starts the run, designs a version of two roles, checks its status; each
  role does its mandatory reads, describes the kit, evaluates two candidates and records a
  learning; the supervisor records both role results (no hooks), reads the status, the run
  report and the budget, and reflects;
- `/kernel-loop` (skills/kernel-loop/SKILL.md): its setup (describe, find or start the run, read
  learnings and best candidates), then one iteration (evaluate, add a learning).

Characters are those of each result's text block (what a model reads); the schemas are each
tool's name, description and input schema as JSON. The kit is copied with one short timing plan
so that the run takes seconds: the outputs have the same fields and sizes as a full plan's.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mcp import Client  # noqa: E402

from evoteam.config import Settings  # noqa: E402
from evoteam.servers.bench.server import build_server as bench_server  # noqa: E402
from evoteam.servers.knowledge.local import LocalKnowledgeStore  # noqa: E402
from evoteam.servers.knowledge.server import build_server as knowledge_server  # noqa: E402
from evoteam.servers.retrieval.server import build_server as retrieval_server  # noqa: E402
from evoteam.servers.team.server import build_server as team_server  # noqa: E402

ROLES = [("Workload Analyst", "Measure where the baseline loses time per workload and try one fix."),
         ("Vectoriser", "Rewrite the reduction with vectorised operations and measure it.")]


class Reader:
    """Calls tools and counts the characters of what comes back, per phase and per tool."""

    def __init__(self, clients: dict[str, Client]):
        self.clients = clients
        self.rows: list[tuple[str, str, int]] = []
        self.verbose = "-v" in sys.argv
        self.dump: list[str] | None = None
        # What enters a context other than through evoteam's tools: spawn prompts, brief files.
        self.outside: list[tuple[str, str, int]] = []

    async def __call__(self, phase: str, server: str, tool: str, args: dict) -> dict:
        if self.verbose:
            print(f"  {phase}: {server}.{tool}", file=sys.stderr, flush=True)
        result = await self.clients[server].call_tool(tool, args)
        text = "".join(getattr(block, "text", "") for block in result.content)
        self.rows.append((phase, f"{server}.{tool}", len(text)))
        if self.dump is not None:
            self.dump.append(f"== {phase}: {server}.{tool} ({len(text)} chars)\n{text}\n")
        if result.is_error:
            raise SystemExit(f"{server}.{tool} failed: {text}")
        return result.structured_content or {}


def fast_kit(kit: str, into: Path) -> Path:
    source = ROOT / "task_kits" / kit
    target = into / kit
    shutil.copytree(source, target)
    manifest = json.loads((target / "kit.json").read_text())
    manifest["timing"] = {"warmup": 1, "rounds": 2, "reps_per_round": 2}
    (target / "kit.json").write_text(json.dumps(manifest))
    return target


def candidate_text(kit_dir: Path, n: int) -> str:
    base = (kit_dir / "baseline.py").read_text()
    return base + f"\n# variant {n}\n"


async def team_cycle(call: Reader, kit: str, kit_dir: Path, project: Path) -> None:
    described = await call("supervisor", "bench", "describe_kit", {"kit": kit})
    run = await call("supervisor", "knowledge", "start_run", {
        "goal": described["goal"], "kit": kit, "direction": described["direction"], "x0": described.get("x0"),
        "best_known": described.get("best_known"), "budget_usd": 10})
    run_id = run["id"]
    design = await call("supervisor", "team", "design_team", {
        "run_id": run_id, "diagnosis": "v1: nothing is measured yet; the baseline's cost per workload is unknown.",
        "rationale": "One role measures, one tries the most likely rewrite; both record what they learn.",
        "roles": [{"name": n, "mandate": m, "mcp_servers": ["knowledge", "bench"]} for n, m in ROLES]})
    await call("supervisor", "team", "team_status", {"run_id": run_id})
    version = design["version"]
    prompts = [c["prompt"] for step in design["plan"]["steps"] for c in step["calls"]]
    for n, (name, _) in enumerate(ROLES):
        phase = f"role {n + 1}"
        # The role gets its prompt; when the prompt names a brief file, it reads it (Read tool).
        brief = prompts[n]
        call.outside.append((phase, "prompt (written by the supervisor, read by the role)", len(brief)))
        named = re.search(r"is the file `([^`]+)`", brief)
        if named:
            brief = Path(named.group(1)).read_text()
            call.outside.append((phase, "brief file (Read tool)", len(brief)))
        # Then the mandatory reads the brief lists, and nothing it does not.
        for server, tool in (("knowledge", "learnings"), ("knowledge", "history"), ("knowledge", "best_candidates")):
            if f"__{tool}`" in brief.split("## Read before you act", 1)[-1].split("## Deliver", 1)[0] \
                    and "nothing to read" not in brief:
                await call(phase, server, tool, {"run_id": run_id})
        if "__describe_kit`" in brief:
            await call(phase, "bench", "describe_kit", {"kit": kit})
        parent = None
        for i in range(2):
            path = project / f"{name.split()[0].lower()}_{i}.py"
            path.write_text(candidate_text(kit_dir, 10 * n + i))
            evaluation = await call(phase, "bench", "evaluate", {
                "kit": kit, "candidate_path": str(path), "run_id": run_id, "role": name, "team_version": version,
                "notes": f"variant {i} of the {name}", **({"parent_id": parent} if parent else {})})
            parent = evaluation.get("candidate_id") or parent
        await call(phase, "knowledge", "add_learning", {
            "run_id": run_id, "text": f"{name}: the variants score alike; the reduction dominates.",
            "kind": "observation", "evidence": [parent] if parent else [], "role": name, "team_version": version})
    for name, _ in ROLES:
        await call("supervisor", "team", "record_role_result", {
            "run_id": run_id, "role": name, "summary": f"{name} finished: two variants measured, one learning."})
    await call("supervisor", "team", "team_status", {"run_id": run_id})
    await call("supervisor", "team", "run_report", {"run_id": run_id})
    await call("supervisor", "team", "budget", {"run_id": run_id})
    await call("supervisor", "team", "reflect", {
        "run_id": run_id, "observed_behaviour": "both roles measured two variants", "diagnosis": "no gain yet",
        "design_change": "next: profile the reduction", "outcome": "best equals the baseline"})


async def kernel_loop(call: Reader, kit: str, kit_dir: Path, project: Path) -> None:
    described = await call("kernel-loop setup", "bench", "describe_kit", {"kit": kit})
    await call("kernel-loop setup", "knowledge", "list_runs", {"status": "active"})
    run = await call("kernel-loop setup", "knowledge", "start_run", {
        "goal": described["goal"], "kit": kit, "direction": described["direction"], "x0": described.get("x0")})
    await call("kernel-loop setup", "knowledge", "learnings", {"run_id": run["id"]})
    await call("kernel-loop setup", "knowledge", "best_candidates", {"run_id": run["id"]})
    path = project / "loop_1.py"
    path.write_text(candidate_text(kit_dir, 99))
    evaluation = await call("kernel-loop iteration", "bench", "evaluate", {
        "kit": kit, "candidate_path": str(path), "run_id": run["id"], "notes": "hypothesis: fewer passes"})
    await call("kernel-loop iteration", "knowledge", "add_learning", {
        "run_id": run["id"], "text": "one pass is as fast as two here", "kind": "dead_end",
        "evidence": [evaluation["candidate_id"]] if evaluation.get("candidate_id") else []})


async def schemas(settings: Settings, store) -> list[tuple[str, int, int]]:
    rows = []
    for name, build in (("knowledge", knowledge_server), ("team", team_server), ("retrieval", retrieval_server),
                        ("bench", bench_server)):
        async with Client(build(settings, store)) as client:
            tools = (await client.list_tools()).tools
        chars = sum(len(json.dumps({"name": t.name, "description": t.description, "inputSchema": t.input_schema},
                                   separators=(",", ":"), ensure_ascii=False)) for t in tools)
        rows.append((name, len(tools), chars))
    return rows


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kit", default="rmsnorm_cpu")
    parser.add_argument("-v", action="store_true", help="name each call on stderr as it is made")
    parser.add_argument("--dump", type=Path, help="write every result's text to this file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        project = tmp_path / "project"
        project.mkdir()
        subprocess.run(["git", "init", "-q"], cwd=project, check=True)
        subprocess.run(["git", "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-q", "--allow-empty", "-m",
                        "start"], cwd=project, check=True)
        kit_dir = fast_kit(args.kit, tmp_path / "kits")
        settings = Settings(db=tmp_path / "state" / "evoteam.db", kits_dirs=[kit_dir.parent],
                            candidate_dirs=[project])
        import os
        os.chdir(project)
        async with LocalKnowledgeStore.open(settings.db) as store:
            async with contextlib.AsyncExitStack() as stack:
                clients = {
                    "knowledge": await stack.enter_async_context(Client(knowledge_server(settings, store))),
                    "bench": await stack.enter_async_context(Client(bench_server(settings, store))),
                    "team": await stack.enter_async_context(Client(team_server(settings, store, project_dir=project)))}
                call = Reader(clients)
                if args.dump:
                    call.dump = []
                await team_cycle(call, args.kit, kit_dir, project)
                await kernel_loop(call, args.kit, kit_dir, project)
            schema_rows = await schemas(settings, store)
        if args.dump:
            args.dump.write_text("\n".join(call.dump))

    by_phase: dict[str, int] = defaultdict(int)
    by_tool: dict[str, list[int]] = defaultdict(list)
    for phase, tool, chars in call.rows:
        by_phase[phase] += chars
        by_tool[tool].append(chars)
    cycle = sum(v for k, v in by_phase.items() if k == "supervisor" or k.startswith("role"))
    print(f"Tool output an agent reads (characters of text), kit {args.kit}")
    print(f"{'phase':<24}{'calls':>7}{'chars':>10}")
    for phase in dict.fromkeys(p for p, _, _ in call.rows):
        print(f"{phase:<24}{sum(1 for p, _, _ in call.rows if p == phase):>7}{by_phase[phase]:>10}")
    print(f"{'team cycle (all above)':<24}{sum(1 for p, _, _ in call.rows if p == 'supervisor' or p.startswith('role')):>7}"
          f"{cycle:>10}")
    outside = sum(chars for _, _, chars in call.outside)
    print(f"{'+ prompts, brief files':<24}{len(call.outside):>7}{outside:>10}   (what the contexts hold besides)")
    for phase, what, chars in call.outside:
        print(f"    {phase}: {what}: {chars}")
    print()
    print(f"{'tool':<32}{'calls':>7}{'mean':>8}{'max':>8}")
    for tool, sizes in sorted(by_tool.items(), key=lambda kv: -sum(kv[1])):
        print(f"{tool:<32}{len(sizes):>7}{sum(sizes) // len(sizes):>8}{max(sizes):>8}")
    print()
    print(f"{'server':<12}{'tools':>7}{'schema chars':>14}")
    for name, count, chars in schema_rows:
        print(f"{name:<12}{count:>7}{chars:>14}")
    print(f"{'all four':<12}{sum(r[1] for r in schema_rows):>7}{sum(r[2] for r in schema_rows):>14}")


if __name__ == "__main__":
    asyncio.run(main())
