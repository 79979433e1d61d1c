"""Acting for a caller (knowledge/delegation.py), on a real shared server: only a verifier token
may make a store call for another token, the call runs as that token's holder, and it never
crosses the verifier's project."""

from __future__ import annotations

import uuid

import pytest

from evoteam.servers.knowledge.errors import Forbidden
from evoteam.servers.knowledge.models import CandidateCreate, RunCreate
from evoteam.servers.knowledge.remote import RemoteKnowledgeStore
from evoteam.servers.knowledge.store import Actor
from tests.knowledge.conftest import KnowledgeServer, held, make_token


def project() -> str:
    return f"p-{uuid.uuid4().hex[:8]}"


def connect(server: KnowledgeServer, token: str):
    return held(RemoteKnowledgeStore.connect(server.url, token, Actor(user="claimed-by-client")))


async def test_the_service_records_verified_in_the_callers_name(knowledge_server: KnowledgeServer):
    p = project()
    alice = make_token(knowledge_server.db, "alice", p)
    bench = make_token(knowledge_server.db, "bench", p, verifier=True)
    async with connect(knowledge_server, bench) as service:
        who = await service.identify(alice)
        assert (who.user, who.project) == ("alice", p)
        for_alice = service.acting_for(alice)
        run = await for_alice.start_run(RunCreate(goal="g", kit="k"))
        cand = await for_alice.record_candidate(CandidateCreate(run_id=run.id, code="x", status="PASSED",
                                                                score=2.0, verified=True))
    assert (run.project, run.provenance.user) == (p, "alice")
    assert (cand.provenance.user, cand.provenance.client, cand.verified) == ("alice", "bench-service", True)
    async with connect(knowledge_server, alice) as mine:
        assert (await mine.get_run(run.id)).best_candidate_id == cand.id


async def test_a_plain_token_cannot_act_for_another(knowledge_server: KnowledgeServer):
    p = project()
    alice = make_token(knowledge_server.db, "alice", p)
    bob = make_token(knowledge_server.db, "bob", p)
    async with connect(knowledge_server, bob) as store:
        with pytest.raises(Forbidden, match="verifier"):
            await store.identify(alice)
        with pytest.raises(Forbidden, match="verifier"):
            await store.acting_for(alice).start_run(RunCreate(goal="as alice"))
        assert (await store.list_runs()).total == 0


async def test_a_service_never_acts_outside_its_project(knowledge_server: KnowledgeServer):
    mine, theirs = project(), project()
    outsider = make_token(knowledge_server.db, "mallory", theirs)
    bench = make_token(knowledge_server.db, "bench", mine, verifier=True)
    async with connect(knowledge_server, bench) as service:
        with pytest.raises(Forbidden, match="serves project"):
            await service.acting_for(outsider).start_run(RunCreate(goal="elsewhere"))
        with pytest.raises(Forbidden, match="not valid"):
            await service.identify("evt_" + "x" * 43)
    async with connect(knowledge_server, outsider) as store:
        assert (await store.list_runs()).total == 0
