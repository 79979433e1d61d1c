"""`evoteam doctor`: the self-check that ends `./install.sh`.

It proves the product works on this machine with its embedded defaults: each MCP server
starts over stdio and lists its tools, the store round-trips a run through export and import,
and a CPU kit's baseline evaluates — all on a scratch store — and it checks the user's own store
(read-only: integrity, schema, permissions; or the shared server it points at).
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import click
from mcp import Client, StdioServerParameters
from pydantic import BaseModel

from evoteam import python_module_args
from evoteam.config import Settings
from evoteam.errors import first_leaf

SERVERS = ("knowledge", "team", "retrieval", "bench")
DEFAULT_KIT = "rmsnorm_cpu"


class Check(BaseModel):
    name: str
    ok: bool
    detail: str
    seconds: float


async def _timed(name: str, fn: Callable[[], Awaitable[str]]) -> Check:
    start = time.perf_counter()
    try:
        detail = await fn()
        ok = True
    except Exception as exc:  # a failed check is reported, never raised
        detail, ok = f"{type(exc).__name__}: {first_leaf(exc)}", False
    return Check(name=name, ok=ok, detail=detail, seconds=time.perf_counter() - start)



def _server_params(name: str, env: dict[str, str]) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=python_module_args("evoteam.cli", "serve", name),
                                 env=env)


async def check_server(name: str, env: dict[str, str]) -> str:
    async with Client(_server_params(name, env)) as client:
        tools = [t.name for t in (await client.list_tools()).tools]
    if not tools:
        raise RuntimeError("started but lists no tools")
    return f"{len(tools)} tools: {', '.join(tools)}"


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


async def check_kit(env: dict[str, str], kit: str) -> str:
    """Evaluate the kit's own baseline through the bench server, as an agent would."""
    async with Client(_server_params("bench", env)) as client:
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
    return (f"{kit}: baseline {status}, speedup over itself {score:.2f}x ({len(data.get('workloads', []))} "
            f"workloads){confined}")


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
        from evoteam.servers.knowledge.pg import check_database

        return await asyncio.to_thread(check_database, settings.db)
    return await asyncio.to_thread(_check_local_store, Path(settings.db).expanduser())


def _check_local_store(path: Path) -> str:
    import sqlite3
    import stat

    from evoteam.servers.knowledge.db import _load_components, connect_readonly, current_versions, is_current
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
    notes = ["schema current" if is_current(versions) else "schema will be upgraded on the next write"]
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        notes.append(f"WARNING: readable by others (mode {mode:o}); run `chmod 600 {path}`")
    if not os.access(path, os.W_OK):
        notes.append("read-only here (reads work, writes are refused)")
    return f"{path}: integrity ok, " + ", ".join(notes)


async def run_checks(settings: Settings, kit: str, servers: tuple[str, ...] = SERVERS) -> list[Check]:
    with tempfile.TemporaryDirectory(prefix="evoteam-doctor-") as tmp:
        workdir = Path(tmp)
        # The checks use a scratch store, so a self-check never writes into the user's data.
        env = {**os.environ, "EVOTEAM_DB": str(workdir / "doctor.db"), "EVOTEAM_PREDICTOR": "agent"}
        env.pop("EVOTEAM_KNOWLEDGE_URL", None)
        checks = [await _timed(f"server {name}", lambda n=name: check_server(n, env)) for name in servers]
        checks.append(await _timed("store round trip", lambda: check_round_trip(env, workdir)))
        if "bench" in servers:
            checks.append(await _timed(f"kit {kit}", lambda: check_kit(env, kit)))
        checks.append(await _timed("your store", lambda: check_store(settings)))
        return checks


@click.command()
@click.option("--kit", default=DEFAULT_KIT, show_default=True, help="The CPU kit whose baseline to evaluate.")
@click.option("--server", "servers", multiple=True, type=click.Choice(SERVERS), help="Check only these servers.")
@click.pass_obj
def doctor(settings: Settings, kit: str, servers: tuple[str, ...]) -> None:
    """Check that every server starts, the store round-trips and a CPU kit evaluates."""
    checks = asyncio.run(run_checks(settings, kit, servers or SERVERS))
    width = max(len(c.name) for c in checks)
    for c in checks:
        mark = click.style("ok  ", fg="green") if c.ok else click.style("FAIL", fg="red")
        click.echo(f"{mark} {c.name:<{width}}  {c.seconds:5.1f}s  {c.detail}")
    failed = [c.name for c in checks if not c.ok]
    if failed:
        raise click.ClickException(f"{len(failed)} check(s) failed: {', '.join(failed)}")
    click.echo(f"all {len(checks)} checks passed")
