"""Wall time of the commands a newcomer types first: every `--help`, and the local read-only
commands on a small store (a run with candidates, a learning, a history entry, a token). Prints a
table; asserts nothing (tests/test_cli_quick.py counts the imports instead).

    .venv/bin/python benchmarks/bench_cli.py [--repeats 10] [--normal]

Each command runs as a new process (`.venv/bin/evoteam ...`), interleaved with the others and
with two anchors — `python -c pass` and `python -c 'import click'` (the CLI's floor) — so a
change of the machine's load hits every row alike. Columns: the median, the middle half of the
runs (25th–75th percentile) and the slowest run, in ms, and the median's ratio to click's import
(a ratio survives the machine's load; the figures do not). `--normal` adds each read once more with
the quick reads off (EVOTEAM_QUICK_READS=0: the store's full path; for `bench list` and
`describe`, the kits loaded instead of the kit index), for the difference.
Issue 24's target: every row within 200 ms on a quiet machine (about 3.3× click's import there).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EVOTEAM = Path(sys.executable).with_name("evoteam")

HELPS = [("--help",), ("kb", "--help"), ("token", "--help"), ("team", "--help"), ("bench", "--help"),
         ("doctor", "--help"), ("report", "--help"), ("kb", "runs", "--help")]


def reads(run_id: str) -> list[tuple[str, ...]]:
    return [("kb", "runs"), ("kb", "candidates", run_id), ("kb", "history", run_id), ("kb", "learnings", run_id),
            ("token", "list"), ("team", "status"), ("bench", "list"), ("bench", "describe", "rmsnorm_cpu"),
            ("bench", "queue")]


def seed(env: dict[str, str]) -> str:
    """A store like a newcomer's after a first session: one run, a few candidates (two measured
    and ranked), a learning, a history entry, a token."""
    os.environ.update(env)
    from evoteam.servers.knowledge.local import LocalKnowledgeStore
    from evoteam.servers.knowledge.models import CandidateCreate, HistoryEntryCreate, LearningCreate, RunCreate
    from evoteam.servers.knowledge.store import Actor

    async def go() -> str:
        async with LocalKnowledgeStore.open(env["EVOTEAM_DB"], Actor.local(verifier=True)) as store:
            run = await store.start_run(RunCreate(goal="make rmsnorm fast", kit="rmsnorm_cpu", x0=1.0,
                                                  best_known=3.0))
            for i, score in enumerate((1.2, 1.9, None)):
                await store.record_candidate(CandidateCreate(
                    run_id=run.id, code=f"def f():\n    return {i}\n", status="PASSED" if score else "RUNTIME_ERROR",
                    score=score, verified=True, notes=f"try {i}"))
            await store.add_learning(LearningCreate(run_id=run.id, text="fusing the reduction pays"))
            await store.add_history(HistoryEntryCreate(run_id=run.id, diagnosis="stuck on memory bandwidth"))
            return run.id

    run_id = asyncio.run(go())
    subprocess.run([str(EVOTEAM), "token", "add", "newcomer"], env=env, capture_output=True, check=True)
    return run_id


def spawn(args: tuple[str, ...], env: dict[str, str]) -> float:
    t = time.perf_counter()
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)
    elapsed = time.perf_counter() - t
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
    return elapsed


def spread(samples: list[float]) -> str:
    """The middle half of the runs, in ms (25th–75th percentile)."""
    if len(samples) < 4:
        return f"{min(samples) * 1000:.0f}-{max(samples) * 1000:.0f}"
    q1, _, q3 = statistics.quantiles(samples, n=4)
    return f"{q1 * 1000:.0f}-{q3 * 1000:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--normal", action="store_true", help="also each read on the store's full path")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="evoteam-cli-") as tmp:
        env = {**os.environ, "EVOTEAM_DB": str(Path(tmp) / "kb.db"), "HOME": tmp, "EVOTEAM_HOME": tmp}
        for var in ("EVOTEAM_KNOWLEDGE_URL", "EVOTEAM_QUICK_READS"):
            env.pop(var, None)
        run_id = seed(env)
        py = sys.executable
        rows: dict[str, tuple[str, ...]] = {"python -c pass": (py, "-c", "pass"),
                                            "python -c 'import click'": (py, "-c", "import click")}
        rows.update({f"evoteam {' '.join(a)}": (str(EVOTEAM), *a) for a in HELPS})
        rows.update({f"evoteam {' '.join(a)}": (str(EVOTEAM), *a) for a in reads(run_id)})
        normal = {**env, "EVOTEAM_QUICK_READS": "0"}
        if args.normal:
            rows.update({f"evoteam {' '.join(a)} (normal path)": (str(EVOTEAM), *a)
                         for a in reads(run_id) if a[0] in ("kb", "token") or a[1] in ("list", "describe")})
        times: dict[str, list[float]] = {name: [] for name in rows}
        for _ in range(args.repeats):
            for name, cmd in rows.items():
                times[name].append(spawn(cmd, normal if name.endswith("(normal path)") else env))
    load = os.getloadavg()
    print(f"\nCommand wall time, {args.repeats} runs each (ms). Machine: {os.cpu_count()} CPUs, load average "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}.")
    width = max(len(n) for n in rows)
    # A loaded machine stretches every row alike; the ratio to the CLI's floor (click's import)
    # reads the same on a quiet one, where that floor is about 60 ms.
    floor = statistics.median(times["python -c 'import click'"])
    print(f"{'command':<{width}}  {'median':>7}  {'spread':>11}  {'max':>7}  × import click")
    print(f"{'-' * width}  {'-' * 7}  {'-' * 11}  {'-' * 7}  {'-' * 14}")
    for name in rows:
        med = statistics.median(times[name])
        print(f"{name:<{width}}  {med * 1000:7.0f}  {spread(times[name]):>11}  {max(times[name]) * 1000:7.0f}  "
              f"{med / floor:14.2f}")


if __name__ == "__main__":
    main()
