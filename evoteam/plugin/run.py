"""The fast entry the hook scripts use: `python -m evoteam.plugin.run <event>`.

Reads the hook input (JSON) on stdin, runs the hook, prints its output (JSON) on stdout, and
always exits 0: a hook's own failure is logged to `~/.evoteam/logs/hooks.log` (or
`EVOTEAM_HOOK_LOG`) and never blocks the session. `EVOTEAM_HOOKS=off` disables every hook.

The hook runs in the warm hook process when one serves this environment (`warm.py`: the
imports are already done there), else here. This module imports only the standard library
until it has to run a hook itself.
"""

from __future__ import annotations

import json
import os
import sys
import time

from evoteam.plugin.state import ORIGIN_VAR


def log_path():
    from pathlib import Path

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


def preload() -> None:
    """Import what a hook with an active run needs (the warm process does this once)."""
    import asyncio  # noqa: F401

    import evoteam.plugin.hooks  # noqa: F401
    import evoteam.servers.knowledge.connect  # noqa: F401
    import evoteam.servers.knowledge.models  # noqa: F401
    import evoteam.servers.team.core  # noqa: F401
    import evoteam.servers.team.cost  # noqa: F401
    import evoteam.servers.team.materialise  # noqa: F401


def run_hook(event: str, raw: str, hooks: dict | None = None) -> dict | None:
    """Run one hook on its raw input; its output, or None. Never raises: failures are logged."""
    start = time.perf_counter()
    try:
        if hooks is None:
            from evoteam.plugin.hooks import HOOKS as hooks
        fn = hooks.get(event)
        if fn is None:
            log(f"{event or '(none)'}: unknown hook event; known: {', '.join(hooks)}")
            return None
        hook_input = json.loads(raw) if raw.strip() else {}
        out = fn(hook_input if isinstance(hook_input, dict) else {})
        if os.environ.get("EVOTEAM_HOOK_DEBUG"):
            log(f"{event}: ok in {time.perf_counter() - start:.3f}s (pid {os.getpid()}) -> {json.dumps(out)[:300]}")
        return out or None
    except BaseException as exc:  # noqa: BLE001 - a hook must never fail the session
        if isinstance(exc, KeyboardInterrupt):
            return None
        import traceback

        log(f"{event}: failed after {time.perf_counter() - start:.3f}s: {type(exc).__name__}: {exc}\n"
            + traceback.format_exc())
        return None


def main(argv: list[str] | None = None, stdin=None, stdout=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    event = argv[0] if argv else ""
    if os.environ.get("EVOTEAM_HOOKS", "").lower() in ("0", "off", "false", "no"):
        return 0
    if os.environ.get(ORIGIN_VAR):
        return 0  # a session evoteam started: every hook leaves it alone (hooks.not_in_own_sessions)
    try:
        raw = stdin.read()
    except (OSError, ValueError) as exc:
        log(f"{event}: could not read the hook input: {exc}")
        return 0
    handled, out = False, None
    try:
        from evoteam.plugin import warm

        if warm.enabled():
            handled, out = warm.ask(event, raw)
    except Exception as exc:  # noqa: BLE001 - the warm path is an optimisation: fall back
        log(f"{event}: warm hook process unusable ({type(exc).__name__}: {exc}); running in-process")
        handled = False
    if not handled:
        out = run_hook(event, raw)
    if out:
        try:
            stdout.write(json.dumps(out))
            stdout.flush()
        except (OSError, ValueError):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
