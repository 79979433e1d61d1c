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
