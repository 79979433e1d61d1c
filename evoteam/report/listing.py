"""Whole listings read page by page from the store, for the report's readers."""

from __future__ import annotations

from evoteam.servers.knowledge.store import KnowledgeStore

_PAGE = 100


async def all_candidates(store: KnowledgeStore, run_id: str) -> list:
    """Every candidate of a run (the store hands them out a page at a time)."""
    out, cursor = [], None
    while True:
        page = await store.list_candidates(run_id, limit=_PAGE, cursor=cursor)
        out.extend(page.items)
        cursor = page.next_cursor
        if not cursor:
            return out
