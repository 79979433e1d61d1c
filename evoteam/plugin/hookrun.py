"""Running one hook in this process: what the hook entry does when no warm process serves it,
and what the warm process does for each request. Imports the hooks only when a hook runs.
"""

from __future__ import annotations

import json
import os
import time

from evoteam.plugin.hooklog import log


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
