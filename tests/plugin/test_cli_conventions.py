"""Python conventions of the command line: `python -m evoteam`, --json on every read command,
distinct exit codes documented in --help, shell completion."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from evoteam.cli import main
from evoteam.exitcodes import BAD_INPUT, CANDIDATE_FAILED, NOT_FOUND

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("EVOTEAM_DB", str(tmp_path / "kb.db"))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def _seed(db: Path) -> str:
    from evoteam.servers.knowledge.local import LocalKnowledgeStore
    from evoteam.servers.knowledge.models import LearningCreate, RunCreate

    async def go():
        async with LocalKnowledgeStore.open(db) as store:
            run = await store.start_run(RunCreate(goal="vectorise the rmsnorm loop", budget_usd=3.0))
            await store.add_learning(LearningCreate(run_id=run.id, text="unrolling by four halves the time"))
            return run.id

    return asyncio.run(go())


def test_python_dash_m_runs_the_cli():
    proc = subprocess.run([sys.executable, "-m", "evoteam", "--version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.startswith("evoteam, version"), proc.stderr


def test_help_documents_exit_codes_and_completion():
    out = _invoke("--help").output
    assert "2 bad input" in out and "3 not found" in out and "4 candidate failed" in out
    assert "_EVOTEAM_COMPLETE=bash_source" in out


def test_completion_script_is_generated():
    env = {**os.environ, "_EVOTEAM_COMPLETE": "bash_source"}
    proc = subprocess.run([str(Path(sys.executable).parent / "evoteam")], env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0 and "complete " in proc.stdout and "_evoteam_completion" in proc.stdout


def test_read_commands_print_json(env):
    run_id = _seed(env / "kb.db")
    learnings = json.loads(_invoke("kb", "learnings", run_id, "--json").output)
    assert [x["text"] for x in learnings["items"]] == ["unrolling by four halves the time"]
    hits = json.loads(_invoke("kb", "search", "unrolling", "--json").output)
    assert hits["total"] == 1 and hits["items"][0]["kind"] == "learning"
    assert json.loads(_invoke("team", "versions", run_id, "--json").output) == []
    budget = json.loads(_invoke("team", "budget", run_id, "--json").output)
    assert budget["run_id"] == run_id and budget["budget_usd"] == 3.0


def test_corpus_search_json(env, tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "note.md").write_text("# Occupancy\n\nWarp occupancy limits register use per thread.\n")
    assert _invoke("corpus", "index", str(corpus)).exit_code == 0
    passages = json.loads(_invoke("corpus", "search", "occupancy registers", "--dir", str(corpus), "--json").output)
    assert passages and "occupancy" in passages[0]["content"].lower()


def test_exit_codes(env):
    assert _invoke("kb", "learnings", "run_nope").exit_code == NOT_FOUND
    assert _invoke("team", "versions", "run_nope").exit_code == NOT_FOUND
    assert _invoke("kb", "runs", "--status", "bogus").exit_code == BAD_INPUT
    wrong = ROOT / "task_kits" / "rmsnorm_cpu" / "examples" / "wrong.py"
    assert _invoke("bench", "run", "no_such_kit", str(wrong), "--no-record").exit_code == NOT_FOUND
    assert _invoke("bench", "run", "rmsnorm_cpu", str(wrong), "--no-record", "--json").exit_code == CANDIDATE_FAILED


# The README and `evoteam --help` promise "every read command takes --json". Every command is
# named here as a read (it must take --json), a read that prints only JSON, or an action (it
# runs, writes or serves something): a command added later fails the walk until it is placed.
READS = {"kb runs", "kb learnings", "kb search", "kb review", "kb history", "kb candidates", "kb prior", "token list",
         "bench list", "bench describe", "bench queue", "corpus search", "team status", "team versions",
         "team budget", "report"}
ONLY_JSON = {"hook show"}
ACTIONS = {"serve", "supervise", "compare", "doctor", "install-plugin", "bench remeasure", "bench trust", "bench run",
           "bench export-traces", "bench serve", "corpus index", "kb start", "kb export", "kb import",
           "kb migrate-store", "kb finish", "kb resume", "token add", "token revoke", "hook run", "hook activate",
           "hook deactivate", "hook pause", "hook resume",
           "team prompt"}  # the supervisor prompt: a text written for a model, not a listing


def _leaves(group, path=()):
    import click

    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if isinstance(command, click.Group):
            yield from _leaves(command, (*path, name))
        elif command is not None:
            yield " ".join((*path, name)), command


def test_every_read_command_takes_json():
    leaves = dict(_leaves(main))
    assert not READS & ACTIONS and not ONLY_JSON & (READS | ACTIONS)
    unplaced = sorted(set(leaves) - READS - ONLY_JSON - ACTIONS)
    assert not unplaced, f"say whether these are reads (they then take --json) or actions: {unplaced}"
    assert not (READS | ONLY_JSON | ACTIONS) - set(leaves)  # no stale names
    without = sorted(name for name in READS if not any("--json" in p.opts for p in leaves[name].params))
    assert not without, without


def test_kb_review_lists_flagged_candidates_as_json(env):
    from evoteam.servers.knowledge.local import LocalKnowledgeStore
    from evoteam.servers.knowledge.models import CandidateCreate, RunCreate

    async def seed():
        async with LocalKnowledgeStore.open(env / "kb.db") as store:
            run = await store.start_run(RunCreate(goal="flagged ones", kit="rmsnorm_cpu"))
            flagged = await store.record_candidate(CandidateCreate(run_id=run.id, code="a = 1\n", status="PASSED",
                                                                   score=40.0, flagged=True))
            await store.record_candidate(CandidateCreate(run_id=run.id, code="a = 2\n", status="PASSED", score=2.0))
            return run.id, flagged.id

    run_id, flagged_id = asyncio.run(seed())
    listed = json.loads(_invoke("kb", "review", run_id, "--json").output)
    assert listed["total"] == 1 and [c["id"] for c in listed["items"]] == [flagged_id]
    assert listed["items"][0]["flagged"] is True
    text = _invoke("kb", "review", run_id).output
    assert flagged_id in text and "1 flagged candidate(s)" in text
