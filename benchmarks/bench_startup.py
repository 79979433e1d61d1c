"""Start-up costs next to their anchors, measured in the same loop: prints a table; asserts nothing.

    .venv/bin/python benchmarks/bench_startup.py [--repeats 7]

- `evoteam --help`, next to `python -c "import click"` (the CLI's own floor);
- each MCP server over stdio, spawn → tools listed, next to `python -c "import mcp"` (the SDK's
  import alone): on the plain path (`EVOTEAM_FAST_START=0`), behind the fast-start front with no
  manifest cached (cold: the first start after a change), and with a warm manifest (the front
  answers from it while the real server imports); and, warm, spawn → first tool call answered
  (that call waits for the real server's import);
- the plugin's hook launcher on an unknown event (Python start + launcher: the hooks' floor).

Runs are interleaved (one of each per round) so that a change in the machine's load hits every
row alike; the ratio column divides each median by its anchor's.
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


def spawn(cmd: list[str], env: dict[str, str], stdin: str = "") -> float:
    t = time.perf_counter()
    subprocess.run(cmd, env=env, input=stdin, capture_output=True, text=True, timeout=120)
    return time.perf_counter() - t


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
        rows: dict[str, tuple[str, callable]] = {
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
        times: dict[str, list[float]] = {name: [] for name in rows}
        tools_listed("knowledge", env)  # creates the store file: later starts only open it
        for _ in range(args.repeats):
            for name, (_, run) in rows.items():
                times[name].append(run())
    load = os.getloadavg()
    print(f"\nStart-up, median / max of {args.repeats} (ms). Machine: {os.cpu_count()} CPUs, load average "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}.")
    width = max(len(n) for n in rows)
    print(f"{'what':<{width}}  {'median':>7}  {'max':>7}  ratio to anchor")
    print(f"{'-' * width}  {'-' * 7}  {'-' * 7}  {'-' * 30}")
    for name, (anchor, _) in rows.items():
        med = statistics.median(times[name])
        ratio = f"{med / statistics.median(times[anchor]):.2f}x {anchor}" if anchor else "(anchor)"
        print(f"{name:<{width}}  {med * 1000:7.0f}  {max(times[name]) * 1000:7.0f}  {ratio}")


if __name__ == "__main__":
    main()
