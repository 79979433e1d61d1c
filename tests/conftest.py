"""Shared fixtures. End-to-end harness: see docs/testing.md and tests/support/."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.claude_cli import ClaudeCLIUnavailable, claude_path, prepare_home
from tests.support.postgres import PostgresServer, PostgresUnavailable, start_server, stop_server
from tests.support.scripted_api import ScriptedAPI

# Warm hook processes started by hooks the tests run leave 20 s after their last hook.
os.environ.setdefault("EVOTEAM_HOOK_WARM_IDLE", "20")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip ``@pytest.mark.claude_cli`` tests, with the reason, when the bundled CLI is missing."""
    try:
        claude_path()
        return
    except ClaudeCLIUnavailable as e:
        reason = str(e)
    for item in items:
        if item.get_closest_marker("claude_cli"):
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture
def claude_cwd(tmp_path: Path) -> Path:
    """An empty project directory for a CLI run."""
    d = tmp_path / "project"
    d.mkdir()
    return d


@pytest.fixture
def claude_home(tmp_path: Path, claude_cwd: Path) -> Path:
    """A temporary HOME with onboarding done and ``claude_cwd`` trusted."""
    return prepare_home(tmp_path / "home", trusted_dirs=[claude_cwd])


@pytest.fixture
def scripted_api() -> Iterator[ScriptedAPI]:
    """A started scripted Messages API with no rules; add them with ``scripted_api.add(Rule(...))``."""
    api = ScriptedAPI()
    api.start()
    try:
        yield api
    finally:
        api.stop()


_POSTGRES: dict[str, object] = {}


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A real PostgreSQL, started once per test run (tests/support/postgres.py); the tests that
    need it skip, with the reason, where PostgreSQL or psycopg is not installed."""
    if "skip" in _POSTGRES:
        pytest.skip(_POSTGRES["skip"])
    try:
        server = start_server()
    except PostgresUnavailable as exc:
        _POSTGRES["skip"] = f"no PostgreSQL here: {exc}"
        pytest.skip(_POSTGRES["skip"])
    try:
        yield server
    finally:
        stop_server(server)


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """The URL of a fresh database of its own, holding every component's (empty) schema."""
    return postgres_server.new_database()
