"""Where the empty calls run (the call path alone, subtracted from every time): in a confined
worker of their own, the empty-call worker, which is neither the baseline's nor any candidate's
and which no candidate can reach. Until 2026-12-02 they ran on the baseline's worker, so in the
rotation a baseline call could follow a call in its own process (warm caches), a candidate's
never: a copy of the baseline read ~0.94 on rmsnorm_cpu's shortest workload (docs/bench.md)."""

from __future__ import annotations

import asyncio
import os
import shutil

from evoteam.servers.bench.confinement import jail
from evoteam.servers.bench.evaluation.core import evaluate_candidate
from evoteam.servers.bench.measurement.session import EMPTY, KernelSession
from tests.bench.conftest import kernel_session

GOOD = """
import numpy as np

def run(hidden_states, weight, eps):
    x = hidden_states.astype(np.float64)
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight
    return y.astype(np.float32)
"""


async def test_every_empty_call_runs_in_a_worker_that_no_timed_side_runs_in(fast_kit, fast_settings, monkeypatch):
    """Recorded call by call over a whole evaluation: every empty call goes to the empty-call
    worker, a process that is not the baseline's, not the candidate's and not the trusted
    worker's; every timed call goes to a timed side, never to it."""
    calls: list[tuple[bool, int, str]] = []
    sessions: list[KernelSession] = []
    real_call, real_measure = KernelSession._call, KernelSession.measure_sides

    def call(self, s, wl, payload, what, calibrate=False, slot="call"):
        if getattr(self, "_in_rounds", False):
            calls.append((calibrate, s.worker.proc.pid, s.label))
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
    result = await evaluate_candidate(fast_settings, str(fast_kit), code=GOOD)
    assert result.status == "PASSED", result.message
    session = sessions[0]
    timed_pids = {s.worker.proc.pid for s in session.sides}
    empty_pid = session.empty.worker.proc.pid
    assert len(timed_pids) == 2 and empty_pid not in timed_pids | {session.trusted.proc.pid}
    empties = [(pid, label) for calibrate, pid, label in calls if calibrate]
    timed = [(pid, label) for calibrate, pid, label in calls if not calibrate]
    assert empties and timed
    assert set(empties) == {(empty_pid, EMPTY)}, empties
    assert {pid for pid, _ in timed} == timed_pids, timed
    # As many empty calls as calls of each side (after the warm-up): one per repetition.
    per_side = {label: sum(1 for _, lb in timed if lb == label) for label in ("baseline", "candidate")}
    assert len(empties) - session.timing.warmup * len(sessions) == per_side["baseline"] - \
        session.timing.warmup * len(sessions) == per_side["candidate"] - session.timing.warmup * len(sessions)


def _status(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/status") as fh:
        return dict(line.rstrip("\n").split(":\t", 1) for line in fh if ":\t" in line)


def _cgroup(pid: int) -> str:
    with open(f"/proc/{pid}/cgroup") as fh:
        return fh.read()


def _may_signal_as(uid: int, pid: int) -> bool:
    """Whether a process running as ``uid`` may send ``pid`` a signal (signal 0: the permission
    check alone). A forked child that drops to the uid and exits at once (the interpreter's
    files need not be readable by that uid)."""
    child = os.fork()
    if child == 0:
        code = 2
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            try:
                os.kill(pid, 0)
                code = 0
            except PermissionError:
                code = 1
        finally:
            os._exit(code)
    _, status = os.waitpid(child, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) in (0, 1), status
    return os.WEXITSTATUS(status) == 0


async def test_the_empty_call_worker_is_confined_like_a_side_and_out_of_a_candidate_s_reach(fast_kit, fast_settings):
    """It pays the same path as the timed sides — the same seccomp filter, the same CPUs, the
    same environment, a process group (and cgroup) of its own like each of them — and, where the
    harness can give workers uids of their own, a uid no candidate runs as: a process with the
    candidate's uid may not signal it (so cannot stop it, slow it, or make the subtraction
    larger)."""
    kit, cand, session = kernel_session(fast_settings, fast_kit, GOOD)
    try:
        await asyncio.to_thread(session.start)
        empty, base, candidate = session.empty.worker, session.baseline.worker, session.candidate
        assert empty.proc.pid not in (base.proc.pid, candidate.proc.pid)
        st = {w: _status(w.proc.pid) for w in (empty, base, candidate)}
        assert st[empty]["Seccomp"] == st[candidate]["Seccomp"] == st[base]["Seccomp"] != "0", st
        assert st[empty]["NoNewPrivs"] == st[candidate]["NoNewPrivs"]
        assert len({os.getpgid(w.proc.pid) for w in (empty, base, candidate)}) == 3
        assert os.sched_getaffinity(empty.proc.pid) == os.sched_getaffinity(candidate.proc.pid)
        env = {w: open(f"/proc/{w.proc.pid}/environ", "rb").read().split(b"\0") for w in (empty, base)}
        own = {w: {e for e in env[w] if b"/evoteam-baseline-" in e} for w in env}  # its folder (HOME)
        assert own[empty] and own[empty] != own[base]
        assert sorted(set(env[empty]) - own[empty]) == sorted(set(env[base]) - own[base])
        if candidate.jail.cgroup is not None:
            assert len({_cgroup(w.proc.pid) for w in (empty, base, candidate)}) == 3
        if jail.can_drop_privileges():
            uids = {w: int(st[w]["Uid"].split()[0]) for w in (empty, base, candidate)}
            assert len(set(uids.values())) == 3 and 0 not in uids.values(), uids
            assert _may_signal_as(uids[candidate], candidate.proc.pid)  # the probe itself works
            assert not _may_signal_as(uids[candidate], empty.proc.pid)  # refused: another uid's process
    finally:
        await asyncio.to_thread(session.close)
        shutil.rmtree(cand.folder, ignore_errors=True)
