"""Whole listings read page by page, for readers that need every item of a kind."""

from __future__ import annotations

from evoteam.servers.knowledge.models import ArtifactInfo
from evoteam.servers.knowledge.store import KnowledgeStore

_PAGE = 100


async def all_artifacts(store: KnowledgeStore, run_id: str, kind: str) -> list[ArtifactInfo]:
    """Every artifact of ``kind`` in a run (the store hands them out a page at a time)."""
    out, cursor = [], None
    while True:
        page = await store.list_artifacts(run_id, kind=kind, limit=_PAGE, cursor=cursor)
        out.extend(page.items)
        cursor = page.next_cursor
        if not cursor:
            return out
