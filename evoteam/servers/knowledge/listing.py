"""Whole listings read page by page, for readers that need every item of a kind (the report,
re-measurement, the paired rounds a version gain pools)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from evoteam.servers.knowledge.models import ArtifactInfo
from evoteam.servers.knowledge.store import KnowledgeStore

_PAGE = 100


async def _every(fetch: Callable[[str | None], Awaitable]) -> list:
    """Every item of a paged listing: ``fetch(cursor)`` returns one page."""
    out, cursor = [], None
    while True:
        page = await fetch(cursor)
        out.extend(page.items)
        cursor = page.next_cursor
        if not cursor:
            return out


async def all_candidates(store: KnowledgeStore, run_id: str) -> list:
    """Every candidate of a run (the store hands them out a page at a time)."""
    return await _every(lambda cursor: store.list_candidates(run_id, limit=_PAGE, cursor=cursor))


async def all_artifacts(store: KnowledgeStore, run_id: str, kind: str) -> list[ArtifactInfo]:
    """Every artifact of ``kind`` in a run."""
    return await _every(lambda cursor: store.list_artifacts(run_id, kind=kind, limit=_PAGE, cursor=cursor))
