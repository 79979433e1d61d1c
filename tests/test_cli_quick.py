"""Issue 24: the local read commands answer quickly (knowledge/quickread.py) and exactly as the
store's normal path does. Each command runs twice on the same real store file — quick, and with
EVOTEAM_QUICK_READS=0 — and the outputs must be identical; the quick run's imports are counted
(no pydantic, asyncio, aiosqlite, numpy, MCP): no timed asserts (benchmarks/bench_cli.py times
them). Where the quick path cannot answer exactly (another schema, a database URL, a shared
server) it steps aside."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from evoteam.servers.knowledge import quickread
from evoteam.servers.knowledge.auth import add_token, revoke_token
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.models import CandidateCreate, HistoryEntryCreate, LearningCreate, RunCreate
from evoteam.servers.knowledge.store import Actor
from tests.support.cliprobe import RUN_CLI

# What a quick read must never import; and, for the kit listing (its manifests are pydantic
# models), what it must not import beyond pydantic.
HEAVY = {"pydantic", "pydantic_core", "asyncio", "aiosqlite", "numpy", "mcp", "rich", "yaml", "psycopg", "httpx",
         "anyio", "anthropic"}
NOT_FOR_KIT_LISTING = {"numpy", "asyncio", "aiosqlite", "mcp", "yaml", "psycopg", "httpx", "anyio", "anthropic"}

PROBE = RUN_CLI + """print("PROBE", json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


async def _fill(db: Path) -> dict[str, str]:
    """Two runs with what the listings print: ranked, failed, flagged, held-out and
    self-reported candidates with parents and roles; NDG; history with and without a version;
    a superseded learning; an active and a revoked token."""
    async with LocalKnowledgeStore.open(db, Actor.local(verifier=True)) as store:
        first = await store.start_run(RunCreate(goal="an older run that finished", kit="rmsnorm_cpu"))
        await store.update_run(first.id, status="finished")
        run = await store.start_run(RunCreate(goal="make rmsnorm fast " + "x" * 80, kit="rmsnorm_cpu", x0=1.0,
                                              best_known=3.0, budget_usd=5.0))
        role = store.with_actor(Actor.local(verifier=True, role="Profiling Scientist", team_version=2))
        parent = await store.record_candidate(CandidateCreate(run_id=run.id, code="a = 1\n", status="PASSED",
                                                              score=1.25, verified=True))
        await role.record_candidate(CandidateCreate(run_id=run.id, code="a = 2\n", status="PASSED", score=2.0,
                                                    verified=True, parent_id=parent.id))
        await store.record_candidate(CandidateCreate(run_id=run.id, code="a = 3\n", status="PASSED", score=9.0))
        await store.record_candidate(CandidateCreate(run_id=run.id, code="a = 4\n", status="RUNTIME_ERROR",
                                                     verified=True, notes="crashed"))
        await store.record_candidate(CandidateCreate(run_id=run.id, code="a = 5\n", status="PASSED", score=1.9,
                                                     split="heldout", verified=True))
        await store.record_candidate(CandidateCreate(run_id=run.id, code="a = 6\n", status="PASSED", score=7.0,
                                                     verified=True, flagged=True))
        old = await store.add_learning(LearningCreate(run_id=run.id, text="vectorise the reduction"))
        await store.add_learning(LearningCreate(run_id=run.id, text="fuse it", supersedes=old.id))
        await role.add_learning(LearningCreate(run_id=run.id, text="tiles of 64 rows\n  keep the cache", kind="technique",
                                               tags=["cache", "tiling"], evidence=[parent.id], confidence=0.9))
        await store.add_learning(LearningCreate(run_id=run.id, text="float64 everywhere", kind="dead_end"))
        await store.add_history(HistoryEntryCreate(run_id=run.id, diagnosis="bandwidth bound"))
        await role.add_history(HistoryEntryCreate(run_id=run.id, team_version=2, observed_behaviour="  tried tiling ",
                                                  outcome="1.6x"))
        await _team(store, run.id, db.parent)
        await add_token(store.db, "alice")
        revoked = await add_token(store.db, "bob", project="p1", verifier=True)
        await revoke_token(store.db, revoked.id)
        return {"run": run.id, "finished": first.id}


async def _team(store: LocalKnowledgeStore, run_id: str, folder: Path) -> None:
    """Two team versions of the run; in the current one a role that ran (cost, turns, a long last
    message whose tail is shown), one that failed, and one never started; money spent."""
    from evoteam.servers.knowledge.connect import component_store
    from evoteam.servers.knowledge.models import CostCreate
    from evoteam.servers.team.core import TeamService
    from evoteam.servers.team.models import SessionUpdate, TeamDesign

    team = TeamService(component_store("team", store), kb=store, write_agent_files=False, project_dir=folder)
    for v, names in ((1, ["Profiler"]), (2, ["Workload Analyst", "Challenger", "Knowledge Integrator"])):
        await team.design_team(TeamDesign.model_validate({
            "run_id": run_id, "diagnosis": f"diagnosis {v}", "rationale": "why",
            "roles": [{"name": n, "mandate": f"do the {n} work", "isolation": "shared"} for n in names]}))
    ran = await team.team.create_session(run_id, 2, "Workload Analyst", "workload-analyst", "claude", cap_usd=2.0)
    await team.team.update_session(ran.id, SessionUpdate(status="running", cost_usd=0.75, turns=12,
                                                         last_message="First part. " * 60 + "The end\nof it."))
    failed = await team.team.create_session(run_id, 2, "Challenger", "challenger", "codex")
    await team.team.update_session(failed.id, SessionUpdate(status="failed", error="codex is not installed"))
    await store.with_actor(Actor.local(role="Challenger", team_version=2)).record_cost(
        CostCreate(run_id=run_id, usd=1.25, source="transcript"))
    await store.record_cost(CostCreate(run_id=run_id, usd=0.5, source="supervisor_transcript"))


@pytest.fixture
def store_env(tmp_path: Path) -> tuple[dict[str, str], dict[str, str]]:
    db = tmp_path / "state" / "kb.db"
    ids = asyncio.run(_fill(db))
    env = {"EVOTEAM_DB": str(db), "HOME": str(tmp_path), "EVOTEAM_HOME": str(tmp_path / ".evoteam"),
           "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "COLUMNS": "120"}
    return env, ids


def _cli(env: dict[str, str], cwd: Path, *args: str, quick: bool = True) -> subprocess.CompletedProcess:
    env = env if quick else {**env, quickread.ENV_SWITCH: "0"}
    return subprocess.run([sys.executable, "-m", "evoteam", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=180)


def _probe(env: dict[str, str], cwd: Path, *args: str) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE, *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=180)
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("PROBE ")), None)
    assert line is not None, done.stdout + done.stderr
    return json.loads(line[len("PROBE "):])


QUICK_READS = [("kb", "runs"), ("kb", "runs", "--status", "active"), ("kb", "runs", "--status", "paused"),
               ("kb", "candidates", "{run}"), ("kb", "history", "{run}"), ("kb", "candidates", "{finished}"),
               ("kb", "history", "{finished}"), ("kb", "learnings", "{run}"), ("kb", "learnings", "{finished}"),
               ("token", "list"), ("bench", "queue"), ("team", "status"),
               ("team", "status", "{run}", "--version", "1"), ("team", "status", "{finished}")]


@pytest.mark.parametrize("args", QUICK_READS, ids=" ".join)
def test_a_quick_read_prints_what_the_store_prints_and_imports_none_of_it(store_env, tmp_path, args):
    env, ids = store_env
    args = tuple(a.format(**ids) for a in args)
    quick, normal = _cli(env, tmp_path, *args), _cli(env, tmp_path, *args, quick=False)
    assert quick.returncode == normal.returncode == 0, (quick.stderr, normal.stderr)
    assert quick.stdout == normal.stdout and quick.stderr == normal.stderr
    assert quick.stdout.strip()
    got = _probe(env, tmp_path, *args)
    assert got["code"] in (0, None)
    tops = {m.split(".")[0] for m in got["modules"]}
    assert not tops & HEAVY, sorted(tops & HEAVY)


def test_the_listings_show_what_was_stored(store_env, tmp_path):
    """The comparison above would pass if both paths printed nothing useful: say what they print."""
    env, ids = store_env
    runs = _cli(env, tmp_path, "kb", "runs").stdout.splitlines()
    assert runs[0].startswith(ids["run"]) and runs[1].startswith(ids["finished"])  # newest first
    # the best ranks only verified, unflagged, passing dev candidates: 2.0 (not 9.0, 7.0 or 1.9)
    assert " best 2  NDG 50.0  6 candidates  3 learnings  rmsnorm_cpu  make rmsnorm fast" in runs[0]
    cands = _cli(env, tmp_path, "kb", "candidates", ids["run"]).stdout
    assert "Profiling Scientist v2  parent cand_" in cands and "FLAGGED" in cands and "RUNTIME_ERROR" in cands
    assert "heldout" in cands
    history = _cli(env, tmp_path, "kb", "history", ids["run"]).stdout
    assert "team v-" in history and "team v2  (Profiling Scientist v2," in history and "observed: tried tiling" in history
    doc = _cli(env, tmp_path, "kb", "learnings", ids["run"]).stdout
    assert doc.index("## Techniques that work") < doc.index("## Observations") < doc.index("## Dead ends")
    assert "- tiles of 64 rows keep the cache" in doc and "by Profiling Scientist · v2 · tags: cache, tiling" in doc
    assert "fuse it" in doc and "vectorise the reduction" not in doc  # superseded
    team = _cli(env, tmp_path, "team", "status").stdout.splitlines()
    assert re.match(rf"run {ids['run']} \(active\)  team v2  best 2 cand_[0-9a-f]+  spent \$1\.75 of \$5\.00  working",
                    team[0]), team[0]
    assert "Workload Analyst" in team[1] and "running" in team[1] and "12 turns  $0.75  … " in team[1]
    assert "Challenger" in team[2] and "failed" in team[2] and "codex is not installed" in team[2]
    assert "Knowledge Integrator" in team[3] and "planned" in team[3] and "subagent" in team[3]
    tokens = _cli(env, tmp_path, "token", "list").stdout
    assert "alice" in tokens and "active" in tokens and "revoked " in tokens and "verifier" in tokens


def test_the_json_and_missing_runs_take_the_normal_path(store_env, tmp_path):
    env, ids = store_env
    got = _probe(env, tmp_path, "kb", "candidates", "run_missing")
    assert got["code"] == 3  # the store's own not-found message and code
    assert "aiosqlite" in got["modules"]
    done = _cli(env, tmp_path, "kb", "runs", "--json")
    assert done.returncode == 0 and len(json.loads(done.stdout)["items"]) == 2


def test_the_kit_listing_imports_no_numpy_no_event_loop_and_builds_only_manifests(store_env, tmp_path):
    env, _ = store_env
    got = _probe(env, tmp_path, "bench", "list")
    assert got["code"] in (0, None)
    tops = {m.split(".")[0] for m in got["modules"]}
    assert not tops & NOT_FOR_KIT_LISTING, sorted(tops & NOT_FOR_KIT_LISTING)
    # Loading the kits, the listing also keeps each kit's description for the kit index
    # (tests/test_cli_kit_index.py): the timing method's words, a text-only module, and nothing
    # else of the measurement code.
    measurement = {m for m in got["modules"] if m.startswith("evoteam.servers.bench.measurement")}
    assert measurement <= {"evoteam.servers.bench.measurement", "evoteam.servers.bench.measurement.method"}, \
        sorted(measurement)


def test_describing_a_kit_imports_no_numpy_nor_the_measurement_code(store_env, tmp_path):
    env, _ = store_env
    got = _probe(env, tmp_path, "bench", "describe", "rmsnorm_cpu")
    assert got["code"] in (0, None)
    tops = {m.split(".")[0] for m in got["modules"]}
    assert not tops & NOT_FOR_KIT_LISTING, sorted(tops & NOT_FOR_KIT_LISTING)
    # the timing method's words come from a text-only module
    measurement = {m for m in got["modules"] if m.startswith("evoteam.servers.bench.measurement.")}
    assert measurement == {"evoteam.servers.bench.measurement.method"}, sorted(measurement)


@pytest.mark.parametrize("args", [("--help",), ("kb", "--help"), ("token", "--help"), ("team", "--help"),
                                  ("bench", "--help"), ("kb", "runs", "--help"), ("doctor", "--help"),
                                  ("report", "--help"), ("bench", "list", "--help")], ids=" ".join)
def test_help_imports_nothing_heavy(store_env, tmp_path, args):
    env, _ = store_env
    got = _probe(env, tmp_path, *args)
    assert got["code"] in (0, None)
    tops = {m.split(".")[0] for m in got["modules"]}
    assert not tops & HEAVY, sorted(tops & HEAVY)


def _values(db) -> dict:
    return {"db": db, "knowledge_url": None}


def test_a_store_at_another_schema_version_is_left_to_the_store(store_env, tmp_path):
    env, _ = store_env
    db = Path(env["EVOTEAM_DB"])
    assert quickread.runs(_values(db)) is not None
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE schema_versions SET version = version + 1 WHERE component = 'team'")
    conn.close()
    assert quickread.runs(_values(db)) is None  # a newer file: the store refuses it, with its message
    done = _cli(env, tmp_path, "kb", "runs")
    assert done.returncode == 1 and "newer evoteam" in done.stderr


def test_no_quick_read_for_a_database_url_a_shared_server_or_no_file(tmp_path, store_env):
    env, _ = store_env
    db = Path(env["EVOTEAM_DB"])
    assert quickread.runs({"db": "postgresql://u@127.0.0.1/x"}) is None
    assert quickread.runs({"db": db, "knowledge_url": "http://127.0.0.1:1/mcp"}) is None
    assert quickread.tokens({"db": db, "knowledge_url": "http://127.0.0.1:1/mcp"}) is not None  # the file's own
    assert quickread.runs(_values(tmp_path / "none.db")) is None
    assert not (tmp_path / "none.db").exists()  # and nothing is created by looking


def test_the_schema_versions_are_those_this_evoteam_writes():
    from evoteam.servers.knowledge import db

    db._load_components()
    assert quickread.SCHEMA_VERSIONS == {c: len(m) for c, m in db._MIGRATIONS.items()}, (
        "a migration was added: set quickread.SCHEMA_VERSIONS to the registry's versions")


def test_the_queue_folder_is_the_bench_state_folder(tmp_path, monkeypatch):
    from evoteam.config import load_settings
    from evoteam.configsource import setting_values, state_root
    from evoteam.servers.bench.formats.kits import state_dir

    monkeypatch.setenv("EVOTEAM_HOME", str(tmp_path / "h"))  # evoteam_home reads the process's environment
    for db in (str(tmp_path / "a" / "kb.db"), "postgresql://u@127.0.0.1/x"):
        env = {"HOME": str(tmp_path), "EVOTEAM_DB": db}
        assert state_root(setting_values(tmp_path, env)["db"]) / "bench" == state_dir(load_settings(tmp_path, env))


def test_a_broken_config_file_is_one_line_on_the_quick_path_too(store_env, tmp_path):
    env, _ = store_env
    (tmp_path / "evoteam.toml").write_text("db = [unclosed\n")
    for args in (("kb", "runs"), ("team", "status"), ("bench", "queue")):
        done = _cli(env, tmp_path, *args)
        assert done.returncode == 1, (args, done.stdout)
        assert done.stderr.startswith("Error: cannot read ") and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_the_settings_stand_in_copies_and_pickles_as_the_model(tmp_path, monkeypatch):
    """Commands hand the stand-in to code that copies or pickles settings (the pool, Ray)."""
    import copy
    import pickle

    from evoteam.clisettings import LazySettings

    monkeypatch.setenv("EVOTEAM_DB", str(tmp_path / "kb.db"))
    lazy = LazySettings()
    assert lazy.values()["db"] == str(tmp_path / "kb.db")
    for twin in (pickle.loads(pickle.dumps(lazy)), copy.deepcopy(lazy)):
        assert twin.db == tmp_path / "kb.db" and twin.model_dump()["db"] == tmp_path / "kb.db"


def test_a_postgresql_store_is_read_through_the_store(postgres_url, tmp_path):
    """EVOTEAM_DB=postgresql://... : the listings answer as before, through the normal path."""

    async def fill() -> str:
        async with LocalKnowledgeStore.open(postgres_url, Actor.local(verifier=True)) as store:
            run = await store.start_run(RunCreate(goal="rmsnorm on a shared store", kit="rmsnorm_cpu", x0=1.0,
                                                  best_known=3.0))
            await store.record_candidate(CandidateCreate(run_id=run.id, code="a = 1\n", status="PASSED", score=2.0,
                                                         verified=True))
            await store.add_learning(LearningCreate(run_id=run.id, text="fuse the passes", kind="technique"))
            return run.id

    run_id = asyncio.run(fill())
    env = {"EVOTEAM_DB": postgres_url, "HOME": str(tmp_path), "EVOTEAM_HOME": str(tmp_path / ".evoteam"),
           "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    runs = _cli(env, tmp_path, "kb", "runs")
    assert runs.returncode == 0, runs.stderr
    assert runs.stdout.startswith(run_id) and " best 2  NDG 50.0  1 candidates  1 learnings  rmsnorm_cpu" in runs.stdout
    cands = _cli(env, tmp_path, "kb", "candidates", run_id)
    assert cands.returncode == 0 and "PASSED" in cands.stdout and "score 2 " in cands.stdout, cands.stderr
    doc = _cli(env, tmp_path, "kb", "learnings", run_id)
    assert doc.returncode == 0 and "## Techniques that work" in doc.stdout and "fuse the passes" in doc.stdout
    status = _cli(env, tmp_path, "team", "status", run_id)
    assert status.returncode == 0 and status.stdout.startswith(f"run {run_id} (active)  team vNone"), status.stderr
    got = _probe(env, tmp_path, "kb", "runs")
    assert got["code"] in (0, None) and "evoteam.servers.knowledge.pg" in got["modules"]  # the store's own path


def test_a_store_under_a_folder_with_uri_characters_is_read_where_it_is(tmp_path):
    """'#', '?' and '%' in the store's path are not URI syntax to SQLite: the read opens the file
    itself, read-only, and leaves nothing beside it (unescaped, '…/proj#2/kb.db' opened '…/proj'
    read-write and made it)."""
    from evoteam.servers.knowledge.db import current_versions

    folder = tmp_path / "proj#2 50%41?x"
    folder.mkdir()
    db = folder / "kb.db"

    async def make() -> str:
        async with LocalKnowledgeStore.open(db, Actor.local()) as store:
            return (await store.start_run(RunCreate(goal="uri characters"))).id

    run_id = asyncio.run(make())
    before = sorted(p.name for p in tmp_path.iterdir())
    listed = quickread.runs({"db": str(db)})
    assert listed is not None and [r.id for r in listed] == [run_id]
    assert current_versions(db)  # the read-only schema check reads the same file
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no stray 'proj' file made
