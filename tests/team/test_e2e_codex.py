"""`evoteam supervise --runner codex` end to end: the supervisor is the real Claude Code CLI
against the scripted Messages API; each role is the real Codex CLI (`codex exec`, pinned in
tests/support/codex_cli.py) against the scripted Responses API, calling the real evoteam
servers. One version completes (the role evaluates a candidate and records a learning, the
supervisor reflects), and the supervisor survives a kill and a restart."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.store import Actor
from evoteam.servers.team.store import TeamStore
from tests.support.claude_cli import claude_env
from tests.support.codex_cli import codex_bin, provider_config
from tests.support.scripted_api import Rule
from tests.support.scripted_responses import Call, ScriptedResponses
from tests.support.scripted_responses import Rule as CodexRule
from tests.team.conftest import git_project
from tests.team.test_e2e_claude import CAND_RE, KIT, RUN_RE, better_code, cycle_rules

pytestmark = [pytest.mark.claude_cli, pytest.mark.slow]

PROBER = "You are the **Distance Prober**"


def _run_id(rec) -> str:
    m = RUN_RE.search("\n".join(rec.user_texts()))
    assert m, rec.user_texts()[-1][:500]
    return m[1] or m[2]


def _json_output(text: str) -> dict:
    return json.loads(text.split("Output:", 1)[-1])


def prober_rules(stall: threading.Event | None = None) -> list[CodexRule]:
    def evaluate(rec):
        if stall is not None and not stall.is_set():
            stall.wait(120)  # the supervisor is killed while this request is pending
        return Call("evaluate", {"kit": KIT, "code": better_code(), "run_id": _run_id(rec)}, namespace="mcp__bench")

    def learning(rec):
        cand = CAND_RE.findall(rec.outputs()[-1])
        return Call("add_learning", {"run_id": _run_id(rec), "text": "row-blocked matrix product form beats "
                                     "broadcasting", "kind": "technique", "evidence": cand[:1], "confidence": 0.8},
                    namespace="mcp__knowledge")

    return [CodexRule(PROBER, [evaluate, learning, "report: evaluated the better variant and recorded why"]),
            CodexRule("You are the **Budget Burner**", ["nothing to burn here"])]


def supervisor_rules() -> list[Rule]:
    """The Claude test's supervisor wakes: design v1 (the prober); reflect and design v2."""
    return [r for r in cycle_rules() if r.name.startswith("wake")]


def test_supervise_runner_codex_survives_kill_and_restart(scripted_api, claude_home, tmp_path):
    bin_dir = codex_bin()
    project = git_project(tmp_path / "repo")
    db = tmp_path / "evoteam.db"
    stall = threading.Event()
    scripted_api.add(*supervisor_rules())
    with ScriptedResponses(prober_rules(stall)) as codex_api:
        codex_home = tmp_path / "codex-home"
        codex_home.mkdir()
        (codex_home / "config.toml").write_text(provider_config(codex_api.base_url))
        env = claude_env(claude_home, scripted_api.base_url, {
            "TMPDIR": str(tmp_path), "EVOTEAM_DB": str(db), "PYTHONPATH": os.pathsep.join(sys.path),
            "CODEX_HOME": str(codex_home), "OPENAI_API_KEY": "test"})
        env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
        cmd = [sys.executable, "-m", "evoteam.cli", "supervise", KIT, "--budget-usd", "50", "--max-versions", "2",
               "--runner", "codex", "--no-live", "--project-dir", str(project)]

        def start():
            return subprocess.Popen(cmd, cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True, start_new_session=True)

        first = start()
        try:
            deadline = time.time() + 240
            while not codex_api.conversation(PROBER):  # the role's first model request is pending: kill
                assert first.poll() is None, first.stdout.read()
                assert time.time() < deadline, "the codex role never called the model"
                time.sleep(0.2)
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
        finally:
            stall.set()
            if first.poll() is None:
                os.killpg(first.pid, signal.SIGKILL)

        async def state():
            async with LocalKnowledgeStore.open(db, Actor(user="tester")) as kb:
                run = (await kb.list_runs()).items[0]
                team = TeamStore(kb)
                return (run, await team.list_sessions(run.id), await team.list_wakes(run.id),
                        (await kb.list_learnings(run.id)).items, await kb.list_candidates(run.id),
                        (await kb.list_history(run.id)).items)

        run, sessions, *_ = asyncio.run(state())
        assert [(s.role, s.status, s.runner) for s in sessions] == [("Distance Prober", "running", "codex")]

        second = start()
        out, _ = second.communicate(timeout=400)
        assert second.returncode == 0, out
        assert f"continuing run {run.id}" in out, out
        run, sessions, wakes, learnings, candidates, history = asyncio.run(state())
        prober = [s for s in sessions if s.role == "Distance Prober"]
        assert len(prober) == 1 and prober[0].status == "finished" and prober[0].runner == "codex", (prober, out)
        assert prober[0].cost_usd > 0 and Path(prober[0].worktree).is_dir()
        # the codex role evaluated a candidate through the bench server and cited it in a learning
        assert candidates.total == 1, codex_api.errors
        cand = candidates.items[0]
        assert cand.status == "PASSED" and (cand.provenance.role, cand.provenance.team_version) == ("Distance Prober", 1)
        lrn = next(x for x in learnings if x.kind == "technique")
        assert lrn.evidence == [cand.id] and lrn.provenance.role == "Distance Prober"
        # the supervisor reflected on v1 and designed v2, whose codex role ran too
        assert history and history[0].team_version == 1 and history[0].diagnosis == "exhausted search on one idea", out
        assert "reached 2 team versions" in out, out
        assert [(s.role, s.status, s.runner) for s in sessions if s.role == "Budget Burner"] == [
            ("Budget Burner", "finished", "codex")]
        assert [w.trigger for w in wakes][:2] == ["start", "team_finished"], out
        # the role's conversation was started twice: once cut off, once to the end
        assert sum(1 for r in codex_api.conversation(PROBER) if r.turn() == 0) == 2
        assert not codex_api.errors, codex_api.errors
