"""The store file's own failures (issue 17 §4, issue 14): read-only, damaged, locked, full.
Each gives one line saying what to do, never a traceback; reads never wait for the write lock;
the store recovers by itself once the condition clears."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from evoteam.servers.knowledge.errors import StoreFailure
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.models import ArtifactCreate, RunCreate
from evoteam.servers.knowledge.store import Actor


def cli(db: Path | str, *args: str, timeout: float = 60, home: Path | None = None,
        **env) -> subprocess.CompletedProcess:
    e = {**os.environ, "HOME": str(home or Path(db).parent), "EVOTEAM_DB": str(db), **env}
    e.pop("EVOTEAM_KNOWLEDGE_URL", None)
    return subprocess.run([sys.executable, "-m", "evoteam.cli", *args], env=e, capture_output=True, text=True,
                          timeout=timeout)


def one_line_error(proc: subprocess.CompletedProcess, words: str) -> None:
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr and proc.stderr.strip().count("\n") == 0, proc.stderr
    assert words in proc.stderr.lower(), proc.stderr


async def make_store(db: Path | str) -> str:
    async with LocalKnowledgeStore.open(db, Actor(user="a", client="t")) as store:
        return (await store.start_run(RunCreate(goal="pack circles"))).id


async def test_a_new_store_is_private(tmp_path: Path):
    db = tmp_path / "fresh" / "kb.db"
    await make_store(db)
    assert stat.S_IMODE(db.stat().st_mode) == 0o600
    assert stat.S_IMODE(db.parent.stat().st_mode) == 0o700


def read_only_runner(folder: Path):
    """Run the CLI where `folder` cannot be written: by permissions for an ordinary user; for
    root (who may write anything) on a read-only bind mount of it, in a mount namespace."""
    if os.geteuid() != 0:
        folder.chmod(0o555)
        return lambda db, *args, **kw: cli(db, *args, **kw)
    probe = subprocess.run(["unshare", "-m", "sh", "-c", f"mount --bind -o ro {folder} {folder}"],
                           capture_output=True)
    if probe.returncode != 0:
        pytest.skip("running as root without mount namespaces: cannot make a read-only store")

    def run(db: Path, *args: str, **kw) -> subprocess.CompletedProcess:
        inner = f"mount --bind -o ro {folder} {folder} && exec " + " ".join(
            f"'{a}'" for a in [sys.executable, "-m", "evoteam.cli", *args])
        e = {**os.environ, "HOME": str(db.parent), "EVOTEAM_DB": str(db)}
        e.pop("EVOTEAM_KNOWLEDGE_URL", None)
        return subprocess.run(["unshare", "-m", "sh", "-c", inner], env=e, capture_output=True, text=True,
                              timeout=60)

    return run


async def test_a_read_only_store_can_be_read_but_not_written(tmp_path: Path):
    folder = tmp_path / "ro"
    db = folder / "kb.db"
    run_id = await make_store(db)
    db.chmod(0o444)
    ro_cli = read_only_runner(folder)
    try:
        listed = ro_cli(db, "kb", "runs")
        assert listed.returncode == 0, listed.stderr
        assert run_id in listed.stdout
        one_line_error(ro_cli(db, "kb", "start", "another goal"), "read-only")
    finally:
        folder.chmod(0o700)


async def test_a_damaged_store_says_so_in_one_line(tmp_path: Path):
    db = tmp_path / "kb.db"
    db.write_bytes(b"this is not a database, just garbage " * 200)
    one_line_error(cli(db, "kb", "runs"), "damaged")
    one_line_error(cli(db, "kb", "start", "a goal"), "damaged")
    with pytest.raises(StoreFailure, match="damaged"):
        async with LocalKnowledgeStore.open(db):
            pass


HOLDER = textwrap.dedent("""
    import sqlite3, sys, time
    conn = sqlite3.connect(sys.argv[1], isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT INTO schema_versions VALUES ('zz-holder', 0)")
    print("locked", flush=True)
    time.sleep(40)
""")


async def test_reads_and_start_up_never_wait_for_a_held_write_lock(tmp_path: Path):
    db = tmp_path / "kb.db"
    run_id = await make_store(db)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(db)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        # A session starting (the store opened as the MCP servers and hooks open it) and reading.
        async with LocalKnowledgeStore.open(db) as store:
            assert (await store.get_run(run_id)).goal == "pack circles"
        listed = cli(db, "kb", "runs")
        assert listed.returncode == 0 and run_id in listed.stdout, listed.stderr
        assert holder.poll() is None  # all of that while the lock was still held
        # A write waits its (here short) busy timeout, then says what is going on in one line.
        one_line_error(cli(db, "kb", "start", "a goal", EVOTEAM_BUSY_TIMEOUT_MS="300"), "busy")
        assert holder.poll() is None
    finally:
        holder.kill()
        holder.wait()


# PostgreSQL's form of the held lock: a connection inside a transaction holding the store's write
# lock (pg.py), as a replica hung mid-write would, until its stdin closes.
PG_HOLDER = textwrap.dedent("""
    import sys, psycopg
    from evoteam.servers.knowledge.pg import WRITE_LOCK
    conn = psycopg.connect(sys.argv[1])
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
    print("locked", flush=True)
    sys.stdin.read()
""")


async def test_on_postgres_reads_and_start_up_never_wait_for_a_held_write_lock(postgres_url, tmp_path: Path):
    run_id = await make_store(postgres_url)
    holder = subprocess.Popen([sys.executable, "-c", PG_HOLDER, postgres_url], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        async with LocalKnowledgeStore.open(postgres_url) as store:
            assert (await store.get_run(run_id)).goal == "pack circles"
        listed = cli(postgres_url, "kb", "runs", home=tmp_path)
        assert listed.returncode == 0 and run_id in listed.stdout, listed.stderr
        assert holder.poll() is None
        # A write waits its busy timeout (a lock timeout here), then says so in one line, as on SQLite.
        one_line_error(cli(postgres_url, "kb", "start", "a goal", home=tmp_path, EVOTEAM_BUSY_TIMEOUT_MS="300"),
                       "busy")
        assert holder.poll() is None
    finally:
        holder.kill()
        holder.wait()
    async with LocalKnowledgeStore.open(postgres_url) as store:  # let go: writes go through again
        await store.start_run(RunCreate(goal="after the holder"))
        assert (await store.list_runs()).total == 2


async def test_a_full_disk_is_one_line_and_the_store_recovers(tmp_path: Path):
    """SQLite's own "database or disk is full" (SQLITE_FULL), produced by capping the file's size."""
    db = tmp_path / "kb.db"
    run_id = await make_store(db)
    async with LocalKnowledgeStore.open(db) as store:
        writer = store.db._writer  # noqa: SLF001 - the cap is a property of the writing connection
        async with writer.execute("PRAGMA page_count") as cur:
            (pages,) = await cur.fetchone()
        await writer.execute(f"PRAGMA max_page_count = {pages}")  # cannot grow: every new page fails
        with pytest.raises(StoreFailure, match="full") as info:
            await store.put_artifact(ArtifactCreate(run_id=run_id, name="big.txt", text="x" * 200_000))
        assert "\n" not in str(info.value)
        assert (await store.list_artifacts(run_id)).total == 0  # nothing half-written
        # Space freed: the next write succeeds on the same open store, no restart.
        await store.db._writer.execute("PRAGMA max_page_count = 1073741823")  # noqa: SLF001
        await store.put_artifact(ArtifactCreate(run_id=run_id, name="big.txt", text="x" * 200_000))
        assert (await store.list_artifacts(run_id)).total == 1


async def test_doctor_checks_the_real_store_without_writing_it(tmp_path: Path):
    from evoteam.config import Settings
    from evoteam.doctor import check_store

    db = tmp_path / "kb.db"
    await make_store(db)
    assert "integrity ok" in await check_store(Settings(db=db))
    db.chmod(0o644)
    assert "WARNING: readable by others" in await check_store(Settings(db=db))
    db.write_bytes(b"garbage " * 1000)
    before = db.read_bytes()
    with pytest.raises(RuntimeError, match="damaged"):
        await check_store(Settings(db=db))
    assert db.read_bytes() == before
    # The whole command fails on a damaged store instead of saying "all checks passed".
    doctor = cli(db, "doctor", "--server", "knowledge", timeout=120)
    assert doctor.returncode != 0 and "your store" in doctor.stdout and "damaged" in doctor.stdout, doctor.stdout
    assert "all" not in doctor.stdout.splitlines()[-1]


async def test_doctor_checks_a_postgresql_store_without_writing_it(postgres_server, tmp_path: Path):
    from evoteam.config import Settings
    from evoteam.doctor import check_store
    from tests.knowledge.conftest import query_rows

    url = postgres_server.new_database()
    await make_store(url)
    before = query_rows(url, "SELECT count(*), max(xmin::text::bigint) FROM runs")
    assert "schema current, 1 run(s)" in await check_store(Settings(db=url))
    assert query_rows(url, "SELECT count(*), max(xmin::text::bigint) FROM runs") == before
    # A database that does not exist yet: doctor says so in one line and creates nothing.
    missing = url.rsplit("/", 1)[0] + "/no_such_database"
    with pytest.raises(RuntimeError) as info:
        await check_store(Settings(db=missing))
    assert "\n" not in str(info.value) and "no_such_database" in str(info.value)
    assert query_rows(postgres_server.url(), "SELECT count(*) FROM pg_database WHERE datname = 'no_such_database'") \
        == [(0,)]


async def test_an_agent_sees_the_full_disk_as_a_one_line_tool_error(tmp_path: Path):
    from mcp import Client

    from evoteam.config import load_settings
    from evoteam.servers.knowledge.server import build_server
    from tests.knowledge.conftest import held

    db = tmp_path / "kb.db"
    run_id = await make_store(db)
    async with LocalKnowledgeStore.open(db) as store:
        writer = store.db._writer  # noqa: SLF001
        async with writer.execute("PRAGMA page_count") as cur:
            (pages,) = await cur.fetchone()
        await writer.execute(f"PRAGMA max_page_count = {pages}")
        async with held(Client(build_server(load_settings(), store))) as client:
            result = await client.call_tool("put_artifact", {"run_id": run_id, "name": "a.txt", "text": "x" * 200_000})
            assert result.is_error
            text = result.content[0].text
            assert "is full" in text and "free space" in text and "\n" not in text
            await store.db._writer.execute("PRAGMA max_page_count = 1073741823")  # noqa: SLF001
            again = await client.call_tool("put_artifact", {"run_id": run_id, "name": "a.txt", "text": "x" * 200_000})
            assert not again.is_error
