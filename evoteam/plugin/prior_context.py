"""The session-start hook's view of prior work (knowledge/prior.py): what a second engineer's
session sees first on a shared store — the project's earlier runs when no run is active in the
clone, and the other runs of the active run's kit beside it."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any


async def other_runs_of_kit(store, run, max_chars: int) -> str:
    """What the kit's other runs found, rendered in at most `max_chars` ('' when none)."""
    from evoteam.servers.knowledge.prior import gather_prior_work, render_prior

    if not run.kit or run.status != "active":
        return ""
    work = await gather_prior_work(store, run.kit, exclude={run.id}, direction=run.direction)
    return render_prior(work, max_chars)


def shared_prior_context(project: Path, settings_of: Callable[[Path], Any], actor_of: Callable[..., Any],
                         run: Callable[[Any], Any], max_chars: int = 4000) -> str | None:
    """No run is active in this clone: on a shared knowledge server, the project's earlier runs.
    A local store stays quiet, and cheap: nothing is imported or opened for it."""
    if not (os.environ.get("EVOTEAM_KNOWLEDGE_URL") or (project / "evoteam.toml").is_file()):
        return None
    settings = settings_of(project)
    if not settings.remote:
        return None

    async def go():
        from evoteam.servers.knowledge.connect import open_store
        from evoteam.servers.knowledge.prior import gather_prior_work, render_prior

        async with open_store(settings, actor_of(settings, "hook")) as store:
            return render_prior(await gather_prior_work(store, None), max_chars)

    text = run(go())
    if not text:
        return None
    return ("evoteam: no run is active in this clone, but the project's shared knowledge store holds "
            "earlier work.\n" + text + "\n\nTo build on it: /kernel-loop <kit> or /evolve-team <kit> "
            "(start_run returns the kit's prior work; parent_id may name a candidate above).")
