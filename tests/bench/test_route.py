"""With EVOTEAM_BENCH_URL set, bench.evaluate goes to the evaluation service; what goes wrong
on the way says so in one line (the service itself: tests/integration/test_second_engineer.py)."""

from __future__ import annotations

import socket

import pytest

from evoteam.errors import DomainError
from evoteam.servers.bench.scheduling import route


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the socket is


async def noop(done, total, message):
    return None


def args(**extra):
    base = dict(candidate_path=None, code="def run(x):\n    return x\n", split="dev", store=None, run_id=None,
                parent_id=None, documents_used=[], notes="", role=None, team_version=None, progress=noop)
    return {**base, **extra}


async def test_an_unreachable_service_is_named(bench_settings):
    settings = bench_settings.model_copy(update={"bench_url": f"http://127.0.0.1:{closed_port()}/mcp",
                                                 "token": "evt_" + "a" * 43})
    with pytest.raises(DomainError, match="cannot reach the evaluation service .*EVOTEAM_BENCH_URL"):
        await route.evaluate(settings, "rmsnorm_cpu", **args())


async def test_the_service_needs_the_agents_own_token(bench_settings):
    settings = bench_settings.model_copy(update={"bench_url": "http://127.0.0.1:9/mcp", "token": None})
    with pytest.raises(DomainError, match="EVOTEAM_TOKEN"):
        await route.evaluate(settings, "rmsnorm_cpu", **args())


async def test_only_python_source_travels(bench_settings, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "solution.json").write_text("{}")
    settings = bench_settings.model_copy(update={"bench_url": "http://127.0.0.1:9/mcp", "token": "evt_x"})
    with pytest.raises(DomainError, match="Python source"):
        await route.evaluate(settings, "rmsnorm_cpu", **args(code=None, candidate_path="solution.json"))
    with pytest.raises(DomainError, match="outside your project"):  # the usual path checks, here
        await route.evaluate(settings, "rmsnorm_cpu", **args(code=None, candidate_path="/etc/hostname"))


async def test_a_service_that_drops_the_call_is_said_with_what_to_check(tmp_path):
    """An evaluation service that died under a call answered "failed: " and nothing more
    (model-play 2026-12-04): the refusal names what happened and where to look."""
    import asyncio

    from evoteam.config import Settings
    from evoteam.errors import DomainError
    from evoteam.servers.bench.scheduling.route import call_service

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.readuntil(b"\r\n\r\n")
        if request.startswith(b"GET"):  # the preflight: a server is there
            writer.write(b"HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\n\r\n")
            await writer.drain()
        writer.close()  # the call itself: dropped without an answer

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    settings = Settings(db=tmp_path / "kb.db", bench_url=f"http://127.0.0.1:{port}/mcp", token="t")
    try:
        with pytest.raises(DomainError) as caught:
            await call_service(settings, "evaluate", {"kit": "rmsnorm_cpu"})
    finally:
        server.close()
    said = str(caught.value)
    assert said.startswith(f"the evaluation service at http://127.0.0.1:{port}/mcp failed: ") and "log" in said
    assert not said.split(" failed: ")[1].startswith(";"), said  # a reason, not nothing
