"""The team tools on a shared knowledge server: team versions and role sessions travel through
the store protocol, with the token's identity and project."""

from __future__ import annotations

import uuid

from mcp import Client

from evoteam.config import Settings
from evoteam.servers.knowledge.models import RunCreate
from evoteam.servers.knowledge.remote import RemoteKnowledgeStore
from evoteam.servers.knowledge.store import Actor
from evoteam.servers.team.server import build_server
from tests.knowledge.conftest import KnowledgeServer, held, knowledge_server, make_token  # noqa: F401
from tests.team.conftest import FakeRunner, design


async def test_team_tools_over_a_shared_store(knowledge_server: KnowledgeServer, project, tmp_path):  # noqa: F811
    project_name = f"p-{uuid.uuid4().hex[:8]}"
    token = make_token(knowledge_server.db, "alice", project_name)
    actor = Actor(user="ignored", client="pytest", default_project=project_name)
    async with held(RemoteKnowledgeStore.connect(knowledge_server.url, token, actor)) as store:
        run = await store.start_run(RunCreate(goal="shared goal", budget_usd=4))
        runner = FakeRunner(store, behaviours={"solo": "finish"}, cost=0.5)
        server = build_server(Settings(db=tmp_path / "unused.db", knowledge_url=knowledge_server.url, token=token),
                              store, runner_factory=lambda kind: runner, project_dir=project)
        async with Client(server) as client:
            result = await client.call_tool("design_team", design(run.id, "Solo"))
            assert not result.is_error, result.content[0].text
            assert result.structured_content["version"] == 1
            await client.call_tool("spawn_role", {"run_id": run.id, "role": "Solo"})
            while True:
                status = (await client.call_tool("team_status", {"run_id": run.id})).structured_content
                if status["finished"]:
                    break
            assert status["roles"][0]["status"] == "finished" and status["spent_usd"] == 0.5
            entry = (await client.call_tool("reflect", {"run_id": run.id, "outcome": "done"})).structured_content
            assert entry["provenance"]["user"] == "alice"  # identity from the token, not the caller
            versions = (await client.call_tool("list_versions", {"run_id": run.id})).structured_content
            assert versions["items"][0]["roles"] == ["Solo"]
        # another project's token does not see this run's team
        other = make_token(knowledge_server.db, "bob", f"p-{uuid.uuid4().hex[:8]}")
        async with held(RemoteKnowledgeStore.connect(knowledge_server.url, other, actor)) as theirs:
            server = build_server(Settings(db=tmp_path / "unused.db"), theirs, project_dir=project)
            async with Client(server) as client:
                result = await client.call_tool("team_status", {"run_id": run.id})
                assert result.is_error and "no run" in result.content[0].text
