"""Where the time goes when one or two knowledge server replicas write to one PostgreSQL: prints
tables; asserts nothing.

    .venv/bin/python benchmarks/bench_replica_cpu.py                    # 16 clients, 320 writes, 2 reps
    .venv/bin/python benchmarks/bench_replica_cpu.py --clients 64 --writes 640

The same writes as bench_backends.py's throughput table (`add_learning` with an idempotency key,
over HTTP, each client its own run, through its `write_rate`), against one server and then two
replicas, alternately. Around each measurement, the CPU seconds (user + system, from
/proc/<pid>/stat) of every process involved: each replica, PostgreSQL (the postmaster and all its
backends), and the load generator (this process, whose MCP clients all run on one event loop);
and, from /proc/stat, how busy all the machine's CPUs were, so that what other programs took is
visible too. A component using about one core (CPU seconds / wall seconds ≈ 1.0) is a limit
when it is single-threaded (a replica, the load generator); the whole machine busy means the
machine is.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_backends import write_rate  # noqa: E402
from benchmarks.bench_knowledge import table  # noqa: E402
from tests.knowledge.conftest import KnowledgeServer, free_port, make_token  # noqa: E402
from tests.support.postgres import start_server, stop_server  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int, children_done: bool = False) -> float:
    """User + system CPU seconds of one process (and of its waited-for children, if asked)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = int(fields[11]) + int(fields[12]) + ((int(fields[13]) + int(fields[14])) if children_done else 0)
    return ticks / TICK


def tree(pid: int) -> list[int]:
    """`pid` and all its descendants, now."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


def machine_busy() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot, from /proc/stat."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    return (sum(values) - idle) / TICK, sum(values) / TICK


def snapshot(replicas: list[KnowledgeServer], postmaster: int) -> dict[str, float]:
    snap = {f"replica {i + 1}": sum(cpu_seconds(p) for p in tree(s.process.pid)) for i, s in enumerate(replicas)}
    # Backends live as long as the replicas' pooled connections; ones that exited are counted
    # in the postmaster's children's time.
    snap["PostgreSQL"] = sum(cpu_seconds(p) for p in tree(postmaster) if p != postmaster) + \
        cpu_seconds(postmaster, children_done=True)
    snap["load generator"] = cpu_seconds(os.getpid())
    snap["machine busy"], snap["machine total"] = machine_busy()
    snap["wall"] = time.monotonic()
    return snap


def measure(replicas: list[KnowledgeServer], postmaster: int, token: str, clients: int, writes: int) -> dict:
    before = snapshot(replicas, postmaster)
    rate = asyncio.run(write_rate(replicas, token, clients, max(2, writes // clients), clients))
    after = snapshot(replicas, postmaster)
    used = {k: after[k] - before[k] for k in before}
    used["rate"] = rate
    return used


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--writes", type=int, default=320, help="writes per measurement")
    parser.add_argument("--reps", type=int, default=2, help="alternating repetitions")
    args = parser.parse_args()
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    print(f"replica CPU accounting; {os.cpu_count()} CPUs; {args.clients} clients, each its own run, "
          f"{args.writes} writes per measurement; load average {load}")
    pg = start_server()
    try:
        with tempfile.TemporaryDirectory(prefix="evoteam-bench-") as tmp:
            url = pg.new_database()
            token = make_token(url, "bench", None)
            servers = [KnowledgeServer(db=url, port=free_port(), home=Path(tmp)).start() for _ in range(2)]
            for s in servers:  # keep reading what the servers log, or a full pipe would stall them
                threading.Thread(target=s.process.stderr.read, daemon=True).start()
            postmaster = int((pg.data / "postmaster.pid").read_text().split()[0])
            rows = []
            try:
                measure(servers, postmaster, token, args.clients, args.clients * 2)  # warm-up: pools, caches
                for rep in range(args.reps):
                    for n in (1, 2):
                        used = measure(servers[:n], postmaster, token, args.clients, args.writes)
                        wall = used["wall"]
                        cores = used["machine total"] / wall
                        rows.append((f"{n} server{'s' if n > 1 else ''}", rep + 1, f"{used['rate']:.0f}", f"{wall:.1f}",
                                     *(f"{used[k]:.1f} ({used[k] / wall:.2f})" if k in used else "–" for k in
                                       ("replica 1", "replica 2", "PostgreSQL", "load generator")),
                                     f"{used['machine busy']:.1f} ({used['machine busy'] / wall:.2f} of "
                                     f"{cores:.0f})"))
            finally:
                for s in servers:
                    s.kill()
    finally:
        stop_server(pg)
    table("CPU seconds during the writes (cores used = CPU s / wall s, in brackets)",
          ("replicas", "rep", "writes/s", "wall s", "replica 1", "replica 2", "PostgreSQL", "load generator",
           "whole machine busy"), rows)
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    print(f"\nload average after: {load}")


if __name__ == "__main__":
    main()
