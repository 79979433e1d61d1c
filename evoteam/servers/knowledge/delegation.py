"""Acting for a caller: how an evaluation service records verified results in the caller's name.

The bench must run where agents cannot change its scores, so on a shared server it runs as a
separate service holding a `--verifier` token (docs/sharing.md). An agent sends its candidate
there with its *own* token; the service forwards that token with each store call it makes for
the agent (`as_token` on `/store`). The knowledge server then checks both: the caller must hold
a verifier token, and the forwarded token must be valid and, when the verifier token is limited
to a project, of that project. The call runs as the forwarded token's user and project, with
the right to record verified scores. So identity still comes from a token the agent holds, and
the capability to verify from one only the service holds: neither alone is enough.
"""

from __future__ import annotations

from pydantic import BaseModel

from evoteam.servers.knowledge.auth import StoreTokenVerifier
from evoteam.servers.knowledge.errors import Forbidden
from evoteam.servers.knowledge.store import Actor

SERVICE_CLIENT = "bench-service"


class Identity(BaseModel):
    """Who a token belongs to (what the evaluation service learns from `/store`'s `identify`)."""

    user: str
    project: str | None


async def acting_for(verifier: StoreTokenVerifier, caller: Actor, token: str) -> Actor:
    """The actor a verifier `caller` works as when it acts for the holder of `token`."""
    if not caller.verifier:
        raise Forbidden("only the evaluation service's verifier token may act for another token")
    access = await verifier.verify_token(token)
    if access is None:
        raise Forbidden("the caller's token is not valid (revoked or mistyped): check EVOTEAM_TOKEN")
    project = (access.claims or {}).get("project")
    if caller.project is not None and project != caller.project:
        # A service limited to one project never writes into another, whoever asks.
        raise Forbidden(f"this evaluation service serves project {caller.project!r} only")
    return Actor(user=access.client_id, project=project, client=SERVICE_CLIENT,
                 default_project=project or caller.default_project, verifier=True)
