"""Start-up costs next to their anchors, measured in the same loop: prints a table; asserts nothing.

    .venv/bin/python benchmarks/bench_startup.py [--repeats 7] [--compare OTHER_CHECKOUT] [--only cli]

- `evoteam --help`, next to `python -c "import click"` (the CLI's own floor);
- the local read-only commands `kb runs`, `team status` and `bench list` on a store with a run,
  next to `python -c "import pydantic"` (what reading the store with its models costs at least)
  and `python -c pass`; with `--compare DIR`, the same commands run from another checkout's
  code (e.g. main) in the same loop, with the ratio of this code to that one;
- each MCP server over stdio, spawn → tools listed, next to `python -c "import mcp"` (the SDK's
  import alone): on the plain path (`EVOTEAM_FAST_START=0`), behind the fast-start front with no
  manifest cached (cold: the first start after a change), and with a warm manifest (the front
  answers from it while the real server imports); and, warm, spawn → first tool call answered
  (that call waits for the real server's import);
- the plugin's hook launcher on an unknown event (Python start + launcher: the hooks' floor).

Runs are interleaved (one of each per round) so that a change in the machine's load hits every
row alike; the ratio column divides each median by its anchor's, and the spread column gives the
middle half of the runs (25th–75th percentile), so a ratio can be read against its noise.
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

from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from evoteam import python_module_args
from evoteam.servers.front import manifest_dir

ROOT = Path(__file__).resolve().parents[1]
EVOTEAM = Path(sys.executable).with_name("evoteam")
SERVERS = ("knowledge", "team", "retrieval", "bench")


def spawn(cmd: list[str], env: dict[str, str], stdin: str = "", cwd: str | Path | None = None) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, env=env, input=stdin, capture_output=True, text=True, timeout=120, cwd=cwd)
    return time.perf_counter() - t


# The local reads a newcomer runs first (issue 24: each should answer within 0.2 s).
LOCAL_READS = (("kb", "runs"), ("team", "status"), ("bench", "list"))


def cli_rows(py: str, env: dict[str, str], code: Path | None, label: str, anchor_of) -> dict:
    """Rows for LOCAL_READS run as `python -m evoteam` from `code` (a checkout whose folder
    comes first on the path; None: this one)."""
    rows = {}
    for args in LOCAL_READS:
        name = f"{label}evoteam {' '.join(args)}"
        rows[name] = (anchor_of(args), lambda a=args: spawn([py, "-m", "evoteam", *a], env, cwd=code or ROOT))
    return rows


def seed_run(py: str, env: dict[str, str]) -> None:
    """A store with one active run, so `team status` reads it as a user's would."""
    subprocess.run([py, "-m", "evoteam", "kb", "start", "a start-up measurement"], env=env, cwd=ROOT,
                   capture_output=True, text=True, timeout=120, check=True)


# A call per server that needs nothing but the store (an error answer is an answer).
FIRST_CALLS = {"knowledge": ("list_runs", {}), "team": ("get_team", {"run_id": "run_missing"}),
               "retrieval": ("retrieval_stats", {}), "bench": ("list_kits", {})}


def tools_listed(server: str, env: dict[str, str], first_call: bool = False, cold: bool = False) -> float:
    """Spawn → tools listed (or → the first tool call answered). `cold` forgets the server's
    fast-start manifests first."""
    if cold:
        for path in manifest_dir(env).glob(f"{server}-*.json"):
            path.unlink()

    async def once() -> float:
        params = StdioServerParameters(command=sys.executable,
                                       args=python_module_args("evoteam.cli", "serve", server), env=env)
        # The servers' own logs (e.g. the team call's "no run" error) stay out of the table.
        with open(os.devnull, "w") as quiet:
            t = time.perf_counter()
            async with Client(stdio_client(params, errlog=quiet)) as client:
                await client.list_tools()
                if first_call:
                    await client.call_tool(*FIRST_CALLS[server])
                return time.perf_counter() - t

    return asyncio.run(once())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--compare", type=Path, help="another checkout: its local reads run beside ours")
    parser.add_argument("--only", choices=["all", "cli"], default="all",
                        help="cli: only the local reads and their anchors (no MCP servers)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="evoteam-startup-") as tmp:
        env = {**os.environ, "EVOTEAM_DB": str(Path(tmp) / "kb.db"), "HOME": tmp,
               "EVOTEAM_HOOK_LOG": str(Path(tmp) / "hooks.log"), "EVOTEAM_PYTHON": sys.executable,
               "CLAUDE_PROJECT_DIR": tmp}
        env.pop("EVOTEAM_KNOWLEDGE_URL", None)
        env.pop("EVOTEAM_HOME", None)  # manifests go to the temporary HOME
        env.pop("EVOTEAM_FAST_START", None)
        plain = {**env, "EVOTEAM_FAST_START": "0"}
        py = sys.executable
        seed_run(py, env)
        local = cli_rows(py, env, None, "", lambda a: "python -c 'import pydantic'")
        if args.compare:
            local.update(cli_rows(py, env, args.compare.resolve(), f"({args.compare.name}) ",
                                  lambda a: f"evoteam {' '.join(a)}"))
        rows: dict[str, tuple[str, callable]] = {
            "python -c 'import pydantic'": ("", lambda: spawn([py, "-c", "import pydantic"], env)),
            **local,
            "python -c 'import click'": ("", lambda: spawn([py, "-c", "import click"], env)),
            "evoteam --help": ("python -c 'import click'", lambda: spawn([str(EVOTEAM), "--help"], env)),
            "python -c 'import mcp'": ("", lambda: spawn([py, "-c", "import mcp"], env)),
            **{row: spec for s in SERVERS for row, spec in {
                f"serve {s}, plain: spawn → tools listed": (
                    "python -c 'import mcp'", lambda s=s: tools_listed(s, plain)),
                f"serve {s}, cold manifest: spawn → tools listed": (
                    "python -c 'import mcp'", lambda s=s: tools_listed(s, env, cold=True)),
                f"serve {s}, warm manifest: spawn → tools listed": (
                    "python -c 'import mcp'", lambda s=s: tools_listed(s, env)),
                f"serve {s}, warm manifest: spawn → first call answered": (
                    "python -c 'import mcp'", lambda s=s: tools_listed(s, env, first_call=True)),
            }.items()},
            "python -c pass": ("", lambda: spawn([py, "-c", "pass"], env)),
            "hook launcher, unknown event (hooks' floor)": (
                "python -c pass", lambda: spawn([str(ROOT / "hooks" / "evoteam-launch"), "hook", "none"],
                                                {**env, "EVOTEAM_HOOK_WARM": "0"}, "{}")),
        }
        if args.only == "cli":
            keep = {"python -c pass", "python -c 'import pydantic'", *local}
            rows = {name: spec for name, spec in rows.items() if name in keep}
        times: dict[str, list[float]] = {name: [] for name in rows}
        if args.only != "cli":
            tools_listed("knowledge", env)  # the store file exists (seed_run): later starts only open it
        for _ in range(args.repeats):
            for name, (_, run) in rows.items():
                times[name].append(run())
    load = os.getloadavg()
    print(f"\nStart-up, median / max of {args.repeats} (ms). Machine: {os.cpu_count()} CPUs, load average "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}.")
    width = max(len(n) for n in rows)
    print(f"{'what':<{width}}  {'median':>7}  {'spread':>11}  {'max':>7}  ratio to anchor")
    print(f"{'-' * width}  {'-' * 7}  {'-' * 11}  {'-' * 7}  {'-' * 30}")
    for name, (anchor, _) in rows.items():
        med = statistics.median(times[name])
        ratio = f"{med / statistics.median(times[anchor]):.2f}x {anchor}" if anchor else "(anchor)"
        print(f"{name:<{width}}  {med * 1000:7.0f}  {spread(times[name]):>11}  {max(times[name]) * 1000:7.0f}  {ratio}")


def spread(samples: list[float]) -> str:
    """The middle half of the runs, in ms (25th–75th percentile)."""
    if len(samples) < 4:
        return f"{min(samples) * 1000:.0f}-{max(samples) * 1000:.0f}"
    q1, _, q3 = statistics.quantiles(samples, n=4)
    return f"{q1 * 1000:.0f}-{q3 * 1000:.0f}"


if __name__ == "__main__":
    main()
