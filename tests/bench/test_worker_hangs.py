"""What keeps the harness from waiting for good on a worker: signals that reach the worker's own
process group and no other, and pipe reads and writes that end by their deadline.

A worker's pid number is free once it is reaped, and every worker leads a process group of its
own number; a late signal by number (a cancelled evaluation's thread stopping "its" worker after
another thread closed it) could then stop or kill a worker started later. The jail signals
through a pidfd instead.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from evoteam.servers.bench.confinement import jail as jail_mod
from evoteam.servers.bench.confinement import pidhandle
from evoteam.servers.bench.measurement import protocol

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rsplit(")", 1)[1].split()[0]


def _leader() -> subprocess.Popen:
    return subprocess.Popen(SLEEPER, start_new_session=True)


@pytest.fixture
def later():
    """A worker started later, whose group stands for a reaped worker's recycled number."""
    proc = _leader()
    yield proc
    proc.kill()
    proc.wait(timeout=10)


def _late_signals_miss(jail: jail_mod.Jail, later: subprocess.Popen) -> None:
    """Point the jail at `later`'s number and send everything a late thread would: a stop, a
    resume, a kill. `later` must run on, neither stopped nor killed."""
    jail.pid = jail.handle.pid = later.pid
    assert jail.stop(timeout=0.5) is False
    jail.resume()
    jail.kill_all()
    time.sleep(0.2)
    assert later.poll() is None and _state(later.pid) in "SR", "a stale jail stopped or killed a later worker"


def test_a_reaped_workers_jail_signals_nobody_who_took_its_number(monkeypatch, later):
    first = _leader()
    jail = jail_mod.Jail("test worker", None, None)
    jail.attach(first.pid)
    if jail.handle.pidfd is None:
        pytest.skip("no pidfd here (Linux before 5.3): signals go by number while the worker is unreaped")
    try:
        first.kill()
        first.wait(timeout=10)  # reaped by the Popen, as WorkerProc._returncode does, not by the jail
        # The number is free now; a worker started later may lead a group of it. Stand `later` in.
        sent = []
        real_killpg = os.killpg
        monkeypatch.setattr(os, "killpg", lambda pid, sig: (sent.append((pid, sig)), real_killpg(pid, sig)))
        assert jail.handle.signal_group(signal.SIGSTOP) is False
        _late_signals_miss(jail, later)
        assert sent == []
        assert jail.members() == [], "the later worker's group is not the reaped worker's"
    finally:
        jail.close()


def test_the_jail_still_stops_resumes_and_kills_its_own_worker():
    proc = _leader()
    jail = jail_mod.Jail("test worker", None, None)
    try:
        jail.attach(proc.pid)
        assert jail.stop(timeout=5.0) is True
        assert _state(proc.pid) == "T"
        jail.resume()
        deadline = time.monotonic() + 5
        while _state(proc.pid) == "T" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _state(proc.pid) in "SR"
        assert jail.stop(timeout=5.0) is True
        jail.kill_all()  # a stopped worker is killed too
        assert proc.wait(timeout=10) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        jail.close()


def test_the_jail_reports_an_exit_it_reaps_while_waiting_for_a_stop():
    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(7)"], start_new_session=True)
    jail = jail_mod.Jail("test worker", None, None)
    try:
        jail.attach(proc.pid)
        deadline = time.monotonic() + 10
        while _state(proc.pid) != "Z" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert jail.stop(timeout=1.0) is False
        assert jail.exit_status is not None and os.WIFEXITED(jail.exit_status)
        assert os.WEXITSTATUS(jail.exit_status) == 7
    finally:
        jail.close()


def test_a_write_to_a_pipe_nobody_reads_ends_at_its_deadline():
    r, w = os.pipe()
    try:
        os.set_blocking(w, False)
        start = time.monotonic()
        with pytest.raises(protocol.PeerTimeout):
            protocol.write_all(w, b"x" * (4 << 20), time.monotonic() + 0.5)  # more than any pipe holds
        assert time.monotonic() - start < 30  # bounded (it would block for good on a blocking pipe)
    finally:
        os.close(r)
        os.close(w)


def test_a_write_finishes_while_the_reader_keeps_reading():
    r, w = os.pipe()
    os.set_blocking(w, False)
    data = os.urandom(3 << 20)
    got = bytearray()
    pid = os.fork()
    if pid == 0:  # the reader
        os.close(w)
        while chunk := os.read(r, 1 << 16):
            got += chunk
        os._exit(0 if bytes(got) == data else 1)
    os.close(r)
    try:
        protocol.write_all(w, data, time.monotonic() + 60)
    finally:
        os.close(w)
    assert os.waitpid(pid, 0)[1] == 0


def test_a_read_that_finds_nothing_after_all_waits_for_its_deadline(monkeypatch):
    """The pipe said readable, but the data was gone (another reader, a race): the read must not
    block for good on the empty pipe; it waits on and times out at the deadline."""
    r, w = os.pipe()
    os.set_blocking(r, False)
    real_wait = protocol.wait_ready
    calls = []

    def says_ready_once(fd, writable, timeout):
        calls.append(timeout)
        return True if len(calls) == 1 else real_wait(fd, writable, timeout)

    monkeypatch.setattr(protocol, "wait_ready", says_ready_once)
    try:
        with pytest.raises(protocol.PeerTimeout):
            protocol.FrameReader(r).read(time.monotonic() + 0.5)
        assert len(calls) >= 2
    finally:
        os.close(r)
        os.close(w)


def test_descriptors_past_1023_are_waited_on():
    """select() refuses them; a harness in a busy server holds that many."""
    r, w = os.pipe()
    high_r, high_w = os.dup2(r, 1500), os.dup2(w, 1501)
    os.close(r)
    os.close(w)
    try:
        os.set_blocking(high_w, False)
        protocol.write_frame(high_w, {"ok": True}, deadline=time.monotonic() + 5)
        header, _ = protocol.FrameReader(high_r).read(time.monotonic() + 5)
        assert header["ok"] is True
    finally:
        os.close(high_r)
        os.close(high_w)


def test_a_closed_jail_signals_nobody_who_took_its_number(later):
    """A late stop from a cancelled evaluation's thread after another thread closed the worker
    (and the Popen reaped it): the jail has let its pidfd go, and must not fall back to the
    number, which may lead a later worker's group by then."""
    first = _leader()
    jail = jail_mod.Jail("test worker", None, None)
    jail.attach(first.pid)
    jail.close()
    first.wait(timeout=10)
    _late_signals_miss(jail, later)


def test_without_the_group_flag_a_reaped_worker_is_not_signalled_by_number(monkeypatch, later):
    """Kernels before 6.9 signal the group by number, and only while the kernel still reports the
    worker unreaped."""
    monkeypatch.setattr(pidhandle, "_GROUP_FLAG", False)
    first = _leader()
    jail = jail_mod.Jail("test worker", None, None)
    jail.attach(first.pid)
    try:
        assert jail.stop(timeout=5.0) is True and _state(first.pid) == "T"  # the fallback works
        jail.resume()
        first.kill()
        first.wait(timeout=10)
        _late_signals_miss(jail, later)
    finally:
        jail.close()


@pytest.fixture
def deaf_worker(tmp_path, monkeypatch):
    """A WorkerProc whose process never reads a byte of what the harness writes (a hostile or
    wedged worker): the interpreter it starts is a shell that sleeps."""
    from evoteam.servers.bench.measurement import workerproc

    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\nexec sleep 600\n")
    fake.chmod(0o755)
    monkeypatch.setattr(workerproc.sys, "executable", str(fake))
    w = workerproc.WorkerProc("test worker", {"mode": "none"}, tmp_path, None)
    yield w
    w.close()


def _within(seconds: float, fn):
    """fn() run in a thread, failing (not hanging the suite) when it has not returned in time."""
    import threading

    out: dict = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            out["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"still blocked after {seconds} s"
    return out


def test_a_request_to_a_worker_that_never_reads_ends_as_a_timeout(deaf_worker):
    import numpy as np

    from evoteam.servers.bench.measurement.workerproc import WorkerFailure

    big = {"x": np.zeros(1 << 20)}  # 8 MiB: more than the pipe holds
    out = _within(60, lambda: deaf_worker.request({"cmd": "noop"}, 1.0, "a test request", arrays=big))
    assert isinstance(out.get("error"), WorkerFailure), out
    assert out["error"].status == "TIMEOUT" and "did not read its request" in out["error"].message


def test_a_closed_worker_takes_no_request_and_keeps_its_pipes_for_a_thread_still_in_one(deaf_worker):
    from evoteam.servers.bench.measurement.workerproc import WorkerFailure

    rfd = deaf_worker.rfd
    with deaf_worker._using("a request in another thread"):
        deaf_worker.close()
        os.fstat(rfd)  # still this worker's pipe: the thread in its request may read on
    with pytest.raises(OSError):
        os.fstat(rfd)  # closed by the last use to end
    with pytest.raises(WorkerFailure, match="closed"):
        deaf_worker.request({"cmd": "noop"}, 1.0, "a late request")


def test_a_dead_workers_own_children_are_killed_before_it_is_reaped(tmp_path, monkeypatch):
    """Without a cgroup and without the group flag (kernels before 6.9), the worker's group is
    signalled by number, which is safe only while the worker is unreaped: so its death is handled
    by killing the group first and reaping after (reaped first, its children lived on)."""
    from evoteam.servers.bench.measurement import workerproc

    monkeypatch.setattr(jail_mod, "_CG_ROOT", None)
    monkeypatch.setattr(pidhandle, "_GROUP_FLAG", False)
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\nsleep 600 &\nexec sleep 600\n")  # a child in the worker's group
    fake.chmod(0o755)
    monkeypatch.setattr(workerproc.sys, "executable", str(fake))
    w = workerproc.WorkerProc("test worker", {"mode": "none"}, tmp_path, None)
    try:
        deadline = time.monotonic() + 10
        while not (children := [p for p in w.jail.members() if p != w.proc.pid]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert children, "the fake worker's child did not start"
        os.kill(w.proc.pid, signal.SIGKILL)  # the worker dies; its child does not by itself
        failure = w._death()
        assert "killed" in failure.message or "SIGKILL" in failure.message
        deadline = time.monotonic() + 10  # a killed process still has to run to exit (a busy machine)
        while not all(_gone_or_zombie(p) for p in children) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert all(_gone_or_zombie(p) for p in children), [(_state_or(p)) for p in children]
    finally:
        w.close()


def _state_or(pid: int) -> str:
    try:
        return _state(pid)
    except OSError:
        return "gone"


def _gone_or_zombie(pid: int) -> bool:
    return _state_or(pid) in ("gone", "Z")
