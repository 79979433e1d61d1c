"""Hot paths against the size of a run's history: prints the curve; asserts nothing.

    .venv/bin/python benchmarks/bench_scale.py                 # 1k, 10k, 100k, 1M learnings
    .venv/bin/python benchmarks/bench_scale.py --max 100000    # stop at 100k

One store grows step by step to each size — learnings (with their search-index rows), and one
candidate per ten learnings, one cost per hundred, one history entry per thousand — written in
bulk (executemany, one transaction per batch; the counters' triggers fire as for any write).
At each size it times, on the run with the active team:

- in process: `get_run`, `spend`, the learnings document (12,000 chars), the history document,
  `team_status`, `best_candidates`, and search (a typical two-word query; the commonest word);
- as Claude Code runs them (`hooks/evoteam-launch hook <event>`, a fresh process, spawn to exit):
  SessionStart, Stop, SubagentStop and PreCompact, next to the floor (the launcher and Python
  start on an unknown event), measured in the same loop; each both served by the warm hook
  process (every hook after the first, evoteam/plugin/warm.py) and run in its own process (the
  first hook of an environment, or with EVOTEAM_HOOK_WARM=0).

The last column is the ratio of the largest size to the smallest: flat hot paths stay near 1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_knowledge import VOCAB, pct, sentence, time_calls, typical_query  # noqa: E402
from evoteam.plugin import state  # noqa: E402
from evoteam.servers.knowledge.local import LocalKnowledgeStore  # noqa: E402
from evoteam.servers.knowledge.rows import index_filters, new_id, now  # noqa: E402
from evoteam.servers.knowledge.store import Actor  # noqa: E402
from evoteam.servers.team.core import TeamService  # noqa: E402
from evoteam.servers.team.store import TeamStore  # noqa: E402
from tests.plugin.test_hooks import _design, _transcript, base_input, seed  # noqa: E402

LAUNCHER = ROOT / "hooks" / "evoteam-launch"
KINDS = ("observation", "technique", "dead_end", "bug", "hypothesis", "workload", "process")
BATCH = 20_000


async def grow(store: LocalKnowledgeStore, run_id: str, start: int, stop: int, rng: random.Random) -> None:
    """Add learnings start..stop-1 (and their share of candidates, costs and history) in bulk."""
    run = await store.get_run(run_id)
    filters = {kind: index_filters(kind, run_id, run.project) for kind in ("learning", "candidate", "history")}
    for lo in range(start, stop, BATCH):
        hi = min(stop, lo + BATCH)
        learnings, candidates, costs, history, index = [], [], [], [], []
        for i in range(lo, hi):
            lid, text, kind = new_id("lrn"), sentence(rng, i), KINDS[i % len(KINDS)]
            at = now()
            learnings.append((lid, run_id, text, kind, round(rng.random(), 2), run.project, "bench", "bench", at))
            index.append((f"{kind}: ", text, filters["learning"], "learning", lid, run_id, run.project))
            if i % 10 == 0:
                cid, notes = new_id("cand"), sentence(rng, i)
                candidates.append((cid, run_id, "x = 1", "PASSED" if i % 30 else "RUNTIME_ERROR",
                                   rng.uniform(1, 3), notes, run.project, "bench", at))
                index.append(("candidate PASSED", notes, filters["candidate"], "candidate", cid, run_id, run.project))
            if i % 100 == 0:
                costs.append((new_id("cost"), run_id, 0.0001, "bench", run.project, "bench",
                              f"role{i % 7}", i // 100_000, at))
            if i % 1000 == 0:
                hid, text = new_id("his"), sentence(rng, i)
                history.append((hid, run_id, text, text, run.project, "bench", i // 1000, at))
                index.append(("team v", text, filters["history"], "history", hid, run_id, run.project))
        async with store.db.write() as conn:
            await conn.executemany(
                "INSERT INTO learnings (id, run_id, text, kind, confidence, project, user, client, created_at) "
                "VALUES (?,?,?,?,?,?,?,?,?)", learnings)
            await conn.executemany(
                "INSERT INTO candidates (id, run_id, code, status, score, notes, project, user, created_at) "
                "VALUES (?,?,?,?,?,?,?,?,?)", candidates)
            await conn.executemany(
                "INSERT INTO costs (id, run_id, usd, source, project, user, role, team_version, created_at) "
                "VALUES (?,?,?,?,?,?,?,?,?)", costs)
            await conn.executemany(
                "INSERT INTO history (id, run_id, diagnosis, outcome, project, user, team_version, created_at) "
                "VALUES (?,?,?,?,?,?,?,?)", history)
            await conn.executemany(
                "INSERT INTO search_index (title, body, filters, kind, ref_id, run_id, project) "
                "VALUES (?,?,?,?,?,?,?)", index)


async def in_process(store: LocalKnowledgeStore, run_id: str, calls: int, rng: random.Random) -> dict[str, list]:
    service = TeamService(TeamStore(store), write_agent_files=False)
    queries = [typical_query(rng) for _ in range(calls)]
    paths = {
        "get_run": lambda i: store.get_run(run_id),
        "spend (budget check)": lambda i: store.spend(run_id),
        "learnings document": lambda i: store.render_learnings(run_id, max_chars=12_000),
        "history document": lambda i: store.render_history(run_id),
        "team_status": lambda i: service.team_status(run_id),
        "best_candidates": lambda i: store.best_candidates(run_id, k=5),
        "search, two words": lambda i: store.search(queries[i], run_id=run_id),
        "search, commonest word": lambda i: store.search(VOCAB[0], run_id=run_id),
    }
    out = {}
    for name, call in paths.items():
        await time_calls(call, 3)  # warm-up
        out[name] = await time_calls(call, calls)
    return out


OWN_PROCESS = {"EVOTEAM_HOOK_WARM": "0"}


def hook_times(cases: list[tuple[str, tuple]], env: dict[str, str], repeats: int) -> dict[str, list]:
    out: dict[str, list] = {name: [] for name, _ in cases}
    for _ in range(repeats):  # interleaved, so load changes hit every hook alike
        for name, (event, payload, extra) in cases:
            t = time.perf_counter()
            subprocess.run([str(LAUNCHER), "hook", event], input=json.dumps(payload), text=True,
                           env={**env, **extra}, capture_output=True, timeout=120)
            out[name].append(time.perf_counter() - t)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--max", type=int, default=1_000_000, help="largest number of learnings")
    parser.add_argument("--calls", type=int, default=30, help="timed calls per in-process path and size")
    parser.add_argument("--hook-repeats", type=int, default=7)
    args = parser.parse_args()
    sizes = [n for n in (1_000, 10_000, 100_000, 1_000_000) if n <= args.max]
    rng = random.Random(7)
    results: dict[str, dict[int, list]] = {}
    with tempfile.TemporaryDirectory(prefix="evoteam-scale-") as tmp:
        tmp = Path(tmp)
        db, project = tmp / "kb.db", tmp / "project"
        project.mkdir()
        env = {**os.environ, "EVOTEAM_DB": str(db), "EVOTEAM_HOOK_LOG": str(tmp / "hooks.log"),
               "EVOTEAM_PYTHON": sys.executable, "CLAUDE_PROJECT_DIR": str(project), "HOME": str(tmp)}
        for var in ("EVOTEAM_KNOWLEDGE_URL", "EVOTEAM_RUN", "EVOTEAM_AUTOCONTINUE", "EVOTEAM_HOOKS"):
            env.pop(var, None)
        os.environ["EVOTEAM_DB"] = str(db)
        run_id = seed(db, budget=1e9)
        prompt = _design(db, project, run_id)
        state.activate(project, run_id, version=1, session_id="sess-1")
        transcript = _transcript(tmp / "agent.jsonl", prompt)
        events = [
            ("SessionStart", "session-start", base_input(project, "SessionStart", source="startup")),
            ("Stop", "stop", base_input(project, "Stop", background_tasks=[], stop_hook_active=False)),
            ("SubagentStop", "subagent-stop", base_input(
                project, "SubagentStop", agent_id="a1", agent_type="evoteam:team-member",
                agent_transcript_path=str(transcript), last_assistant_message="REPORT: profiled it",
                stop_hook_active=False)),
            ("PreCompact", "pre-compact", base_input(project, "PreCompact", trigger="auto")),
        ]
        # Each hook twice: as it runs after the first hook of an environment (in the warm hook
        # process), and in its own process (the first hook; EVOTEAM_HOOK_WARM=0).
        cases = [("hook: (floor: launcher + Python start)", ("unknown-event", {}, OWN_PROCESS))]
        cases += [(f"hook: {name}", (event, payload, {})) for name, event, payload in events]
        cases += [(f"hook: {name}, own process", (event, payload, OWN_PROCESS)) for name, event, payload in events]
        have = 1  # seed() wrote one learning
        loads = []
        for n in sizes:
            t = time.perf_counter()

            async def step():
                async with LocalKnowledgeStore.open(db, Actor(user="bench")) as store:
                    await grow(store, run_id, have, n, rng)
                    return await in_process(store, run_id, args.calls, rng)

            timings = asyncio.run(step())
            loads.append(f"{n:,} in {time.perf_counter() - t:.0f} s")
            timings.update(hook_times(cases, env, args.hook_repeats))
            for name, values in timings.items():
                results.setdefault(name, {})[n] = values
            have = n
            print(f"  measured at {n:,} learnings", file=sys.stderr, flush=True)
    load = os.getloadavg()
    print(f"\nHot paths by run size (learnings; candidates = learnings/10), median / p99 ms. Machine: "
          f"{os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}.")
    print(f"Store growth (with measuring): {'; '.join(loads)}")
    header = ["hot path"] + [f"{n:,}" for n in sizes] + [f"{sizes[-1]:,} / {sizes[0]:,}"]
    rows = []
    for name, by_size in results.items():
        cells = [name]
        for n in sizes:
            v = by_size[n]
            cells.append(f"{statistics.median(v) * 1000:.1f} / {pct(v, .99) * 1000:.1f}")
        cells.append(f"{statistics.median(by_size[sizes[-1]]) / statistics.median(by_size[sizes[0]]):.2f}x")
        rows.append(cells)
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    print("  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(header, widths))))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))


if __name__ == "__main__":
    main()
