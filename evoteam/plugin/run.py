"""The fast entry the hook scripts use: `python -m evoteam.plugin.run <event>`.

Reads the hook input (JSON) on stdin, runs the hook, prints its output (JSON) on stdout, and
always exits 0: a hook's own failure is logged to `~/.evoteam/logs/hooks.log` (or
`EVOTEAM_HOOK_LOG`) and never blocks the session. `EVOTEAM_HOOKS=off` disables every hook.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path


def log_path() -> Path:
    if os.environ.get("EVOTEAM_HOOK_LOG"):
        return Path(os.environ["EVOTEAM_HOOK_LOG"])
    return Path.home() / ".evoteam" / "logs" / "hooks.log"


def log(line: str) -> None:
    try:
        path = log_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as fh:
            fh.write(time.strftime("%Y-%m-%dT%H:%M:%S ") + line.rstrip() + "\n")
    except OSError:
        pass


def main(argv: list[str] | None = None, stdin=None, stdout=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    event = argv[0] if argv else ""
    if os.environ.get("EVOTEAM_HOOKS", "").lower() in ("0", "off", "false", "no"):
        return 0
    start = time.perf_counter()
    try:
        from evoteam.plugin.hooks import HOOKS

        fn = HOOKS.get(event)
        if fn is None:
            log(f"{event or '(none)'}: unknown hook event; known: {', '.join(HOOKS)}")
            return 0
        raw = stdin.read()
        hook_input = json.loads(raw) if raw.strip() else {}
        out = fn(hook_input if isinstance(hook_input, dict) else {})
        if out:
            stdout.write(json.dumps(out))
            stdout.flush()
        if os.environ.get("EVOTEAM_HOOK_DEBUG"):
            log(f"{event}: ok in {time.perf_counter() - start:.3f}s -> {json.dumps(out)[:300]}")
    except BaseException as exc:  # noqa: BLE001 - a hook must never fail the session
        if isinstance(exc, KeyboardInterrupt):
            return 0
        log(f"{event}: failed after {time.perf_counter() - start:.3f}s: {type(exc).__name__}: {exc}\n"
            + traceback.format_exc())
    return 0


if __name__ == "__main__":
    sys.exit(main())
