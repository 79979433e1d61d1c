"""Open MCP sessions over HTTP, bounded per token.

The SDK caps the sessions of one endpoint as a whole (10,000 by default) and reclaims a session
after 30 idle minutes. One token opening sessions as fast as it can therefore filled the whole
cap and locked every other user out for half an hour, at half a gigabyte of memory. Here each
token (the user and subject the verifier reports) may hold ``PER_TOKEN`` sessions of an endpoint
at a time; the endpoint as a whole holds ``TOTAL``; the agent endpoint reclaims a session idle
for ``AGENT_IDLE_S`` (clients start a new one on the 404, as the MCP specification asks).
"""

from __future__ import annotations

from typing import Any

PER_TOKEN = 32
TOTAL = 2_000
AGENT_IDLE_S = 10 * 60
# The /store endpoint's clients are evoteam's own servers (RemoteKnowledgeStore), which hold one
# session for their lifetime with the SDK's GET event stream open; a session with an open stream
# or a request in flight never counts as idle, however long the client waits between calls. The
# only gaps our clients leave are the stream's reconnection pauses (two tries, a second apart).
# So what idles here is a session whose client has gone, and it is reclaimed in minutes rather
# than holding a per-token slot for the SDK's half hour.
STORE_IDLE_S = 3 * 60


def _principal(requestor: Any) -> tuple:
    if not isinstance(requestor, dict):
        return (None,)
    return requestor.get("client_id"), requestor.get("subject"), requestor.get("issuer")


def limit_per_token(manager: Any, per_token: int = PER_TOKEN) -> None:
    """Refuse a new session (the SDK's 503 "Too many open sessions") to a token that already
    holds ``per_token`` open sessions of this endpoint; other tokens are unaffected."""
    admit = manager._admit_session  # noqa: SLF001 - the SDK's one admission point, decided under its lock

    def admit_within_limit(requestor):
        if requestor is not None:
            who = _principal(requestor)
            owners = manager._session_owners  # noqa: SLF001
            open_now = sum(1 for sid in manager._server_instances  # noqa: SLF001
                           if sid in owners and _principal(owners[sid]) == who)
            if open_now >= per_token:
                return None
        return admit(requestor)

    manager._admit_session = admit_within_limit  # noqa: SLF001
