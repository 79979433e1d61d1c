"""Fixtures for the knowledge store: the same tests run on the embedded file and on a shared
knowledge server reached over HTTP (a real `evoteam serve knowledge --http` subprocess)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from evoteam.servers.knowledge import auth
from evoteam.servers.knowledge.backend import open_database
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.remote import RemoteKnowledgeStore
from evoteam.servers.knowledge.store import Actor


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_token(db_path: Path | str, user: str, project: str | None, verifier: bool = False) -> str:
    async def go():
        async with open_database(db_path) as db:
            return (await auth.add_token(db, user, project, verifier)).token

    # Callable from sync and async code alike: the store runs on a loop of its own.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, go()).result()


@asynccontextmanager
async def held(cm: AbstractAsyncContextManager) -> AsyncIterator:
    """Enter `cm` inside a task of its own. An MCP client holds anyio cancel scopes, which
    must be left by the task that entered them; pytest-asyncio may tear an async fixture down
    from another task."""
    ready: asyncio.Future = asyncio.get_running_loop().create_future()
    done = asyncio.Event()

    async def keeper():
        try:
            async with cm as value:
                ready.set_result(value)
                await done.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            else:
                raise

    task = asyncio.create_task(keeper())
    try:
        yield await ready
    finally:
        done.set()
        await task


def connect(server: KnowledgeServer, token: str):
    """An MCP client on `server`'s agent endpoint, as the token's holder (held open for the test)."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
    return held(Client(streamable_http_client(server.url, http_client=http)))


@dataclass
class KnowledgeServer:
    """A running `evoteam serve knowledge --http` process on 127.0.0.1."""

    db: Path
    port: int
    home: Path
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def env(self) -> dict[str, str]:
        return {**os.environ, "EVOTEAM_DB": str(self.db), "HOME": str(self.home)}

    def start(self, timeout: float = 20.0) -> KnowledgeServer:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "evoteam.cli", "serve", "knowledge", "--http", "--port", str(self.port)],
            env=self.env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited: {self.process.stderr.read().decode()}")
            try:
                httpx.get(f"http://127.0.0.1:{self.port}/mcp", timeout=0.5)
                return self
            except httpx.HTTPError:
                time.sleep(0.1)
        raise RuntimeError("server did not start")

    def kill(self, sig: int = signal.SIGTERM) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(sig)
            self.process.wait(timeout=10)


@pytest.fixture(scope="session")
def knowledge_server(tmp_path_factory) -> Iterator[KnowledgeServer]:
    base = tmp_path_factory.mktemp("kserver")
    db = base / "kb.db"
    make_token(db, "bootstrap", None)  # the server refuses to start without any token
    server = KnowledgeServer(db=db, port=free_port(), home=base).start()
    yield server
    server.kill()


@pytest.fixture(params=["local", "postgres", "remote"])
async def store(request, tmp_path) -> AsyncIterator[LocalKnowledgeStore | RemoteKnowledgeStore]:
    """A fresh, empty store: a new SQLite file, a new PostgreSQL database, or a new project on
    the shared server reached through a project-scoped token (so each test sees only its own rows)."""
    if request.param in ("local", "postgres"):
        where = tmp_path / "kb.db" if request.param == "local" else request.getfixturevalue("postgres_url")
        async with LocalKnowledgeStore.open(where, Actor(user="tester", client="pytest")) as s:
            yield s
    else:
        server: KnowledgeServer = request.getfixturevalue("knowledge_server")
        project = f"p-{uuid.uuid4().hex[:8]}"
        token = make_token(server.db, "tester", project)
        actor = Actor(user="ignored-by-server", client="pytest", default_project=project)
        async with held(RemoteKnowledgeStore.connect(server.url, token, actor)) as s:
            yield s


@pytest.fixture
async def verifier(request, store) -> AsyncIterator[LocalKnowledgeStore | RemoteKnowledgeStore]:
    """The same store and project as `store`, as the bench: allowed to record verified scores
    (in process: the actor's capability; over HTTP: a `--verifier` token)."""
    if isinstance(store, LocalKnowledgeStore):
        yield store.with_actor(store.actor.model_copy(update={"verifier": True}))
        return
    server: KnowledgeServer = request.getfixturevalue("knowledge_server")
    token = make_token(server.db, "bench", store.actor.default_project, verifier=True)
    async with held(RemoteKnowledgeStore.connect(server.url, token, store.actor)) as s:
        yield s



@pytest.fixture(params=["sqlite", "postgres"])
def new_location(request, tmp_path):
    """Where a fresh store may be opened, on each backend: `new_location("a.db")` is a file in
    tmp_path, or the URL of a fresh PostgreSQL database (the name then only tells them apart)."""
    if request.param == "sqlite":
        return lambda name: tmp_path / name
    server = request.getfixturevalue("postgres_server")
    made: dict[str, str] = {}
    return lambda name: made.setdefault(name, server.new_database())


def query_rows(where: Path | str, sql: str, params: tuple = ()) -> list[tuple]:
    """Rows of one SQLite-dialect query, read straight from the database behind a store
    (bypassing the store), on either backend."""
    from evoteam.servers.knowledge.pg import is_postgres_url

    if is_postgres_url(where):
        import psycopg

        from evoteam.servers.knowledge.dialect import to_postgres

        with psycopg.connect(str(where)) as conn:
            return [tuple(r) for r in conn.execute(to_postgres(sql), params).fetchall()]
    import sqlite3

    conn = sqlite3.connect(where)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


# A store taken back to before knowledge.measurements 6 (the spread_unknown column) loses the rank
# indexes that hold that column too (knowledge.verified 3), and gets back the one they replaced.
BEFORE_SPREAD_UNKNOWN = [
    "DROP INDEX candidates_rank_min", "DROP INDEX candidates_rank_max",
    "CREATE INDEX candidates_rank ON candidates(run_id, status, rank_score)",
    "UPDATE schema_versions SET version = 2 WHERE component = 'knowledge.verified'",
    "ALTER TABLE candidates DROP COLUMN spread_unknown",
]
