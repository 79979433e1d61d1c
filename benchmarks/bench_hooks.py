"""Hook latency: prints a table; asserts nothing.

    .venv/bin/python benchmarks/bench_hooks.py [--repeats N]

Each hook is run the way Claude Code runs it — `hooks/evoteam-launch hook <event>` as a fresh
process with the event's JSON on stdin — against a real store with an active run, and timed
from spawn to exit. The brief asks for hooks well under a second.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evoteam.plugin import state  # noqa: E402
from tests.plugin.test_hooks import _design, _transcript, base_input, seed  # noqa: E402

LAUNCHER = ROOT / "hooks" / "evoteam-launch"


def time_hook(event: str, payload: dict, env: dict[str, str], repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run([str(LAUNCHER), "hook", event], input=json.dumps(payload), text=True, env=env,
                       capture_output=True, timeout=60)
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="evoteam-hooks-") as tmp:
        tmp = Path(tmp)
        project = tmp / "project"
        project.mkdir()
        env = {**os.environ, "EVOTEAM_DB": str(tmp / "kb.db"), "EVOTEAM_HOOK_LOG": str(tmp / "hooks.log"),
               "EVOTEAM_PYTHON": sys.executable, "CLAUDE_PROJECT_DIR": str(project)}
        for var in ("EVOTEAM_KNOWLEDGE_URL", "EVOTEAM_RUN", "EVOTEAM_AUTOCONTINUE"):
            env.pop(var, None)
        os.environ.update({"EVOTEAM_DB": env["EVOTEAM_DB"]})
        run_id = seed(tmp / "kb.db")
        prompt = _design(tmp / "kb.db", project, run_id)
        state.activate(project, run_id, version=1, session_id="sess-1")
        transcript = _transcript(tmp / "agent.jsonl", prompt)
        cases = [
            ("session-start", base_input(project, "SessionStart", source="startup")),
            ("subagent-stop", base_input(project, "SubagentStop", agent_id="a1", agent_type="evoteam:team-member",
                                         agent_transcript_path=str(transcript),
                                         last_assistant_message="REPORT: profiled it", stop_hook_active=False)),
            ("stop", base_input(project, "Stop", background_tasks=[], stop_hook_active=False)),
            ("pre-compact", base_input(project, "PreCompact", trigger="auto")),
        ]
        rows = []
        for event, payload in cases:
            times = time_hook(event, payload, env, args.repeats)
            rows.append((event, f"{statistics.median(times) * 1000:7.0f}", f"{max(times) * 1000:7.0f}"))
        python_only = time_hook("unknown-event", {}, env, args.repeats)
        rows.append(("(python start + launcher)", f"{statistics.median(python_only) * 1000:7.0f}",
                     f"{max(python_only) * 1000:7.0f}"))
    print(f"\nHook latency, spawn to exit (ms), {args.repeats} runs each, active run in a real store")
    print(f"{'hook':<26} {'median':>7} {'max':>7}")
    print(f"{'-' * 26} {'-' * 7} {'-' * 7}")
    for row in rows:
        print(f"{row[0]:<26} {row[1]:>7} {row[2]:>7}")


if __name__ == "__main__":
    main()
