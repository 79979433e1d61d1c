"""`evoteam kb migrate-store` round trip at scale: prints a table; asserts nothing.

    .venv/bin/python benchmarks/bench_migrate_store.py                      # 100k learnings
    .venv/bin/python benchmarks/bench_migrate_store.py --learnings 10000

A SQLite store holding one run of N learnings (written as add_learning writes them, with their
search entries) is moved to a fresh PostgreSQL database and back to a new SQLite file with the
real command, `evoteam kb migrate-store SRC DST --json`, each way timed from the outside. Each
command verifies its copy itself (rows and an order-independent SHA-256 per table); this script
then compares the three ends' reports table by table: the round trip is exact when the counts
and hashes are identical everywhere.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_knowledge import bulk_learnings, table  # noqa: E402
from evoteam.servers.knowledge.local import LocalKnowledgeStore  # noqa: E402
from evoteam.servers.knowledge.models import RunCreate  # noqa: E402
from evoteam.servers.knowledge.store import Actor  # noqa: E402


async def make_source(path: Path, n: int) -> None:
    async with LocalKnowledgeStore.open(path, Actor(user="bench")) as store:
        run = await store.start_run(RunCreate(goal="migrate"))
        await bulk_learnings(store, run.id, n)


def migrate(src: str, dst: str, home: Path) -> tuple[float, dict]:
    env = {**os.environ, "HOME": str(home), "EVOTEAM_HOME": str(home / ".evoteam")}
    env.pop("EVOTEAM_DB", None)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "evoteam.cli", "kb", "migrate-store", src, dst, "--json"],
                          env=env, capture_output=True, text=True, timeout=3600)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"migrate-store {src} -> {dst} failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return took, json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--learnings", type=int, default=100_000)
    args = parser.parse_args()

    from tests.support.postgres import start_server, stop_server

    load = " ".join(open("/proc/loadavg").read().split()[:3]) if os.path.exists("/proc/loadavg") else "?"
    print(f"kb migrate-store round trip; {args.learnings:,} learnings; {os.cpu_count()} CPUs; load average {load}")
    server = start_server()
    try:
        with tempfile.TemporaryDirectory(prefix="evoteam-migrate-") as tmp:
            tmp = Path(tmp)
            source, back = tmp / "source.db", tmp / "back.db"
            asyncio.run(make_source(source, args.learnings))
            url = server.new_database()
            there_s, there = migrate(str(source), url, tmp)
            back_s, home = migrate(url, str(back), tmp)
            ends = {"source": {t["table"]: (t["rows"], t["sha256"]) for t in there["tables"]},
                    "PostgreSQL": {t["table"]: (t["rows"], t["sha256"]) for t in home["tables"]}}
            identical = ends["source"] == ends["PostgreSQL"]
            rows = [("SQLite → PostgreSQL", f"{there['total_rows']:,}", len(there["tables"]), f"{there_s:.1f}",
                     f"{there['total_rows'] / there_s:,.0f}"),
                    ("PostgreSQL → SQLite", f"{home['total_rows']:,}", len(home["tables"]), f"{back_s:.1f}",
                     f"{home['total_rows'] / back_s:,.0f}")]
            table("kb migrate-store, each way (the command's own verification included)",
                  ("direction", "rows", "tables", "seconds", "rows/s"), rows)
            learnings = ends["source"].get("learnings", (0, ""))
            print(f"\nlearnings: {learnings[0]:,} rows, sha256 {learnings[1][:16]}… at every end")
            print(f"round trip identical (every table's count and hash): {'yes' if identical else 'NO'}")
            if not identical:
                for name in sorted(ends["source"]):
                    if ends["source"][name] != ends["PostgreSQL"].get(name):
                        print(f"  differs: {name}: {ends['source'][name]} vs {ends['PostgreSQL'].get(name)}")
    finally:
        stop_server(server)
    load = " ".join(open("/proc/loadavg").read().split()[:3]) if os.path.exists("/proc/loadavg") else "?"
    print(f"\nload average after: {load}")


if __name__ == "__main__":
    main()
