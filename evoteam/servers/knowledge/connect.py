"""Open the store a process should use: the local SQLite file, or a shared knowledge server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from evoteam.config import Settings
from evoteam.servers.knowledge.store import Actor, KnowledgeStore


@asynccontextmanager
async def open_store(settings: Settings, actor: Actor | None = None,
                     at_first_call: bool = False) -> AsyncIterator[KnowledgeStore]:
    """Yield a ready store: remote when `settings.knowledge_url` is set, else the local file.
    ``at_first_call``: a shared server is reached at the first call, not now (MCP servers: each
    tool then says why it cannot reach it, where an exit at start said nothing to the agent)."""
    actor = actor or Actor.local(default_project=settings.project)
    if settings.knowledge_url:
        from evoteam.servers.knowledge.remote import RemoteKnowledgeStore

        async with RemoteKnowledgeStore.connect(settings.knowledge_url, settings.token, actor,
                                                at_first_call=at_first_call) as store:
            yield store
    else:
        from evoteam.servers.knowledge.local import LocalKnowledgeStore

        async with LocalKnowledgeStore.open(settings.db, actor, max_artifact_bytes=settings.max_artifact_bytes) as store:
            yield store


def component_store(service: str, store: KnowledgeStore):
    """The `service` component store ("retrieval", "team") over `store`: built on the local
    file, or forwarded to the shared server that holds it."""
    from evoteam.servers.knowledge.local import LocalKnowledgeStore
    from evoteam.servers.knowledge.services import local_component

    if isinstance(store, LocalKnowledgeStore):
        return local_component(service, store)
    # Only a shared-server store reaches here; its client needs the MCP SDK (hooks do not).
    from evoteam.servers.knowledge.remote import remote_component_class

    return remote_component_class(service)(store)
