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


async def newest_history(store: KnowledgeStore, run_id: str, n: int = 50) -> list:
    """The run's newest ``n`` history entries, oldest first (the store lists them oldest first: a
    reflection on the version that just ended is among the newest), read as one bounded page
    however long the history is."""
    from evoteam.servers.knowledge.rows import encode_cursor

    total = (await store.list_history(run_id, limit=1)).total
    return (await store.list_history(run_id, limit=n, cursor=encode_cursor(total - n) if total > n else None)).items
