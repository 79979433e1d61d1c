"""Several worker processes per timed side, the rounds alternating between them (session.py,
method.processes_per_side). The same code runs a few percent faster in one process than in
another; with one process per side that difference went whole into each evaluation's score
(benchmarks/bench_process_split.py, docs/bench.md *Processes per side*)."""

from __future__ import annotations

import json
import os
import shutil

from evoteam.servers.bench.confinement import jail
from evoteam.servers.bench.evaluation.core import evaluate_candidate
from evoteam.servers.bench.measurement import method
from evoteam.servers.bench.measurement.session import KernelSession
from evoteam.servers.bench.models import TimingPlan
from evoteam.config import Settings
from tests.bench.conftest import KITS, small_kit

GOOD = """
import numpy as np

def run(hidden_states, weight, eps):
    x = hidden_states.astype(np.float64)
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight
    return y.astype(np.float32)
"""

# Right in the process whose folder is the prepared candidate's, wrong in every other: it tells
# its processes apart by their working folder, as any candidate can.
RIGHT_IN_ONE_PROCESS = GOOD.replace("    return y.astype(np.float32)", """    import os
    if "evoteam-side-" in os.getcwd():
        y = y * 1.5
    return y.astype(np.float32)""")

# Fails to load in every process but the first.
LOADS_IN_ONE_PROCESS = "import os\nif 'evoteam-side-' in os.getcwd():\n    raise ImportError('not here')\n" + GOOD


def _settings(tmp_path, **timing) -> tuple[Settings, object]:
    kit = small_kit(tmp_path / "kits" / "rmsnorm_multi", timing={"warmup": 1, "rounds": 4, "reps_per_round": 2,
                                                               **timing})
    return Settings(db=tmp_path / "state" / "kb.db", kits_dirs=[kit.parent, KITS]), kit


def _record(monkeypatch) -> tuple[list, list]:
    """Every call made inside the timed rounds, as (side label, pid, empty call or not), and the
    sessions."""
    calls: list[tuple[str, int, bool]] = []
    sessions: list[KernelSession] = []
    real_call, real_measure = KernelSession._call, KernelSession.measure_sides

    def call(self, s, wl, payload, what, calibrate=False, slot="call"):
        if getattr(self, "_in_rounds", False):
            calls.append((s.label, s.worker.proc.pid, calibrate))
        return real_call(self, s, wl, payload, what, calibrate=calibrate, slot=slot)

    def measure(self, wl, verdicts):
        sessions.append(self)
        self._in_rounds = True
        try:
            return real_measure(self, wl, verdicts)
        finally:
            self._in_rounds = False

    monkeypatch.setattr(KernelSession, "_call", call)
    monkeypatch.setattr(KernelSession, "measure_sides", measure)
    return calls, sessions


def test_how_many_processes_a_side_gets():
    plan = TimingPlan(rounds=10)
    assert method.processes_per_side(plan, gpu=False, n_sides=2) == method.PROCESSES_PER_SIDE == 4
    assert method.processes_per_side(plan, gpu=True, n_sides=2) == 1  # unmeasured on a GPU: one
    assert method.processes_per_side(TimingPlan(rounds=10, processes_per_side=3), gpu=True, n_sides=2) == 3
    assert method.processes_per_side(TimingPlan(rounds=2), gpu=False, n_sides=2) == 2  # no more than rounds
    # A batch of many sides (a re-measurement of finalists) gets fewer per side, at least one.
    assert method.processes_per_side(plan, gpu=False, n_sides=6) == method.MAX_TIMED_WORKERS // 6
    assert method.processes_per_side(plan, gpu=False, n_sides=40) == 1


async def test_each_round_runs_in_the_next_process_of_every_side_each_warmed_up_first(tmp_path, monkeypatch):
    """Four rounds, four processes per side: round r calls process r of the baseline and of the
    candidate, each process opening with its warm-up call; every process has a folder, a pid and
    (where the harness can give them) a uid of its own; the empty calls stay in one worker."""
    settings, kit = _settings(tmp_path)
    calls, sessions = _record(monkeypatch)
    folders: list[set[str]] = []
    real_start = KernelSession.start

    def start(self):
        real_start(self)
        folders.append({os.readlink(f"/proc/{w.proc.pid}/cwd") for s in self.sides for w in s.workers})
        if jail.can_drop_privileges():
            uids = {os.stat(f"/proc/{w.proc.pid}").st_uid for s in self.sides for w in s.workers}
            assert len(uids) == 8 and 0 not in uids, uids

    monkeypatch.setattr(KernelSession, "start", start)
    result = await evaluate_candidate(settings, str(kit), code=GOOD)
    assert result.status == "PASSED", result.message
    session = sessions[0]
    assert [len(s.workers) for s in session.sides] == [4, 4] and len(session.empty.workers) == 1
    assert len(folders[0]) == 8
    per_call = session.timing.warmup + session.timing.reps_per_round  # each process: one round
    for s in session.sides:
        pids = [w.proc.pid for w in s.workers]
        assert len(set(pids)) == 4
        got = [pid for label, pid, calibrate in calls if label == s.label]
        assert got == [pid for pid in pids for _ in range(per_call)], (s.label, got, pids)
    empties = [pid for _, pid, calibrate in calls if calibrate]
    assert set(empties) == {session.empty.workers[0].proc.pid}
    assert len(empties) == session.timing.warmup + 4 * session.timing.reps_per_round  # warmed once: one process
    assert result.workloads[0].rounds == 4
    assert all(s.turn == 0 for s in session.sides)  # back on the first process after the rounds
    assert not any(os.path.exists(f) for f in folders[0])  # every folder removed at close


async def test_a_kit_can_ask_for_one_process_per_side(tmp_path, monkeypatch):
    settings, kit = _settings(tmp_path, processes_per_side=1)
    calls, sessions = _record(monkeypatch)
    result = await evaluate_candidate(settings, str(kit), code=GOOD)
    assert result.status == "PASSED", result.message
    assert [len(s.workers) for s in sessions[0].sides] == [1, 1]
    assert len({pid for label, pid, calibrate in calls if label == "candidate"}) == 1


async def test_a_candidate_right_in_only_one_of_its_processes_fails_flagged(tmp_path):
    """The first process passes the correctness calls; the others compute wrong results. Their
    timed outputs are checked against the baseline's like every timed output."""
    settings, kit = _settings(tmp_path)
    result = await evaluate_candidate(settings, str(kit), code=RIGHT_IN_ONE_PROCESS)
    assert result.status != "PASSED"
    wl = result.workloads[0]
    assert wl.flagged and "timed call returned a wrong result" in (wl.message or ""), wl


async def test_a_candidate_that_loads_in_only_one_of_its_processes_fails_with_that_process_named(tmp_path):
    settings, kit = _settings(tmp_path)
    result = await evaluate_candidate(settings, str(kit), code=LOADS_IN_ONE_PROCESS)
    assert result.status != "PASSED"
    text = json.dumps(result.model_dump())
    assert "not here" in text and "process 2 of 4" in text, text[:2000]
    assert result.status == "COMPILE_ERROR", result.status  # the candidate's own error, as from a first process


def test_describe_says_how_many_processes_a_side_runs_in(tmp_path):
    from evoteam.servers.bench.formats.kits import find_kit

    settings, kit_dir = _settings(tmp_path)
    text = method.timing_method(find_kit(settings, str(kit_dir)))
    assert "each side runs in 4 worker processes of its own, the rounds alternating between them" in text
    one, one_dir = _settings(tmp_path / "one", processes_per_side=1)
    assert "each side runs in 1 worker process of its own;" in method.timing_method(find_kit(one, str(one_dir)))
    shutil.rmtree(tmp_path / "one")
