"""A shared knowledge server that goes away mid-session: the client's calls say so, and the next
call after it is back connects again. A stdio server (or the evaluation service) holding the
session died with the first ConnectError and stayed dead (model-play 2026-12-04)."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest

from evoteam.servers.knowledge.errors import Unavailable
from evoteam.servers.knowledge.models import RunCreate
from evoteam.servers.knowledge.remote import RemoteKnowledgeStore
from evoteam.servers.knowledge.store import Actor
from tests.knowledge.conftest import KnowledgeServer, free_port, held, make_token


async def test_a_session_outlives_a_restart_of_the_shared_server(tmp_path: Path):
    db = tmp_path / "kb.db"
    token = make_token(db, "alice", "kernels")
    server = KnowledgeServer(db=db, port=free_port(), home=tmp_path).start()
    try:
        actor = Actor(user="ignored", client="pytest", default_project="kernels")
        async with held(RemoteKnowledgeStore.connect(server.url, token, actor)) as store:
            run = await store.start_run(RunCreate(goal="g", kit="k"))
            server.kill(signal.SIGKILL)
            with pytest.raises(Unavailable, match="knowledge server at http://127.0.0.1"):
                await store.get_run(run.id)
            # Still down: said again, nothing else breaks.
            with pytest.raises(Unavailable):
                await store.get_run(run.id)
            server.start()
            assert (await store.get_run(run.id)).id == run.id  # connected again, same store
            assert (await store.with_actor(actor).list_runs()).items[0].id == run.id
    finally:
        server.kill()


def test_the_stdio_knowledge_server_survives_the_shared_server_going_away(tmp_path: Path):
    """The same through the process an agent talks to: `evoteam serve knowledge` over stdio,
    pointed at the shared server, answers a tool error while that server is down and works
    again once it is back, instead of exiting."""
    db = tmp_path / "kb.db"
    token = make_token(db, "alice", "kernels")
    server = KnowledgeServer(db=db, port=free_port(), home=tmp_path / "server").start()
    try:
        seen = _stdio_calls(tmp_path, server.url, token,
                            [lambda: None, lambda: server.kill(signal.SIGKILL), server.start])
    finally:
        server.kill()
    (_, up_err, _), (_, down_err, down_text), (_, back_err, back_text) = seen
    assert not up_err and down_err and not back_err, (seen, (tmp_path / "stdio.err").read_text())
    assert "knowledge server" in down_text, down_text
    assert "stopped" not in (tmp_path / "stdio.err").read_text()


def _stdio_calls(tmp_path: Path, url: str, token: str, steps) -> list[tuple[bool, str]]:
    """`evoteam serve knowledge` over stdio pointed at `url` with `token`: for each step (a
    callable run first), the tool count and list_runs' (is_error, text)."""
    import asyncio

    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    home = tmp_path / "client"
    home.mkdir(exist_ok=True)
    env = {"HOME": str(home), "EVOTEAM_HOME": str(home / ".evoteam"), "EVOTEAM_KNOWLEDGE_URL": url,
           "EVOTEAM_TOKEN": token, "PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).parents[2])}

    async def go() -> list:
        seen = []
        params = StdioServerParameters(command=sys.executable, args=["-m", "evoteam", "serve", "knowledge"],
                                       env=env, cwd=str(tmp_path))
        with open(tmp_path / "stdio.err", "w") as err:
            async with stdio_client(params, errlog=err) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                for step in steps:
                    step()
                    tools = len((await session.list_tools()).tools)
                    result = await session.call_tool("list_runs", {})
                    seen.append((tools, bool(result.is_error), " ".join(getattr(c, "text", "") for c in result.content)))
        return seen

    return asyncio.run(go())


def test_the_stdio_knowledge_server_says_why_it_cannot_reach_the_shared_server(tmp_path: Path):
    """A stdio server whose shared server was down, or refused its token, exited at start: the
    agent saw no tools and no reason (review 2026-12-04). It starts, each tool says why, and a
    shared server that comes up later is used without a restart."""
    db = tmp_path / "kb.db"
    token = make_token(db, "alice", "kernels")
    server = KnowledgeServer(db=db, port=free_port(), home=tmp_path / "server")  # not started yet
    try:
        (down_tools, down_err, down), (up_tools, up_err, _) = _stdio_calls(
            tmp_path, server.url, token, [lambda: None, server.start])
        assert down_tools == up_tools > 10 and down_err and not up_err, (down, (tmp_path / "stdio.err").read_text())
        assert f"cannot reach the knowledge server at {server.url.rsplit('/', 1)[0]}/store" in down, down
        ((tools, err, refused),) = _stdio_calls(tmp_path, server.url, "not-a-token", [lambda: None])
        assert tools > 10 and err and "refused the token: check EVOTEAM_TOKEN" in refused, refused
        assert "restart it after a change" in refused  # what the agent tells its user to do
        for bad in (" ", "tok en", token + "\nx"):
            ((tools, err, said),) = _stdio_calls(tmp_path, server.url, bad, [lambda: None])
            assert tools > 10 and err, said
            assert ("needs a token" if not bad.strip() else "holds a space, a line break") in said, said
            assert "Illegal header" not in said
        # A token pasted with a line break at its end is the token: it works.
        ((_, err, text),) = _stdio_calls(tmp_path, server.url, token + "\n", [lambda: None])
        assert not err, text
    finally:
        server.kill()


async def test_an_evaluation_a_plain_token_records_says_it_never_ranks(knowledge_server, tmp_path: Path):
    """With a shared store and no evaluation service, the bench's results go in with the engineer's
    plain token: an unverified claim. `bench run` said only "recorded as cand_… in run_…", read as a
    result that ranks (model-play 2026-12-04); the evaluation and its line say what it is."""
    import io

    from rich.console import Console

    from evoteam.config import SOURCE_ROOT, Settings
    from evoteam.servers.bench.cli import print_evaluation
    from evoteam.servers.bench.evaluation.core import evaluate_candidate

    token = make_token(knowledge_server.db, "bob", "p-unverified")
    actor = Actor(user="ignored", client="pytest", default_project="p-unverified")
    code = (SOURCE_ROOT / "task_kits" / "circle_packing_26" / "initial_program.py").read_text()
    async with held(RemoteKnowledgeStore.connect(knowledge_server.url, token, actor)) as store:
        result = await evaluate_candidate(Settings(db=tmp_path / "kb.db"), "circle_packing_26", code=code, store=store)
        stored = await store.get_candidate(result.candidate_id)
    assert result.recorded and result.unverified is True and stored.verified is False
    out = io.StringIO()
    print_evaluation(result, Console(file=out, width=300))
    assert f"recorded as {result.candidate_id} in {result.run_id} as an unverified claim: listed, never ranked" \
        in out.getvalue(), out.getvalue()
