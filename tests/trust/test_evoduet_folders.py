"""Issue 22/23: EvoDuet-style benchmark folders run unchanged but for one declared line: the
evaluator imports the suite's shared runtime module from the parent folder (declared with
``evaluator_reads``), starts its program in a session of its own and kills that group; a
program left running in its own session is still killed with the evaluator. Our own folders,
written in the EvoDuet layout (suite/<task>/{evaluator.py, initial_program.py, config.yaml})."""

from __future__ import annotations

import os
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from evoteam.config import Settings
from evoteam.errors import DomainError
from evoteam.servers.bench.evaluation import core
from evoteam.servers.bench.confinement import jail

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the bench's sandbox is Linux-only")

RUNTIME = '''
"""The suite's shared runtime (as in EvoDuet's benchmark folders): run a program with a timeout
in a session of its own, and kill the whole group afterwards."""
import os, signal, subprocess, sys


def run_program(program_path, token, leave_running=False):
    runner = ("import importlib.util, json, sys\\n"
              "spec = importlib.util.spec_from_file_location('p', sys.argv[1])\\n"
              "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\\n"
              "print(json.dumps(m.solve()))\\n")
    proc = subprocess.Popen([sys.executable, "-c", runner, program_path, token], stdout=subprocess.PIPE,
                            start_new_session=True, text=True)
    try:
        out, _ = proc.communicate(timeout=60)
    finally:
        if not leave_running:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    return out
'''

EVALUATOR = '''
import json, os, sys
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import lj_runtime

TOKEN = "{token}"


def evaluate(program_path):
    energy = json.loads(lj_runtime.run_program(program_path, TOKEN, leave_running={leave}))
    return {{"combined_score": -energy, "energy": energy}}
'''

PROGRAM = '''
# EVOLVE-BLOCK-START
def solve():
    return 44.3
# EVOLVE-BLOCK-END
'''

LINGERING = '''
# EVOLVE-BLOCK-START
import os, time


def solve():
    if os.fork() == 0:  # a child in the program's own session, left behind
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        time.sleep(300)
        os._exit(0)
    return 44.3
# EVOLVE-BLOCK-END
'''


def _suite(tmp_path: Path, reads: str, leave: bool = False) -> tuple[Settings, str]:
    token = f"evoduet-{uuid.uuid4().hex}"
    suite = tmp_path / "suite"
    task = suite / "lennard_jones_13"
    task.mkdir(parents=True)
    (suite / "lj_runtime.py").write_text(RUNTIME)
    (task / "evaluator.py").write_text(textwrap.dedent(EVALUATOR.format(token=token, leave=leave)))
    (task / "initial_program.py").write_text(PROGRAM)
    (task / "config.yaml").write_text(
        "language: python\nevaluator:\n  timeout: 60\n  cascade_evaluation: false\n"
        f"evoteam:\n  name: lj13\n  objective: combined_score\n  direction: maximize\n{reads}")
    return Settings(db=tmp_path / "state" / "kb.db", kits_dirs=[suite]), token


def _alive(token: str) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
                state = Path(f"/proc/{entry}/status").read_text()
            except OSError:
                continue
            if token.encode() in cmd and "State:\tZ" not in state:
                out.append(int(entry))
    return out


async def test_the_shared_runtime_needs_its_declaration(tmp_path):
    settings, _ = _suite(tmp_path, "")
    e = await core.evaluate_candidate(settings, "lj13", code=PROGRAM)
    assert e.status != "PASSED" and "lj_runtime" in (e.message or ""), e.message


async def test_an_evoduet_folder_runs_with_a_session_of_its_own(tmp_path):
    settings, token = _suite(tmp_path, "  evaluator_reads: ['../lj_runtime.py']\n")
    e = await core.evaluate_candidate(settings, "lj13", code=PROGRAM)
    assert e.status == "PASSED" and e.score == pytest.approx(-44.3) and not e.flagged, (e.message, e.flags)
    assert _alive(token) == []


@pytest.mark.parametrize("cgroups", ["1", "0"])
async def test_a_program_left_in_its_own_session_dies_with_the_evaluator(tmp_path, monkeypatch, cgroups):
    monkeypatch.setenv("EVOTEAM_BENCH_NO_CGROUP", "1" if cgroups == "0" else "0")
    monkeypatch.setattr(jail, "_CG_ROOT", False)  # probe again under this setting
    if cgroups == "1" and jail.cgroup_root() is None:
        pytest.skip("no writable cgroup v2 hierarchy here")
    if cgroups == "0" and not jail.can_drop_privileges():
        pytest.skip("without cgroups the jail finds a session-leaving program by its own uid, which needs root")
    settings, token = _suite(tmp_path, "  evaluator_reads: ['../lj_runtime.py']\n", leave=True)
    e = await core.evaluate_candidate(settings, "lj13", code=LINGERING)
    assert e.status == "PASSED", e.message
    assert _alive(token) == []


@pytest.mark.parametrize("reads", ["['../../..']", "['/etc']", "['..']", "['../missing.py']"])
async def test_a_declaration_cannot_reach_beyond_the_suite(tmp_path, reads):
    settings, _ = _suite(tmp_path, f"  evaluator_reads: {reads}\n")
    with pytest.raises(DomainError, match="evaluator_reads"):
        await core.evaluate_candidate(settings, "lj13", code=PROGRAM)
