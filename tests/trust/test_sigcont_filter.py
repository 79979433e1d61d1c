"""Issue 23: without cgroup freezing the stop holds: a confined process cannot have SIGCONT
delivered to itself later (POSIX timer, message-queue notification, an fd's I/O signal, the
parent-death signal, a child's exit signal). Each call is tried for real under the filter."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
import textwrap

import pytest

from tests.bench.conftest import fast_kit, fast_settings  # noqa: F401 - fixtures

pytestmark = pytest.mark.skipif(sys.platform != "linux" or platform.machine() not in ("x86_64", "aarch64"),
                                reason="the seccomp filter has tables for Linux x86_64 and aarch64")

PROBE = textwrap.dedent('''
    import ctypes, errno, json, os, signal, sys
    from evoteam.servers.bench.confinement import seccomp
    NR = {"x86_64": dict(timer_create=222, mq_notify=244, clone=56, setsid=112),
          "aarch64": dict(timer_create=107, mq_notify=184, clone=220, setsid=157)}[os.uname().machine]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long

    class SigEvent(ctypes.Structure):
        _fields_ = [("value", ctypes.c_void_p), ("signo", ctypes.c_int), ("notify", ctypes.c_int),
                    ("pad", ctypes.c_byte * 48)]

    def call(*args):
        ctypes.set_errno(0)
        rc = libc.syscall(*args)
        return "ok" if rc >= 0 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))

    if sys.argv[1] == "filtered":
        seccomp.apply(allow_setsid=sys.argv[2] == "1")
    out = {}
    ev = SigEvent(None, signal.SIGCONT, 0)  # SIGEV_SIGNAL
    timer = ctypes.c_long()
    out["timer_sigcont"] = call(NR["timer_create"], 1, ctypes.byref(ev), ctypes.byref(timer))
    out["timer_default"] = call(NR["timer_create"], 1, None, ctypes.byref(timer))
    out["mq_notify"] = call(NR["mq_notify"], 9999, ctypes.byref(ev))
    r, w = os.pipe()
    import fcntl
    try:
        fcntl.fcntl(r, 10, signal.SIGCONT)  # F_SETSIG
        out["f_setsig_sigcont"] = "ok"
    except OSError as exc:
        out["f_setsig_sigcont"] = errno.errorcode[exc.errno]
    try:
        fcntl.fcntl(r, 10, signal.SIGUSR1)
        out["f_setsig_other"] = "ok"
    except OSError as exc:
        out["f_setsig_other"] = errno.errorcode[exc.errno]
    ctypes.set_errno(0)
    out["pdeathsig_sigcont"] = "ok" if libc.prctl(1, signal.SIGCONT, 0, 0, 0) == 0 else errno.errorcode[ctypes.get_errno()]
    pid = libc.syscall(NR["clone"], signal.SIGCONT, 0, 0, 0, 0)
    if pid == 0:
        os._exit(0)
    out["clone_exit_sigcont"] = "ok" if pid > 0 else errno.errorcode[ctypes.get_errno()]
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    out["fork"] = "ok"
    pid = os.fork()
    if pid == 0:
        os._exit(0 if os.setsid() else 0)
    out["setsid"] = "ok" if os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0 else "EPERM"
    print(json.dumps(out))
''')


def _probe(*args: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_unfiltered_every_route_works_so_the_probe_is_real():
    out = _probe("plain", "0")
    assert out["timer_sigcont"] == "ok" and out["f_setsig_sigcont"] == "ok" and out["pdeathsig_sigcont"] == "ok"
    assert out["clone_exit_sigcont"] == "ok"


def test_every_later_sigcont_route_is_refused_and_ordinary_calls_still_work():
    out = _probe("filtered", "0")
    assert {k: out[k] for k in ("timer_sigcont", "mq_notify", "f_setsig_sigcont", "pdeathsig_sigcont",
                                "clone_exit_sigcont")} == dict.fromkeys(
        ("timer_sigcont", "mq_notify", "f_setsig_sigcont", "pdeathsig_sigcont", "clone_exit_sigcont"), "EPERM")
    assert out["timer_default"] == "ok" and out["f_setsig_other"] == "ok" and out["fork"] == "ok"
    assert out["setsid"] == "EPERM"  # candidates never leave their session


def test_an_evaluator_may_start_a_session_of_its_own():
    out = _probe("filtered", "1")
    assert out["setsid"] == "ok" and out["timer_sigcont"] == "EPERM"


def test_where_the_stop_cannot_hold_it_is_said_and_scores_are_flagged():
    from evoteam.servers.bench.confinement.jail import STOP_NOT_HELD, protections, stop_not_held

    assert stop_not_held("uid1+rlimits+landlock+seccomp+audit-hook+process-group") is None
    assert stop_not_held("rlimits+landlock+NO-SECCOMP(x)+audit-hook+cgroup") is None
    assert stop_not_held("rlimits+landlock+NO-SECCOMP(x)+audit-hook+process-group") == STOP_NOT_HELD
    assert protections()["stop_holds"] == "yes"  # this machine: seccomp at least


async def test_without_cgroups_a_kernel_score_still_ranks_because_seccomp_holds_the_stop(monkeypatch, fast_kit,
                                                                                       fast_settings):
    from evoteam.servers.bench.confinement import jail
    from evoteam.servers.bench.evaluation.core import evaluate_candidate

    monkeypatch.setenv("EVOTEAM_BENCH_NO_CGROUP", "1")
    monkeypatch.setattr(jail, "_CG_ROOT", False)
    e = await evaluate_candidate(fast_settings, "rmsnorm_fast", code=(fast_kit / "baseline.py").read_text())
    assert e.status == "PASSED" and "process-group" in e.sandbox and "seccomp" in e.sandbox
    assert not e.flagged, e.flags
