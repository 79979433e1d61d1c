"""The session-start hook as a second engineer's first read, on a real shared knowledge server:
with no run active in the clone it shows the project's earlier runs; with one active, the other
runs of the same kit beside it."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from evoteam.plugin import hooks, state
from evoteam.servers.knowledge.models import CandidateCreate, LearningCreate, RunCreate
from evoteam.servers.knowledge.remote import RemoteKnowledgeStore
from evoteam.servers.knowledge.store import Actor
from tests.knowledge.conftest import KnowledgeServer, knowledge_server, make_token  # noqa: F401 (fixture)


def seed_alice(server: KnowledgeServer, project: str) -> tuple[str, str, str]:
    """Alice's run of rmsnorm_cpu with a verified best (recorded as the evaluation service does)."""
    alice = make_token(server.db, "alice", project)
    bench = make_token(server.db, "bench", project, verifier=True)

    async def go():
        async with RemoteKnowledgeStore.connect(server.url, bench, Actor(user="bench")) as service:
            kb = service.acting_for(alice)
            run = await kb.start_run(RunCreate(goal="Make RMSNorm fast", kit="rmsnorm_cpu", x0=1.0))
            best = await kb.record_candidate(CandidateCreate(run_id=run.id, code="x", status="PASSED", score=3.5,
                                                             verified=True, notes="fused rsqrt, one pass"))
            await kb.add_learning(LearningCreate(run_id=run.id, kind="technique", confidence=0.9,
                                                 text="one pass over the row halves memory traffic"))
            return run.id, best.id

    run_id, best_id = asyncio.run(go())
    return run_id, best_id, alice


@pytest.fixture
def bob(tmp_path, monkeypatch, knowledge_server: KnowledgeServer):  # noqa: F811
    project = f"p-{uuid.uuid4().hex[:8]}"
    seeded = seed_alice(knowledge_server, project)
    for var in ("CLAUDE_PROJECT_DIR", "EVOTEAM_PROJECT_DIR", "EVOTEAM_RUN", "EVOTEAM_HOOKS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("EVOTEAM_KNOWLEDGE_URL", knowledge_server.url)
    monkeypatch.setenv("EVOTEAM_TOKEN", make_token(knowledge_server.db, "bob", project))
    monkeypatch.setenv("EVOTEAM_DB", str(tmp_path / "unused.db"))
    monkeypatch.setenv("EVOTEAM_HOOK_WARM", "0")
    clone = tmp_path / "bob-clone"
    clone.mkdir()
    return clone, seeded


def start_input(project) -> dict:
    return {"session_id": "s", "transcript_path": "/nonexistent", "cwd": str(project),
            "hook_event_name": "SessionStart", "source": "startup"}


def test_a_fresh_clone_sees_the_projects_earlier_runs(bob):
    clone, (run_id, best_id, _) = bob
    ctx = hooks.session_start(start_input(clone))["hookSpecificOutput"]["additionalContext"]
    assert f"`{run_id}` (rmsnorm_cpu) by alice, active" in ctx
    assert best_id in ctx and "fused rsqrt" in ctx and "one pass over the row" in ctx
    assert len(ctx) < 5000


def test_an_active_run_shows_the_other_runs_of_its_kit(bob):
    clone, (run_id, best_id, _) = bob

    async def start():
        from evoteam.config import load_settings
        from evoteam.servers.knowledge.connect import open_store

        async with open_store(load_settings(cwd=clone)) as kb:
            return (await kb.start_run(RunCreate(goal="RMSNorm, again", kit="rmsnorm_cpu"))).id

    mine = asyncio.run(start())
    state.activate(clone, mine)
    ctx = hooks.session_start(start_input(clone))["hookSpecificOutput"]["additionalContext"]
    assert f"evoteam run `{mine}` (active)" in ctx
    assert f"`{run_id}` by alice" in ctx and best_id in ctx
    assert len(ctx) < 5000


def test_a_local_store_without_an_active_run_stays_quiet(tmp_path, monkeypatch):
    monkeypatch.delenv("EVOTEAM_KNOWLEDGE_URL", raising=False)
    monkeypatch.setenv("EVOTEAM_DB", str(tmp_path / "kb.db"))
    assert hooks.session_start(start_input(tmp_path)) is None
