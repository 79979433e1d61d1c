"""A run's best with and without the rank indexes, side by side in one run: prints a table.

Every ranking orders by `spread_unknown`, then `rank_score` (readsql.rank_order), and
`candidates_rank_min` / `candidates_rank_max` (knowledge.verified 3) hold that order per
direction. This builds one SQLite store with a run of N candidates (a mix of measured scores and
scores from too few runs, some failed), then times `get_run` (its best) and `best_candidates`
(k=5) with the indexes and with the single index of rank_score they replaced, alternating the two
layouts several times so both see the same machine. SQLite keeps no statistics here (evoteam never
runs ANALYZE), as in a store people use.

    .venv/bin/python benchmarks/bench_rank_index.py [--candidates 40000] [--alternations 3] [--calls 15]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from evoteam.codehash import code_hash
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.models import CandidateCreate, RunCreate
from evoteam.servers.knowledge.store import Actor

NEW = ["CREATE INDEX candidates_rank_min ON candidates(run_id, status, verified, flagged, spread_unknown, rank_score)",
       "CREATE INDEX candidates_rank_max ON candidates(run_id, status, verified, flagged, spread_unknown, "
       "rank_score DESC)"]
OLD = ["CREATE INDEX candidates_rank ON candidates(run_id, status, rank_score)"]
DROP = {"new": ["DROP INDEX IF EXISTS candidates_rank_min", "DROP INDEX IF EXISTS candidates_rank_max"],
        "old": ["DROP INDEX IF EXISTS candidates_rank"]}


async def build(db: Path, n: int, direction: str) -> str:
    async with LocalKnowledgeStore.open(db, Actor(user="bench", verifier=True)) as kb:
        run = await kb.start_run(RunCreate(goal="rank index", kit="k", direction=direction, x0=1.0))
        first = await kb.record_candidate(CandidateCreate(
            run_id=run.id, code="a = 0\n", code_hash=code_hash("a = 0\n"), status="PASSED", score=1.0,
            samples={"program": [1.0, 1.02, 0.98, 1.0, 1.01]}, verified=True))
    conn = sqlite3.connect(db)
    cols = [r[1] for r in conn.execute("PRAGMA table_info(candidates)")]
    base = dict(zip(cols, conn.execute("SELECT * FROM candidates WHERE id = ?", (first.id,)).fetchone()))
    rng, rows = random.Random(1), []
    for i in range(n):
        score, unknown = rng.uniform(0.5, 2.0), rng.random() < 0.3
        lo = score if unknown else score - rng.uniform(0.01, 0.2)
        hi = score if unknown else score + rng.uniform(0.01, 0.2)
        row = dict(base, id=f"cand_{i:08d}", score=score, score_lo=lo, score_hi=hi,
                   rank_score=lo if direction == "maximize" else hi, spread_unknown=int(unknown),
                   status="PASSED" if rng.random() < 0.8 else "RUNTIME_ERROR", code_hash=f"h{i}",
                   created_at=f"2026-12-04T00:{i // 6000 % 60:02d}:{i % 60:02d}.{i:06d}+00:00",
                   samples=json.dumps({"program": [score] * (1 if unknown else 5)}))
        rows.append(tuple(row[c] for c in cols))
    conn.executemany(f"INSERT INTO candidates ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})", rows)
    conn.commit()
    conn.close()
    return run.id


def layout(db: Path, which: str) -> None:
    conn = sqlite3.connect(db)
    for sql in DROP["old"] + DROP["new"] + (NEW if which == "new" else OLD):
        conn.execute(sql)
    conn.commit()
    conn.close()


async def timed(db: Path, run_id: str, calls: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    async with LocalKnowledgeStore.open(db, Actor(user="bench")) as kb:
        for name, call in (("get_run", lambda: kb.get_run(run_id)), ("best_candidates", lambda: kb.best_candidates(run_id, k=5))):
            await call()
            out[name] = []
            for _ in range(calls):
                t = time.perf_counter()
                await call()
                out[name].append((time.perf_counter() - t) * 1000)
    return out


def quartiles(values: list[float]) -> str:
    q = statistics.quantiles(values, n=4)
    return f"{statistics.median(values):8.2f} ({q[0]:.2f}-{q[2]:.2f})"


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--candidates", type=int, default=40_000)
    parser.add_argument("--alternations", type=int, default=3)
    parser.add_argument("--calls", type=int, default=15)
    args = parser.parse_args()
    print(f"{args.candidates} candidates in one run; ms per call, median (quartiles) of "
          f"{args.alternations} x {args.calls} calls per layout, the layouts alternated")
    print(f"{'direction':<10} {'call':<16} {'old index':>22} {'new indexes':>22} {'old / new':>10}")
    for direction in ("maximize", "minimize"):
        db = Path(tempfile.mkdtemp(prefix="evoteam-rank-")) / "kb.db"
        run_id = await build(db, args.candidates, direction)
        got: dict[str, dict[str, list[float]]] = {"old": {}, "new": {}}
        for _ in range(args.alternations):
            for which in ("old", "new"):
                layout(db, which)
                for name, values in (await timed(db, run_id, args.calls)).items():
                    got[which].setdefault(name, []).extend(values)
        for name in got["new"]:
            old, new = got["old"][name], got["new"][name]
            print(f"{direction:<10} {name:<16} {quartiles(old):>22} {quartiles(new):>22} "
                  f"{statistics.median(old) / statistics.median(new):>9.1f}x")


if __name__ == "__main__":
    asyncio.run(main())
