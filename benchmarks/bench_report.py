"""Report time for a large run: prints a table; asserts nothing.

    .venv/bin/python benchmarks/bench_report.py [--versions 200] [--candidates 5000]

Fills a store with one run of V team versions and C candidates (each with three per-workload
results, a cost line per version and role, and one gate per version), then times the three
steps of `evoteam report`: reading the run from the store, building the HTML page, and
rendering the charts to PNG (vl-convert, no browser). Rows are inserted through the store's own
methods, as a run would write them.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evoteam.report.data import gather  # noqa: E402
from evoteam.report.page import render_report, report_charts, write_pngs  # noqa: E402
from evoteam.servers.knowledge.connect import component_store  # noqa: E402
from evoteam.servers.knowledge.local import LocalKnowledgeStore  # noqa: E402
from evoteam.servers.knowledge.models import CandidateCreate, CostCreate, RunCreate, WorkloadResult  # noqa: E402
from evoteam.servers.knowledge.store import Actor  # noqa: E402
from evoteam.servers.team.models import TeamDesign  # noqa: E402


async def fill(store: LocalKnowledgeStore, versions: int, candidates: int) -> str:
    rng = random.Random(7)
    run = await store.start_run(RunCreate(goal="benchmark run", kit="rmsnorm_cpu", x0=1.0, best_known=8.0))
    team = component_store("team", store)
    per_version = max(1, candidates // versions)
    score = 1.0
    for v in range(1, versions + 1):
        await team.create_version(TeamDesign.model_validate({
            "run_id": run.id, "diagnosis": f"diagnosis {v}", "rationale": "r",
            "roles": [{"name": n, "mandate": "m"} for n in ("Profiler", "Implementer", "Challenger")]}))
        for role in ("Profiler", "Implementer", "Challenger"):
            writer = store.with_actor(Actor(user="bench", role=role, team_version=v))
            await writer.record_cost(CostCreate(run_id=run.id, usd=0.01 * rng.random(), source="transcript"))
        for _ in range(per_version):
            score = max(0.5, score + rng.gauss(0.002, 0.05))
            writer = store.with_actor(Actor(user="bench", role="Implementer", team_version=v))
            await writer.record_candidate(CandidateCreate(
                run_id=run.id, code="def run(x): return x", status="PASSED", score=score,
                workloads=[WorkloadResult(workload=f"w{i}", status="PASSED", speedup=score * (0.8 + 0.2 * i))
                           for i in range(3)]))
    return run.id


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--versions", type=int, default=200)
    parser.add_argument("--candidates", type=int, default=5000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="evoteam-report-") as tmp:
        tmp = Path(tmp)
        async with LocalKnowledgeStore.open(tmp / "kb.db", Actor(user="bench")) as store:
            t = time.perf_counter()
            run_id = await fill(store, args.versions, args.candidates)
            filled = time.perf_counter() - t
            t = time.perf_counter()
            report = await gather(store, run_id)
            read = time.perf_counter() - t
        t = time.perf_counter()
        page = render_report(report)
        build = time.perf_counter() - t
        t = time.perf_counter()
        write_pngs(report_charts(report), tmp / "png")
        png = time.perf_counter() - t
    print(f"run of {len(report.versions)} team versions, {len(report.candidates)} candidates "
          f"(store filled in {filled:.1f} s)\n")
    print(f"| step | seconds |\n| --- | ---: |")
    print(f"| read the run from the store | {read:.2f} |")
    print(f"| build the HTML page ({len(page) / 1e6:.1f} MB, Vega bundled inline) | {build:.2f} |")
    print(f"| render the charts to PNG | {png:.2f} |")
    print(f"| **whole report** | **{read + build + png:.2f}** |")


if __name__ == "__main__":
    asyncio.run(main())
