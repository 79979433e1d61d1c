"""Running one of the four servers over stdio, on the engineer's machine, where the servers can
lend each other what only that machine has.

The knowledge server sits below the bench (the bench records into it), so it cannot ask the bench
anything itself; here, above both, it is handed the bench's kits: a run of a kit takes the kit's
direction, and a run started the other way (a model thinking "minimise the time" on a speedup
kit) is refused by start_run, before anything is built on it, rather than by the first evaluation.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from evoteam.config import Settings


def kit_direction(settings: Settings) -> Callable[[str], str | None]:
    """The direction of a kit found here by name or folder, or None (not found, or unreadable:
    the shared server's caller may name a kit that lives elsewhere)."""

    def direction(name: str) -> str | None:
        from evoteam.errors import DomainError
        from evoteam.servers.bench.formats.kits import find_kit

        try:
            return find_kit(settings, name).manifest.direction
        except DomainError:
            return None
        except Exception:  # noqa: BLE001 - advice only: a broken kit folder must not stop start_run
            return None

    return direction


def serve_stdio(server: str, settings: Settings) -> None:
    """Run ``server`` (knowledge, team, retrieval or bench) over stdio until its client leaves."""
    module = importlib.import_module(f"evoteam.servers.{server}.server")
    if server == "knowledge":
        module.serve_stdio(settings, kit_direction=kit_direction(settings))
    else:
        module.serve_stdio(settings)
