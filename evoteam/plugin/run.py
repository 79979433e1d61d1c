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

from evoteam.plugin.hooklog import log
from evoteam.plugin.hookrun import run_hook
from evoteam.plugin.state import ORIGIN_VAR


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
