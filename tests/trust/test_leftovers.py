"""What killed evoteam processes leave behind is cleared by the next jail: empty cgroups of dead
pids, and measurement workers left stopped with no harness (confinement/leftovers.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from evoteam.servers.bench.confinement.limits import TreeLimits

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="cgroups and /proc are Linux-only")

WORKER_ARGV = [sys.executable, "-I", "-B", "-m", "evoteam.servers.bench.measurement.worker", "97", "98"]


def _dead_pid() -> int:
    import subprocess

    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid  # reaped: no process has this pid until the kernel reuses it


def test_groups_left_by_killed_processes_are_swept_and_live_ones_kept(tmp_path):
    """A server killed with SIGKILL leaves its workers' empty groups behind; the next process
    that makes a jail removes them, and never a group of a process still alive (nor any other
    folder). Checked on a plain folder, then in the real cgroup where one is writable here."""
    import os

    from evoteam.servers.bench.confinement import leftovers, limits

    dead = _dead_pid()
    names = [f"evoteam-{dead}-ab12cd34", f"evoteam-probe-{dead}-ab12cd", f"evoteam-{os.getpid()}-live0001",
             "evoteam-notapid-x", "someone-elses"]
    for name in names:
        (tmp_path / name).mkdir()
    assert leftovers.sweep_leftovers(tmp_path) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names[2:])
    (tmp_path / names[0]).mkdir()
    assert leftovers.sweep_leftovers(tmp_path) == 0  # once per folder and process

    base = limits._v1_dir("pids")
    if base is None:
        pytest.skip("no writable cgroup v1 pids hierarchy here: the sweep was checked on a plain folder only")
    leftover = base / f"evoteam-{_dead_pid()}-feed0001"
    leftover.mkdir()
    leftovers._SWEPT.discard(base)
    probe = TreeLimits(64, 64)
    probe.close()
    assert not leftover.exists()


def _state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0].decode()
    except OSError:
        return None


def _wait_for_state(pid: int, wanted: str, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while _state(pid) != wanted and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _state(pid) == wanted


def test_a_stopped_worker_whose_harness_died_is_killed_and_a_live_harness_s_is_not():
    from evoteam.servers.bench.confinement import leftovers

    # The orphan: started and stopped by a "harness" that then dies, as a killed server's worker.
    spawn = ("import os, signal, subprocess, sys\n"
             f"p = subprocess.Popen({WORKER_ARGV!r}, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,"
             " stderr=subprocess.DEVNULL)\n"
             "os.kill(p.pid, signal.SIGSTOP)\nprint(p.pid, flush=True)\nos._exit(0)\n")
    orphan = int(subprocess.run([sys.executable, "-c", spawn], capture_output=True, text=True, timeout=60,
                                check=True).stdout)
    control = subprocess.Popen(WORKER_ARGV, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)  # stopped too, but its harness (this process) is alive
    os.kill(control.pid, signal.SIGSTOP)
    # kill() returns once the signal is queued; a child still waiting for a CPU (a busy 2-core
    # machine) shows R until it runs and stops. Wait for T, so the check below means "left alone".
    _wait_for_state(control.pid, "T")
    try:
        with open(f"/proc/{orphan}/stat", "rb") as fh:
            ppid = int(fh.read().rsplit(b")", 1)[1].split()[1])
        if ppid != 1:
            pytest.skip(f"orphans here are adopted by a subreaper (pid {ppid}), not init: not swept")
        leftovers._REAPED = False
        assert orphan in leftovers.kill_orphaned_workers()
        for _ in range(100):
            if _state(orphan) in (None, "Z"):
                break
            time.sleep(0.05)
        assert _state(orphan) in (None, "Z")
        assert _state(control.pid) == "T"
    finally:
        control.kill()
        control.wait()
        try:
            os.kill(orphan, signal.SIGKILL)
        except OSError:
            pass
