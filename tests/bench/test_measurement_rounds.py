"""What the harness does around the timed calls: the reference runs once per workload whatever
the number of sides; while timing, the harness thread runs apart from the timed workers and
its waits poll; a timed reply is checked on the stopped worker; and outputs are read from the
stopped worker's memory with or without process_vm_readv.

Every spy here calls through to the real method: the workers, pipes and checks are real."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from evoteam.servers.bench.confinement import jail as jail_mod
from evoteam.servers.bench.evaluation.compare import compare_candidates
from evoteam.servers.bench.evaluation.core import evaluate_candidate
from evoteam.servers.bench.measurement.session import KernelSession
from evoteam.servers.bench.measurement.workerproc import WorkerProc
from tests.bench.conftest import RMSNORM

GOOD = RMSNORM  # a correct RMSNorm (tests/bench/conftest.py)

# The same kernel written another way: a second, distinct candidate for a batch of three sides.
OTHER = """
import numpy as np

def run(hidden_states, weight, eps):
    x = hidden_states.astype(np.float64)
    scale = 1.0 / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)
    return (x * scale * weight).astype(np.float32)
"""


def _two_workloads(kit: Path) -> int:
    """Give the fast kit a second dev workload of another shape; returns the number of workloads."""
    rows = [{"uuid": "t128_h1024", "axes": {"num_tokens": 128, "hidden_size": 1024},
             "inputs": {"eps": {"type": "scalar", "value": 1e-6}}},
            {"uuid": "t32_h512", "axes": {"num_tokens": 32, "hidden_size": 512},
             "inputs": {"eps": {"type": "scalar", "value": 1e-6}}}]
    (kit / "workloads.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return len(rows)


def _count(monkeypatch, name: str) -> list:
    """Calls of KernelSession.<name>, counted on the way through."""
    seen: list = []
    real = getattr(KernelSession, name)

    def counted(self, *args, **kwargs):
        seen.append(args)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(KernelSession, name, counted)
    return seen


async def test_the_reference_runs_twice_per_workload_for_an_evaluation(fast_kit, fast_settings, monkeypatch):
    """The baseline's check on the first workload and the candidate's checks there share the
    reference's two runs (checks.py): two per workload, not two per side."""
    workloads = _two_workloads(fast_kit)
    runs = _count(monkeypatch, "_reference")
    result = await evaluate_candidate(fast_settings, str(fast_kit), code=GOOD)
    assert result.status == "PASSED", result.message
    assert len(runs) == 2 * workloads


async def test_the_reference_runs_twice_per_workload_however_many_sides(fast_kit, fast_settings, monkeypatch):
    """compare is a batch of three sides (baseline, A, B): every side is checked against the
    same two reference runs per workload, not two per side."""
    workloads = _two_workloads(fast_kit)
    runs = _count(monkeypatch, "_reference")
    cmp = await compare_candidates(fast_settings, str(fast_kit), {"code": GOOD}, {"code": OTHER}, repeats=1)
    assert cmp.a.status == "PASSED" and cmp.b.status == "PASSED", (cmp.a.message, cmp.b.message)
    assert len(runs) == 2 * workloads


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs: one for the workers, one apart")
@pytest.mark.parametrize("busy", [False, True], ids=["quiet", "busy"])
async def test_while_timing_the_harness_thread_runs_apart_and_polls_unless_busy(busy, fast_kit, fast_settings,
                                                                              monkeypatch):
    """On a quiet machine the harness thread leaves the workers' CPUs and polls; on a busy one
    (the load average is the machine's state, given here) it changes nothing."""
    from evoteam.servers.bench.measurement import session as session_mod

    monkeypatch.setattr(session_mod, "machine_busy", lambda: busy)
    seen: list[tuple[set, list, float, bool]] = []
    after: list[tuple[set, set, float]] = []
    real_call, real_measure = KernelSession._call, KernelSession.measure_sides

    def call(self, s, wl, payload, what, calibrate=False, slot="call"):
        if getattr(self, "_in_rounds", False):
            seen.append((os.sched_getaffinity(0), self.pinned, s.worker.spin_s, s.worker.jail.stopped))
        return real_call(self, s, wl, payload, what, calibrate=calibrate, slot=slot)

    def measure(self, wl, verdicts):
        before = os.sched_getaffinity(0)
        self._in_rounds = True
        try:
            return real_measure(self, wl, verdicts)
        finally:
            self._in_rounds = False
            after.append((before, os.sched_getaffinity(0), max(s.worker.spin_s for s in self.sides)))

    monkeypatch.setattr(KernelSession, "_call", call)
    monkeypatch.setattr(KernelSession, "measure_sides", measure)
    result = await evaluate_candidate(fast_settings, str(fast_kit), code=GOOD)
    assert result.status == "PASSED", result.message
    assert seen and after
    for cpus, pinned, spin, stopped in seen:
        assert pinned and stopped  # every call starts from a stopped worker
        if busy:
            assert cpus & set(pinned) and spin == 0.0, (cpus, pinned, spin)
        else:
            assert not cpus & set(pinned) and spin > 0, (cpus, pinned, spin)
    for before, now, spin in after:
        assert now == before and spin == 0.0  # the thread's CPUs and the waits are as they were


async def test_a_timed_reply_is_checked_on_the_stopped_worker(fast_kit, fast_settings, monkeypatch):
    """The reply's validation (pydantic, tens of microseconds) runs after the stop, outside the
    clock; it still decides whether the call counts."""
    states: list[bool] = []
    real = WorkerProc._checked

    def checked(self, header, arrays):
        if header.get("outputs") is not None:  # a timed call's reply
            states.append(self.jail.stopped)
        return real(self, header, arrays)

    monkeypatch.setattr(WorkerProc, "_checked", checked)
    result = await evaluate_candidate(fast_settings, str(fast_kit), code=GOOD)
    assert result.status == "PASSED", result.message
    assert states and all(states)


def _child_with_array() -> tuple[subprocess.Popen, int, bytes]:
    code = ("import numpy as np, sys, time\n"
            "a = np.arange(1 << 16, dtype=np.float64) * 1.5\n"
            "sys.stdout.write(f'{a.ctypes.data} {a.tobytes().hex()[:64]}\\n'); sys.stdout.flush()\n"
            "time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    addr, head = proc.stdout.readline().split()
    return proc, int(addr), bytes.fromhex(head)


@pytest.mark.parametrize("vm_read", [True, False], ids=["process_vm_readv", "proc-mem"])
def test_outputs_are_read_from_the_stopped_worker(vm_read, monkeypatch):
    if not vm_read:
        monkeypatch.setattr(jail_mod, "_VM_READ", None)
    proc, addr, head = _child_with_array()
    jail = jail_mod.Jail("test worker", None, None)
    try:
        jail.attach(proc.pid)
        if jail.mem_fd is None:
            pytest.skip("this harness cannot open /proc/PID/mem of its child here")
        assert jail.stop()
        buf = np.empty(8 << 16, dtype=np.uint8)
        assert jail.read_into(buf, addr)
        want = np.arange(1 << 16, dtype=np.float64) * 1.5
        assert buf[:32].tobytes() == head and np.array_equal(buf.view(np.float64), want)
        assert not jail.read_into(np.empty(64, dtype=np.uint8), 8)  # an unmapped address reads nothing
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        jail.close()
        proc.wait(timeout=10)


def test_a_sides_message_in_a_comparison_is_cut_between_clauses():
    """A side's message is bounded in a comparison; it was cut mid-clause ("paired ratios (...")."""
    from evoteam.servers.bench.evaluation.compare import MESSAGE_LIMIT, _brief
    from evoteam.servers.bench.models import Evaluation

    from evoteam.servers.bench.measurement.batch import _ms_apart
    from evoteam.servers.bench.models import WorkloadOutcome

    ms = _ms_apart([WorkloadOutcome(workload="n512", status="PASSED", speedup=1.05, candidate_ms=1.0,
                                    baseline_ms=0.949)])  # the clause evaluate writes, whole
    clauses = ["all 3 workloads correct", "geomean speedup 4.1× (3.9–4.3) over baseline.py::run", ms,
               "paired ratios (per round) " + "x" * 400]
    e = Evaluation(kit="k", kind="kernel", split="dev", status="PASSED", score=4.1, direction="maximize", passed=3,
                   total=3, workloads=[], message="; ".join(clauses))
    brief = _brief(e).message
    assert len(brief) <= MESSAGE_LIMIT + 3 and brief.endswith("; …")
    # Whole clauses, the cut said; without the side's ms against the baseline's, which compare's
    # own paired ratios replace (a model read the baseline's "1.6" against itself as a bug).
    assert brief[:-3] == "; ".join(clauses[:2]) and "baseline_ms" not in brief and "speedup;" not in brief


def test_a_compared_workload_says_which_to_read_where_its_ms_disagree_with_its_ratio():
    """compare's a_ms / b_ms of a baseline against its copy read 3.32 against 4.73 beside a paired
    ratio of 1.01 with no word (model-play 2026-12-04): the row now says to read the ratio."""
    from evoteam.servers.bench.evaluation.compare import _ms_note
    from evoteam.servers.bench.models import WorkloadComparison

    row = WorkloadComparison(workload="w", a_status="PASSED", b_status="PASSED", a_ms=3.3183, b_ms=4.7288,
                             b_speedup_over_a=1.0056)
    assert _ms_note(row).startswith("a_ms / b_ms is 0.702 but b_speedup_over_a is 1.01:")
    agree = row.model_copy(update={"b_ms": 3.2})
    assert _ms_note(agree) is None


def test_a_held_out_workload_keeps_the_note_that_explains_a_wide_interval():
    """Held-out redaction dropped every note, so a held-out interval of [9.75, 9413] went
    unexplained; the unresolved rounds' note names no shape and stays, the rest still goes."""
    from evoteam.servers.bench.measurement.batch import redact_heldout
    from evoteam.servers.bench.measurement.sides import WorkloadVerdict

    v = WorkloadVerdict()
    v.notes = ["time not resolved above the call path's spread (590 us) for the candidate in 4 of 10 rounds; ...",
               "printed: shape (96, 5120)"]
    redact_heldout(v)
    assert v.notes == [v.notes[0]] and v.notes[0].startswith("time not resolved")


def test_the_unresolved_rounds_note_explains_the_wide_upper_end():
    """mp67 read "reads closer to 1" beside an interval of 3.08-15,867x: the note says both."""
    from types import SimpleNamespace

    from evoteam.servers.bench.measurement.interleave import _unresolved_note

    rounds = SimpleNamespace(per_round=[{}] * 10, resolution=3_856_000.0,
                             unresolved=lambda label: 8 if label != "baseline" else 0)
    note = _unresolved_note(rounds, "cand")
    assert "(3856 us) for the candidate in 8 of 10 rounds" in note, note
    assert "reads closer to 1 while its interval's upper end stretches to what a time near zero would give" in note
    # Its ms, a median of such rounds, is then the spread itself: said, not read as a timing (mp81).
    assert "such rounds count it at that spread (its ms may then be that spread, not a timing)" in note, note
    assert _unresolved_note(SimpleNamespace(per_round=[{}] * 10, resolution=1e5, unresolved=lambda _: 0), "c") is None
