"""`evoteam doctor`: the self-check that ends `./install.sh`.

It proves the product works on this machine with its embedded defaults: each MCP server
starts over stdio and lists its tools, the store round-trips a run through export and import,
and a CPU kit's baseline evaluates — all on a scratch store — and it checks the user's own store
(read-only: integrity, schema, permissions; or the shared server it points at).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from evoteam import python_module_args
from evoteam.errors import first_leaf

if TYPE_CHECKING:  # the MCP SDK (~1 s) loads when the checks run, not for `doctor --help`
    from mcp import Client, StdioServerParameters

    from evoteam.config import Settings

SERVERS = ("knowledge", "team", "retrieval", "bench")
DEFAULT_KIT = "rmsnorm_cpu"
# What each check usually costs on two busy cores, shown before they start (they run side by
# side, so the whole is about the slowest: the kit's baseline).
COSTS = {"server": "1–4 s each (a fresh start imports the MCP SDK)", "store round trip": "about 1 s",
         "kit": "5–20 s (the bench measures the baseline against itself)", "your store": "under 1 s",
         "warm hooks": "instant"}


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    seconds: float
    warning: bool = False  # reported, but not a failure (e.g. hooks that run slower)


async def _timed(name: str, fn: Callable[[], Awaitable[str]]) -> Check:
    start = time.perf_counter()
    try:
        detail = await fn()
        ok = True
    except Exception as exc:  # a failed check is reported, never raised
        detail, ok = f"{type(exc).__name__}: {first_leaf(exc)}", False
    return Check(name=name, ok=ok, detail=detail, seconds=time.perf_counter() - start)


def _server_params(name: str, env: dict[str, str]) -> StdioServerParameters:
    from mcp import StdioServerParameters

    return StdioServerParameters(command=sys.executable, args=python_module_args("evoteam.cli", "serve", name),
                                 env=env)


def _client(name: str, env: dict[str, str]) -> Client:
    from mcp import Client

    return Client(_server_params(name, env))


async def _tools(client) -> str:
    tools = [t.name for t in (await client.list_tools()).tools]
    if not tools:
        raise RuntimeError("started but lists no tools")
    return f"{len(tools)} tools: {', '.join(tools)}"


async def check_server(name: str, env: dict[str, str]) -> str:
    async with _client(name, env) as client:
        return await _tools(client)


async def check_round_trip(env: dict[str, str], workdir: Path) -> str:
    from evoteam.servers.knowledge.export import collect_bundle, export_run, import_run
    from evoteam.servers.knowledge.local import LocalKnowledgeStore
    from evoteam.servers.knowledge.models import (
        CandidateCreate,
        LearningCreate,
        RunCreate,
    )

    async with LocalKnowledgeStore.open(Path(env["EVOTEAM_DB"])) as store:
        run = await store.start_run(RunCreate(goal="doctor round trip", x0=1.0, best_known=2.0))
        bench = store.with_actor(store.actor.model_copy(update={"verifier": True}))  # stands in for the bench
        cand = await bench.record_candidate(CandidateCreate(run_id=run.id, code="x = 1", status="PASSED", score=1.5,
                                                            verified=True))
        await store.add_learning(LearningCreate(run_id=run.id, text="the store round-trips", evidence=[cand.id]))
        before = await collect_bundle(store, run.id)
        await export_run(store, run.id, workdir / "export")
    async with LocalKnowledgeStore.open(workdir / "imported.db") as other:
        await import_run(other, workdir / "export", trust_scores=True)
        after = await collect_bundle(other, run.id)
    if after.model_dump() != before.model_dump():
        raise RuntimeError("the imported run differs from the exported one")
    return f"run {run.id}: export → import identical (NDG {after.run.ndg:.0f})"


async def check_kit(env: dict[str, str], kit: str, client=None) -> str:
    """Evaluate the kit's own baseline through the bench server, as an agent would (on the
    client of the bench server's own check when given: one server start fewer)."""
    if client is None:
        async with _client("bench", env) as own:
            return await check_kit(env, kit, own)
    described = await client.call_tool("describe_kit", {"kit": kit})
    if described.is_error:
        raise RuntimeError(described.content[0].text)
    start = described.structured_content["starting_point"]
    result = await client.call_tool("evaluate", {"kit": kit, "candidate_path": start,
                                                 "notes": "evoteam doctor: the kit's own baseline"})
    if result.is_error:
        raise RuntimeError(result.content[0].text)
    data = result.structured_content or {}
    status, score = data.get("status"), data.get("score")
    if status != "PASSED":
        raise RuntimeError(f"baseline did not pass: {status}: {data.get('message')}")
    missing = (data.get("metrics") or {}).get("protections_missing") or []
    confined = f"; candidate sandbox MISSING {', '.join(missing)}" if missing else "; candidate sandbox complete"
    from evoteam.servers.bench.confinement.jail import stop_not_held

    if stop_not_held(str(data.get("sandbox") or "")):
        confined += "; the harness's stop does NOT hold here (no cgroup, no seccomp): kernel scores are flagged"
    from evoteam.stats import describe_score

    # With its interval: a number without one is not a result (it holds 1x on a sound harness).
    shown = describe_score(score, data.get("score_interval"), unit="x")
    return f"{kit}: baseline {status}, speedup over itself {shown} ({len(data.get('workloads', []))} workloads){confined}"


async def check_store(settings: Settings) -> str:
    """The user's real store, without writing to it: a shared server answers, or the local
    file is a sound, current evoteam database that only its owner can read."""
    if settings.remote:
        from evoteam.servers.knowledge.connect import open_store

        async with open_store(settings) as store:
            page = await store.list_runs(limit=1)
        return f"shared server {settings.knowledge_url}: reachable, {page.total} run(s) visible to your token"
    from evoteam.config import is_store_url

    if is_store_url(settings.db):
        return await _in_thread(_check_pg_store, settings.db)
    return await _in_thread(_check_local_store, Path(settings.db).expanduser())


def _check_pg_store(url: str) -> str:
    """`evoteam doctor`'s look at a PostgreSQL store, without writing to it: reachable, and its
    schema current (a line saying so), or a RuntimeError saying what is wrong."""
    from evoteam.servers.knowledge import db as sqlite_db
    from evoteam.servers.knowledge.pg import _psycopg, describe, redacted

    psycopg, _ = _psycopg()
    sqlite_db._load_components()
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
            (server,) = conn.execute("SHOW server_version").fetchone()
            exists = conn.execute("SELECT to_regclass('schema_versions')").fetchone()[0]
            versions = dict(conn.execute("SELECT component, version FROM schema_versions").fetchall()) \
                if exists else None
            runs = conn.execute("SELECT count(*) FROM runs").fetchone()[0] if exists else 0
    except psycopg.Error as exc:
        raise RuntimeError(str(describe(exc, url) or str(exc).splitlines()[0])) from None
    where = redacted(url)
    if versions is None:
        return f"{where}: PostgreSQL {server}, no store yet (it is made on first use)"
    if not sqlite_db.is_current(versions):
        return f"{where}: PostgreSQL {server}, schema older than this evoteam (upgraded on first write)"
    return f"{where}: PostgreSQL {server}, schema current, {runs} run(s)"


async def _in_thread(fn, *args):
    import asyncio

    return await asyncio.to_thread(fn, *args)


def _check_local_store(path: Path) -> str:
    import sqlite3
    import stat

    from evoteam.servers.knowledge.db import _load_components, connect_readonly, current_versions
    from evoteam.servers.knowledge.migrations import is_current
    from evoteam.servers.knowledge.storefail import describe

    if not path.exists():
        return f"{path}: no store yet (it is created on first use)"
    _load_components()
    try:
        conn = connect_readonly(path)
        try:
            verdict = conn.execute("PRAGMA quick_check").fetchone()[0]
        finally:
            conn.close()
        versions = current_versions(path)
    except sqlite3.Error as exc:
        raise RuntimeError(str(describe(exc, path) or exc)) from None
    if verdict != "ok":
        raise RuntimeError(f"{path} is damaged ({verdict[:200]}): restore it from a backup or `evoteam kb import` "
                           f"an export into a new file")
    if versions is None:
        raise RuntimeError(f"{path} is an SQLite file but not an evoteam store: point EVOTEAM_DB elsewhere")
    from evoteam.servers.knowledge.migrations import newer_than_known

    if newer_than_known(versions):
        raise RuntimeError(f"{path} was written by a newer evoteam ({', '.join(newer_than_known(versions))} schema): "
                           f"upgrade evoteam, or point EVOTEAM_DB at another file")
    notes = ["schema current" if is_current(versions) else "schema will be upgraded on the next write"]
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        notes.append(f"WARNING: readable by others (mode {mode:o}); run `chmod 600 {path}`")
    if not os.access(path, os.W_OK):
        notes.append("read-only here (reads work, writes are refused)")
    from evoteam.servers.knowledge.storefail import disk_full

    if disk_full(path):  # reads pass the checks above; every write (and the next start) would fail
        raise RuntimeError(f"the disk holding the store {path} is full: free space there (evoteam recovers by "
                           f"itself once there is room)")
    return f"{path}: integrity ok, " + ", ".join(notes)


async def _bench_and_kit(env: dict[str, str], kit: str, done: Callable[[Check], None]) -> list[Check]:
    """The bench server's check, then the kit's baseline on the same server."""
    start = time.perf_counter()
    checks: list[Check] = []
    try:
        async with _client("bench", env) as client:
            checks.append(Check("server bench", True, await _tools(client), time.perf_counter() - start))
            done(checks[-1])
            checks.append(await _timed(f"kit {kit}", lambda: check_kit(env, kit, client)))
            done(checks[-1])
    except Exception as exc:
        reason = f"{type(exc).__name__}: {first_leaf(exc)}"
        if not checks:  # the server did not start: the kit could not be tried
            checks.append(Check("server bench", False, reason, time.perf_counter() - start))
            done(checks[-1])
            checks.append(Check(f"kit {kit}", False, "not run: the bench server did not start", 0.0))
            done(checks[-1])
        elif len(checks) == 1:
            checks.append(Check(f"kit {kit}", False, reason, time.perf_counter() - start))
            done(checks[-1])
        # else both were reported: a server that fails while closing changes neither verdict
    return checks


async def check_warm_hooks() -> Check:
    from evoteam.plugin.warm import explain

    ok, why = explain()
    return Check("warm hooks", True, why, 0.0, warning=not ok)


async def run_checks(settings: Settings, kit: str, servers: tuple[str, ...] = SERVERS,
                     done: Callable[[Check], None] = lambda check: None) -> list[Check]:
    """Every check, side by side (each waits mostly on its own subprocess); `done` hears each
    as it finishes."""
    with tempfile.TemporaryDirectory(prefix="evoteam-doctor-") as tmp:
        workdir = Path(tmp)
        # The checks use a scratch store, so a self-check never writes into the user's data.
        env = {**os.environ, "EVOTEAM_DB": str(workdir / "doctor.db"), "EVOTEAM_PREDICTOR": "agent"}
        env.pop("EVOTEAM_KNOWLEDGE_URL", None)

        async def one(name: str, fn: Callable[[], Awaitable[str]]) -> list[Check]:
            check = await _timed(name, fn)
            done(check)
            return [check]

        async def warm() -> list[Check]:
            check = await check_warm_hooks()
            done(check)
            return [check]

        jobs = [one(f"server {name}", lambda n=name: check_server(n, env)) for name in servers if name != "bench"]
        if "bench" in servers:
            jobs.append(_bench_and_kit(env, kit, done))
        jobs += [one("store round trip", lambda: check_round_trip(env, workdir)),
                 one("your store", lambda: check_store(settings)), warm()]
        import asyncio

        found = [check for group in await asyncio.gather(*jobs) for check in group]
    order = [f"server {n}" for n in SERVERS] + ["store round trip", f"kit {kit}", "your store", "warm hooks"]
    return sorted(found, key=lambda c: order.index(c.name) if c.name in order else len(order))


def _line(c: Check, width: int) -> str:
    mark = (click.style("warn", fg="yellow") if c.warning else click.style("ok  ", fg="green")) if c.ok \
        else click.style("FAIL", fg="red")
    return f"{mark} {c.name:<{width}}  {c.seconds:5.1f}s  {c.detail}"


@click.command()
@click.option("--kit", default=DEFAULT_KIT, show_default=True, help="The CPU kit whose baseline to evaluate.")
@click.option("--server", "servers", multiple=True, type=click.Choice(SERVERS), help="Check only these servers.")
@click.pass_obj
def doctor(settings: Settings, kit: str, servers: tuple[str, ...]) -> None:
    """Check that every server starts, the store round-trips and a CPU kit evaluates."""
    from evoteam.servers.bench.formats.kits import find_kit

    find_kit(settings, kit)  # a mistyped kit fails now (exit 3), not after the servers have started
    servers = servers or SERVERS
    width = max(len(f"kit {kit}"), len("store round trip"), *(len(f"server {s}") for s in servers))
    click.echo("checking side by side; each usually takes: " + "; ".join(f"{k} {v}" for k, v in COSTS.items()),
               err=True)
    import asyncio  # here: `evoteam doctor --help` starts no event loop

    checks = asyncio.run(run_checks(settings, kit, servers, done=lambda c: click.echo(_line(c, width))))
    failed = [c.name for c in checks if not c.ok]
    if failed:
        raise click.ClickException(f"{len(failed)} check(s) failed: {', '.join(failed)}")
    warned = [c.name for c in checks if c.warning]
    click.echo(f"all {len(checks)} checks passed" + (f" ({', '.join(warned)}: see the warning above)" if warned else ""))
