"""Running one of the four servers over stdio, on the engineer's machine, where the servers can
lend each other what only that machine has.

The knowledge server sits below the bench (the bench records into it), so it cannot ask the bench
anything itself; here, above both, it is handed the bench's kits: a run of a kit takes the kit's
name and direction (and its x0 and best-known unless given), and a run started the other way (a
model thinking "minimise the time" on a speedup kit) is refused by start_run, before anything is
built on it, rather than by the first evaluation.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from evoteam.config import Settings
    from evoteam.servers.knowledge.prior import KitFacts


def local_kit(settings: Settings) -> Callable[[str], KitFacts | None]:
    """What a kit found here by name or folder says of itself, or None (not found, or unreadable:
    a caller may name a kit that lives on another machine)."""

    def facts(name: str) -> KitFacts | None:
        from evoteam.errors import DomainError
        from evoteam.servers.bench.formats.kits import find_kit
        from evoteam.servers.knowledge.prior import KitFacts

        try:
            kit = find_kit(settings, name)
        except DomainError:
            return None
        except Exception:  # noqa: BLE001 - advice only: a broken kit folder must not stop start_run
            return None
        m = kit.manifest
        return KitFacts(kit.name, m.direction, m.x0, m.best_known)

    return facts


def serve_stdio(server: str, settings: Settings) -> None:
    """Run ``server`` (knowledge, team, retrieval or bench) over stdio until its client leaves."""
    module = importlib.import_module(f"evoteam.servers.{server}.server")
    if server == "knowledge":
        module.serve_stdio(settings, local_kit=local_kit(settings))
    else:
        module.serve_stdio(settings)
