"""The run's best as the supervisor reads it outside get_run: team_status (the tool and `evoteam
team status`, whose quick read takes the store's path once the run holds paired rounds), the
headless supervisor's wake message and the Stop hook's reason. Each said the top by intervals
alone, as a bare number ("Best score: 4.35123"), after a compare had found another kernel faster
(tests/knowledge/test_paired_best.py covers get_run, the brief and the hooks' run summary)."""

from __future__ import annotations

import asyncio
import io
import re
from datetime import UTC, datetime
from pathlib import Path

from click.testing import CliRunner
from rich.console import Console

from evoteam.cli import main
from evoteam.codehash import code_hash
from evoteam.plugin import hooks, state
from evoteam.servers.knowledge.comparisons import keep_comparison, record_of
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.models import CandidateCreate, RunCreate
from evoteam.servers.knowledge.store import Actor
from evoteam.servers.team.core import TeamService
from evoteam.servers.team.quickstatus import team_status as quick_status
from evoteam.servers.team.store import TeamStore
from evoteam.supervisor.driver import DriverConfig, SupervisorDriver
from evoteam.supervisor.view import render_status
from tests.knowledge.test_paired_best import _two
from tests.report.test_own_style_gain import RETURNS_1, RETURNS_2, _few, _keep


def _cli(db: Path, *args: str) -> str:
    result = CliRunner().invoke(main, list(args), env={"EVOTEAM_DB": str(db), "HOME": str(db.parent),
                                                        "USER": "u", "LOGNAME": "u"})
    assert result.exit_code == 0, result.output
    return result.output


def _status_line(db: Path, run_id: str) -> str:
    return _cli(db, "team", "status", run_id).splitlines()[0]


def test_team_status_and_the_wake_name_the_candidate_found_better_side_by_side(tmp_path: Path):
    db = tmp_path / "kb.db"

    async def setup() -> tuple[str, dict[str, str]]:
        async with LocalKnowledgeStore.open(db, Actor(user="u", client="t")) as kb:
            run_id, ids = await _two(kb, tmp_path)
            bench = kb.with_actor(Actor(user="u", client="t", role="Role1", team_version=1, verifier=True))
            code = "def run(x):\n    return 2 * x\n"
            ids["third"] = (await bench.record_candidate(CandidateCreate(
                run_id=run_id, code=code, code_hash=code_hash(code), status="PASSED", score=2.0, verified=True,
                samples=_few(2.0, 3, .02, 20)))).id
            return run_id, ids

    run_id, ids = asyncio.run(setup())
    assert quick_status({"db": str(db)}, run_id, None) is not None  # no paired rounds: the quick read answers
    before = _status_line(db, run_id)
    assert f" {ids['narrow']} " in before and "compares find" not in before, before
    # Every listing says the best with its 95% interval, as the status line does, not as a bare number.
    shown = before.split("  best ")[1].split(f" {ids['narrow']}")[0]
    assert re.fullmatch(r"4\.0\d* \(\d\.\d+–\d\.\d+\)", shown), before
    assert f"best {shown}  " in _cli(db, "kb", "runs"), _cli(db, "kb", "runs")

    async def compare_and_read():
        async with LocalKnowledgeStore.open(db, Actor(user="u", client="t")) as kb:
            # Held-out rounds of the best, and dev rounds of two others, crown nothing here: still quick.
            bench = kb.with_actor(Actor(user="u", client="t", verifier=True))
            for a, b, split, ratio in ((ids["narrow"], ids["wide"], "heldout", 1.08),
                                       (ids["wide"], ids["third"], "dev", 1.0)):
                await keep_comparison(bench, run_id, record_of(
                    a, b, kit="k", split=split, kind="kernel", ranges=None, contended=False,
                    samples={"a": [ratio] * 30}, measured_at=datetime.now(UTC)))
            assert quick_status({"db": str(db)}, run_id, None) is not None
            await _keep(kb, run_id, ids["narrow"], ids["wide"], 1.08)
            # The best in a kept dev pair: the store's path reads the rounds (the quick read does not).
            assert quick_status({"db": str(db)}, run_id, None) is None
            svc = TeamService(TeamStore(kb), project_dir=tmp_path)
            status = await svc.team_status(run_id)
            driver = SupervisorDriver(svc, run_id, waker=None, config=DriverConfig(interval_s=3600, poll_s=0.05))
            wake = await driver._wake_message(1, "team_finished", await kb.get_run(run_id), status)
            return status, wake

    status, wake = asyncio.run(compare_and_read())
    assert status.best_candidate_id == ids["narrow"] and status.paired_best == ids["wide"], status
    after = _status_line(db, run_id)
    console = Console(record=True, width=240, file=io.StringIO())
    console.print(render_status(status, []))  # the supervisor's live view
    assert f"{ids['narrow']} (compares find {ids['wide']} better: crown it)" in console.export_text()
    assert f"{ids['narrow']} (compares find {ids['wide']} better: crown it)" in after, after
    best = next(line for line in wake.splitlines() if line.startswith("Best so far: "))
    assert best.startswith(f"Best so far: {shown} "), best  # the score with its interval, not a bare number
    assert f"(candidate {ids['narrow']}); the run's compares (bench.compare, bench.remeasure) find {ids['wide']} " \
           f"better than it: {ids['wide']} is the one to beat and to crown" in best, best
    assert f"(best {shown} {ids['narrow']} (compares find {ids['wide']} better: crown it))" in \
        _cli(db, "kb", "finish", run_id, "--reason", "done")


def test_the_stop_hooks_reason_names_the_candidate_found_better(tmp_path: Path, monkeypatch):
    for var in ("CLAUDE_PROJECT_DIR", "EVOTEAM_PROJECT_DIR", "EVOTEAM_RUN", "EVOTEAM_AUTOCONTINUE", "EVOTEAM_HOOKS",
                "EVOTEAM_KNOWLEDGE_URL", "EVOTEAM_MAX_IDLE_CONTINUES"):
        monkeypatch.delenv(var, raising=False)
    db, project = tmp_path / "kb.db", tmp_path / "project"
    project.mkdir()
    monkeypatch.setenv("EVOTEAM_DB", str(db))
    monkeypatch.setenv("EVOTEAM_HOOK_LOG", str(tmp_path / "hooks.log"))
    monkeypatch.setenv("EVOTEAM_HOOK_WARM", "0")

    async def setup() -> tuple[str, dict[str, str]]:
        async with LocalKnowledgeStore.open(db, Actor(user="u", client="t")) as kb:
            run_id = (await kb.start_run(RunCreate(goal="g", kit="k", direction="maximize", x0=1.0,
                                                   budget_usd=5.0))).id
            bench = kb.with_actor(Actor(user="u", client="t", verifier=True))
            ids = {name: (await bench.record_candidate(CandidateCreate(
                run_id=run_id, code=code, code_hash=code_hash(code), status="PASSED", score=score, verified=True,
                samples=samples))).id for name, code, score, samples in (
                    ("narrow", RETURNS_1, 4.0, _few(4.0, 1, .02, 20)), ("wide", RETURNS_2, 4.3, _few(4.2, 2, 2.4, 8)))}
            await _keep(kb, run_id, ids["narrow"], ids["wide"], 1.08)
            return run_id, ids

    run_id, ids = asyncio.run(setup())
    state.activate(project, run_id, session_id="sess-1")
    reply = hooks.stop({"session_id": "sess-1", "transcript_path": "/nonexistent", "cwd": str(project),
                        "hook_event_name": "Stop", "background_tasks": []})
    assert reply and reply["decision"] == "block", reply
    assert "best so far " in reply["reason"] and f"(candidate {ids['narrow']}); the run's compares " \
           f"(bench.compare, bench.remeasure) find {ids['wide']} better than it" in reply["reason"], reply
