"""A program kit's evaluator is kit code, but OpenEvolve-style evaluators run the program inside
themselves: the evaluator's worker is confined like a candidate's, a program compiled or executed
in the evaluator's own process is flagged (it could change how it is scored), and `run_program`
inside an evaluator is served by the harness. Test kits are OpenEvolve folders written here."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.polling import wait_until

from evoteam.config import Settings
from evoteam.servers.bench.evaluation import core
from evoteam.servers.bench.confinement import jail, sandbox
from evoteam.servers.bench.formats.kits import state_dir
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.store import Actor

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the bench's sandbox is Linux-only")

# Targets the evaluator compares with; a program that reaches them changes its own score.
IN_PROCESS_EVALUATOR = '''
import importlib.util

TARGETS = {1: 37.0, 2: 74.0, 3: 10.0}


def evaluate(program_path):
    spec = importlib.util.spec_from_file_location("candidate_program", program_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    errors = [abs(float(module.solve(s)) - TARGETS[s]) for s in TARGETS]
    return {"combined_score": -sum(errors) / len(errors), "mean_error": sum(errors) / len(errors)}
'''

# The same task, with the program run by `python` in a process of its own (it prints its answers).
SUBPROCESS_EVALUATOR = '''
import json
import subprocess
import sys

TARGETS = {1: 37.0, 2: 74.0, 3: 10.0}
RUNNER = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("candidate_program", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print(json.dumps([float(module.solve(s)) for s in (1, 2, 3)]))
"""


def evaluate(program_path):
    done = subprocess.run([sys.executable, "-c", RUNNER, program_path], capture_output=True, text=True,
                          timeout=60)
    if done.returncode != 0:
        return {"combined_score": 0.0, "error": done.stderr[-500:]}
    guesses = json.loads(done.stdout.strip().splitlines()[-1])
    errors = [abs(g - TARGETS[s]) for g, s in zip(guesses, (1, 2, 3))]
    return {"combined_score": -sum(errors) / len(errors), "mean_error": sum(errors) / len(errors)}
'''

HONEST = '''
# EVOLVE-BLOCK-START
def solve(instance):
    return 30.0
# EVOLVE-BLOCK-END
'''

# Rewrites the evaluator's targets through the call stack, then answers them exactly.
FORGER = '''
# EVOLVE-BLOCK-START
import sys

frame = sys._getframe()
while frame is not None:
    if "TARGETS" in frame.f_globals:
        frame.f_globals["TARGETS"] = {1: 0.0, 2: 0.0, 3: 0.0}
    frame = frame.f_back


def solve(instance):
    return 0.0
# EVOLVE-BLOCK-END
'''


def _kit(root: Path, name: str, evaluator: str) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "evaluator.py").write_text(textwrap.dedent(evaluator))
    (folder / "initial_program.py").write_text(HONEST)
    (folder / "config.yaml").write_text(
        "language: python\nevaluator:\n  timeout: 60\n  cascade_evaluation: false\n"
        f"evoteam:\n  name: {name}\n  objective: combined_score\n  direction: maximize\n")
    return folder


@pytest.fixture
def kits(tmp_path, monkeypatch):
    root = tmp_path / "kits"
    _kit(root, "guess_in_process", IN_PROCESS_EVALUATOR)
    _kit(root, "guess_subprocess", SUBPROCESS_EVALUATOR)
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    return Settings(db=tmp_path / "state" / "kb.db", kits_dirs=[root]), project


async def _evaluate(settings: Settings, kit: str, project: Path, program: str, store=None):
    path = project / f"{kit}_{abs(hash(program))}.py"
    path.write_text(program)
    return await core.evaluate_candidate(settings, kit, candidate_path=str(path), store=store)


async def test_a_program_that_rewrites_the_evaluators_targets_never_ranks_unreviewed(kits, tmp_path):
    settings, project = kits
    async with LocalKnowledgeStore.open(settings.db, Actor(user="tester", client="pytest")) as store:
        e = await _evaluate(settings, "guess_in_process", project, FORGER, store)
        # It did forge its score (one process: nothing can stop that) ...
        assert e.status == "PASSED" and e.score == 0.0, (e.status, e.score, e.message)
        # ... and the harness knew before the program's first line ran: flagged, never ranked.
        assert e.flagged and any("inside its own process" in f for f in e.flags), e.flags
        run = await store.get_run(e.run_id)
        assert run.best_score is None, run
        assert (await store.get_candidate(e.candidate_id)).flagged
    # The sandbox in force is the candidate's, named in the result.
    for layer in ("seccomp", "audit-hook") + (("landlock",) if sandbox.landlock_abi() >= 1 else ()):
        assert layer in e.sandbox, e.sandbox

    # a person who looked at it may accept it; only then it ranks
    env = {**os.environ, "EVOTEAM_DB": str(settings.db)}
    done = subprocess.run([sys.executable, "-m", "evoteam.cli", "kb", "review", e.run_id, "--accept",
                           e.candidate_id], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    async with LocalKnowledgeStore.open(settings.db, Actor(user="tester", client="pytest")) as store:
        assert (await store.get_run(e.run_id)).best_score == 0.0


async def test_a_program_run_in_a_subprocess_scores_and_ranks(kits):
    settings, project = kits
    async with LocalKnowledgeStore.open(settings.db, Actor(user="tester", client="pytest")) as store:
        e = await _evaluate(settings, "guess_subprocess", project, HONEST, store)
        assert e.status == "PASSED" and e.score == pytest.approx(-(7 + 44 + 20) / 3), (e.status, e.message)
        assert not e.flagged, e.flags
        assert (await store.get_run(e.run_id)).best_score == pytest.approx(e.score)
        # the forger, run out of the evaluator's process, changes nothing but its own answers
        f = await _evaluate(settings, "guess_subprocess", project, FORGER, store)
        assert f.status == "PASSED" and f.score == pytest.approx(-(37 + 74 + 10) / 3) and not f.flagged


async def test_the_shipped_kits_evaluators_are_not_flagged(tmp_path, monkeypatch):
    # circle_packing_26's evaluator calls program.run_program: the harness runs the program
    root = Path(__file__).resolve().parents[2] / "task_kits" / "circle_packing_26"
    monkeypatch.chdir(tmp_path)
    settings = Settings(db=tmp_path / "state" / "kb.db")
    e = await core.evaluate_candidate(settings, str(root), candidate_path=str(root / "initial_program.py"))
    assert e.status == "PASSED" and e.score and not e.flagged, (e.status, e.message, e.flags)


SNOOP = '''
# EVOLVE-BLOCK-START
import ctypes
import os

STATE = {state!r}
libc = ctypes.CDLL(None, use_errno=True)
# Below Python's audit hook: only the kernel's confinement (Landlock, the uid) answers this.
READ_STATE = libc.open(os.path.join(STATE, "heldout.key").encode(), 0) >= 0 or libc.open(STATE.encode(), 0) >= 0
WROTE_KIT = libc.open({kit_file!r}.encode(), 0o1 | 0o1000) >= 0


def solve(instance):
    return 1000.0 if (READ_STATE or WROTE_KIT) else 30.0
# EVOLVE-BLOCK-END
'''


@pytest.mark.skipif(sandbox.landlock_abi() < 1, reason="Landlock is not available on this kernel: below Python, "
                    "only a uid of its own would keep the program from reading evoteam's state")
async def test_a_program_inside_the_evaluator_cannot_read_evoteams_state_or_change_the_kit(kits):
    settings, project = kits
    state = state_dir(settings)
    state.mkdir(parents=True, exist_ok=True)
    (state / "heldout.key").write_text("secret")
    kit_file = settings.kits_dirs[0] / "guess_in_process" / "evaluator.py"
    before = kit_file.read_text()
    e = await _evaluate(settings, "guess_in_process", project, SNOOP.format(state=str(state), kit_file=str(kit_file)))
    assert e.status == "PASSED" and e.metrics["mean_error"] == pytest.approx((7 + 44 + 20) / 3), (e.status, e.metrics)
    assert kit_file.read_text() == before


DAEMON = '''
# EVOLVE-BLOCK-START
import ctypes
import os
import time

if os.fork() == 0:
    libc = ctypes.CDLL(None)
    libc.setsid()  # refused by seccomp; the cgroup holds it anyway
    libc.prctl(15, b"evt_daemon_{tag}", 0, 0, 0)  # PR_SET_NAME, to be found afterwards
    time.sleep(60)
    os._exit(0)


def solve(instance):
    return 30.0
# EVOLVE-BLOCK-END
'''


async def test_no_process_the_program_starts_outlives_the_evaluation(kits):
    settings, project = kits
    tag = f"{os.getpid() % 10000}"
    e = await _evaluate(settings, "guess_in_process", project, DAEMON.replace("{tag}", tag))
    assert e.status == "PASSED", (e.status, e.message)

    def alive() -> list[str]:
        found = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    named = Path(f"/proc/{entry}/comm").read_text().strip() == f"evt_daemon_{tag}"[:15]
                    # a killed process stays a zombie until its new parent (init) reaps it
                    dead = "State:\tZ" in Path(f"/proc/{entry}/status").read_text()
                except OSError:
                    continue
                if named and not dead:
                    found.append(entry)
        return found

    # A killed process needs the CPU once to die, which a loaded machine may not give it within a
    # fixed half second. Waited for instead, up to 15 s: a daemon that escaped lives 60 s, so it
    # is still caught.
    await asyncio.to_thread(wait_until, lambda: not alive(), 15.0)
    assert not alive(), alive()


def test_run_program_inside_an_evaluator_runs_only_what_the_evaluator_may_read(tmp_path, monkeypatch):
    # the harness runs, for a confined evaluator, the source the evaluator read itself: asking
    # for evoteam's state (as if it were a program) is refused by the evaluator's own sandbox,
    # the evaluation is flagged, and nothing of the file comes back
    settings_dir = tmp_path / "state"
    settings_dir.mkdir()
    (settings_dir / "heldout.key").write_text("print('secret')\n")
    kit = tmp_path / "kits" / "asks_for_a_file"
    kit.mkdir(parents=True)
    (kit / "evaluator.py").write_text(textwrap.dedent(f'''
        from evoteam.servers.bench.measurement.program import ProgramFailure, run_program


        def evaluate(program_path):
            score = float(run_program(program_path, "run"))
            try:
                run_program({str(settings_dir / "heldout.key")!r}, "run")
            except ProgramFailure as exc:
                return {{"combined_score": score, "refused": "cannot read" in exc.message}}
            return {{"combined_score": score, "refused": False}}
    '''))
    (kit / "initial_program.py").write_text("def run():\n    return 3.0\n")
    (kit / "config.yaml").write_text("evoteam:\n  name: asks_for_a_file\n  objective: combined_score\n")
    monkeypatch.chdir(tmp_path)
    settings = Settings(db=settings_dir / "kb.db", kits_dirs=[tmp_path / "kits"])
    honest = asyncio.run(core.evaluate_candidate(settings, "asks_for_a_file",
                                                 candidate_path=str(kit / "initial_program.py")))
    # refused below Python (Landlock: the evaluator reads nothing of evoteam's store folder) or by
    # the audit hook (the bench's state: then the evaluation fails, flagged)
    assert (honest.status == "PASSED" and honest.metrics.get("refused") is True) or \
        (honest.status == "RUNTIME_ERROR" and honest.flagged and "sandbox" in honest.message), \
        (honest.status, honest.message, honest.metrics)
    assert "secret" not in json.dumps(honest.model_dump(mode="json"))
    # the same evaluator without the look at evoteam's state: the program runs and scores
    (kit / "evaluator.py").write_text(
        "from evoteam.servers.bench.measurement.program import run_program\n\n\n"
        "def evaluate(program_path):\n    return {'combined_score': float(run_program(program_path, 'run'))}\n")
    settings = Settings(db=tmp_path / "state2" / "kb.db", kits_dirs=[tmp_path / "kits"])
    e = asyncio.run(core.evaluate_candidate(settings, "asks_for_a_file", candidate_path=str(kit / "initial_program.py")))
    assert e.status == "PASSED" and e.score == 3.0 and not e.flagged, (e.status, e.message, e.flags)


READS_PARENT = '''
# EVOLVE-BLOCK-START
import os

try:
    # the evaluator's memory holds its targets: read a page of its heap
    with open(f"/proc/{os.getppid()}/maps") as fh:
        heap = next(line for line in fh if "[heap]" in line)
    start = int(heap.split("-")[0], 16)
    with open(f"/proc/{os.getppid()}/mem", "rb") as fh:
        fh.seek(start)
        READ = len(fh.read(4096)) > 0
except (OSError, StopIteration, ValueError):
    READ = False


def solve(instance):
    return 1000.0 if READ else 30.0
# EVOLVE-BLOCK-END
'''


@pytest.mark.skipif(os.geteuid() == 0 and not jail.can_drop_privileges(),
                    reason="root kept as the evaluator's identity (EVOTEAM_BENCH_NO_UID) keeps CAP_SYS_PTRACE")
async def test_a_program_run_by_the_evaluator_cannot_read_the_evaluators_memory(kits):
    # in a process of its own (the subprocess evaluator), the program could still look for the
    # targets in its parent's memory; the evaluator is not dumpable, so /proc/<it>/mem is closed
    settings, project = kits
    e = await _evaluate(settings, "guess_subprocess", project, READS_PARENT)
    assert e.status == "PASSED" and e.metrics["mean_error"] == pytest.approx((7 + 44 + 20) / 3), (e.status, e.metrics)


# OpenEvolve's evaluators often run the program in a process of their own and read its results
# back as a pickle: whatever the program leaves in that file is unpickled in the evaluator.
PICKLE_EVALUATOR = '''
import os
import pickle
import subprocess
import sys
import tempfile

TARGETS = {1: 37.0, 2: 74.0, 3: 10.0}
RUNNER = """
import importlib.util, pickle, sys
spec = importlib.util.spec_from_file_location("candidate_program", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
with open(sys.argv[2], "wb") as fh:
    pickle.dump([float(module.solve(s)) for s in (1, 2, 3)], fh)
"""


def evaluate(program_path):
    results = os.path.join(tempfile.mkdtemp(), "results.pkl")
    subprocess.run([sys.executable, "-c", RUNNER, program_path, results], check=True, timeout=60)
    with open(results, "rb") as fh:
        guesses = pickle.load(fh)
    errors = [abs(g - TARGETS[s]) for g, s in zip(guesses, (1, 2, 3))]
    return {"combined_score": -sum(errors) / len(errors), "mean_error": sum(errors) / len(errors)}
'''

PICKLE_FORGER = '''
# EVOLVE-BLOCK-START
import os
import pickle
import sys

REWRITE = (
    "import sys\\n"
    "f = sys._getframe()\\n"
    "while f is not None:\\n"
    "    if 'TARGETS' in f.f_globals:\\n"
    "        f.f_globals['TARGETS'] = {1: 0.0, 2: 0.0, 3: 0.0}\\n"
    "    f = f.f_back\\n"
)


class Forged(list):
    def __reduce__(self):
        return (eval, ("(exec(%r), [0.0, 0.0, 0.0])[1]" % REWRITE,))


with open(sys.argv[2], "wb") as fh:
    pickle.dump(Forged(), fh)
os._exit(0)


def solve(instance):
    return 0.0
# EVOLVE-BLOCK-END
'''


async def test_a_pickle_that_runs_code_in_the_evaluator_is_flagged(tmp_path, kits):
    settings, project = kits
    _kit(settings.kits_dirs[0], "guess_by_pickle", PICKLE_EVALUATOR)
    honest = await _evaluate(settings, "guess_by_pickle", project, HONEST)
    assert honest.status == "PASSED" and not honest.flagged, (honest.status, honest.message, honest.flags)
    e = await _evaluate(settings, "guess_by_pickle", project, PICKLE_FORGER)
    assert e.status == "PASSED" and e.score == 0.0, (e.status, e.score, e.message)  # it forged ...
    assert e.flagged and any("inside its own process" in f for f in e.flags), e.flags  # ... and is caught
