"""The warm hook process (evoteam.plugin.warm): hooks run as Claude Code runs them (a fresh
`python -m evoteam.plugin.run <event>` with JSON on stdin) against a real store, and answer the
same whether they ran warm or in their own process; what keys, refuses, and ends a warm process."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from evoteam import reuse_key
from evoteam.plugin import state, warm
from tests.plugin.test_hooks import base_input, seed
from tests.support.polling import wait_until


def _warm_pids(home: Path) -> list[int]:
    """Warm processes started with EVOTEAM_HOME=home (read from /proc: their arguments name
    no path, so their environment tells them apart)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
            if b"evoteam.plugin.warm" not in cmd:
                continue
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"EVOTEAM_HOME={home}".encode() in environ:
            pids.append(int(entry.name))
    return pids


@pytest.fixture
def case(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    # A short folder: a socket's path has at most ~100 bytes, and pytest's are long.
    home = Path(tempfile.mkdtemp(prefix="evw-", dir="/tmp"))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("EVOTEAM_", "CLAUDE_")) and k not in ("PYTEST_CURRENT_TEST",)}
    env.update({"EVOTEAM_HOME": str(home), "EVOTEAM_DB": str(tmp_path / "kb.db"), "HOME": str(tmp_path),
                "EVOTEAM_HOOK_LOG": str(tmp_path / "hooks.log"), "EVOTEAM_HOOK_DEBUG": "1",
                "EVOTEAM_HOOK_WARM_IDLE": "60", "CLAUDE_PROJECT_DIR": str(project)})
    run_id = seed(tmp_path / "kb.db")
    state.activate(project, run_id, version=1, session_id="sess-1")
    yield {"env": env, "project": project, "home": home, "log": tmp_path / "hooks.log", "run_id": run_id,
           "cwd": tmp_path}
    for pid in _warm_pids(home):
        os.kill(pid, signal.SIGKILL)
    shutil.rmtree(home, ignore_errors=True)


def hook(case, event: str, payload: dict, **env_changes: str) -> tuple[dict | None, int]:
    """Run one hook as Claude Code does; its output and the hook process's pid."""
    env = {**case["env"], **env_changes}
    proc = subprocess.Popen([sys.executable, "-m", "evoteam.plugin.run", event], cwd=case["cwd"], env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(json.dumps(payload), timeout=60)
    assert proc.returncode == 0 and err == "", err
    return (json.loads(out) if out.strip() else None), proc.pid


def ran_in(case, event: str) -> list[int]:
    """The pids that ran `event`, in order (from the debug log)."""
    pids = []
    for line in case["log"].read_text().splitlines():
        if f" {event}: ok in " in line:
            pids.append(int(line.split("(pid ")[1].split(")")[0]))
    return pids


def sockets(case) -> list[Path]:
    folder = case["home"] / "run"
    return sorted(folder.glob("hooks-*.sock")) if folder.is_dir() else []


def test_later_hooks_run_warm_and_answer_as_a_fresh_process(case):
    start = base_input(case["project"], "SessionStart", source="startup")
    cold, cold_pid = hook(case, "session-start", start)
    assert case["run_id"] in cold["hookSpecificOutput"]["additionalContext"]
    assert wait_until(lambda: sockets(case)), "the first hook did not start a warm process"
    (warm_pid,) = _warm_pids(case["home"])
    hot, hot_pid = hook(case, "session-start", start)
    assert hot == cold
    assert ran_in(case, "session-start") == [cold_pid, warm_pid]  # the second ran in the warm process
    alone, _ = hook(case, "session-start", start, EVOTEAM_HOOK_WARM="0")
    assert alone == cold
    # Per-session variables of Claude Code do not make another warm process.
    again, _ = hook(case, "session-start", start, CLAUDE_CODE_SESSION_ID="another", CLAUDE_ENV_FILE="/x")
    assert again == cold and ran_in(case, "session-start")[-1] == warm_pid and len(sockets(case)) == 1


def test_another_environment_gets_another_warm_process(case):
    stop = base_input(case["project"], "Stop", session_id="sess-1")
    first, _ = hook(case, "stop", stop, EVOTEAM_MAX_IDLE_CONTINUES="10")
    assert first["decision"] == "block"
    assert wait_until(lambda: sockets(case))
    warm_pid = _warm_pids(case["home"])[0]
    second, _ = hook(case, "stop", stop, EVOTEAM_MAX_IDLE_CONTINUES="10")
    assert second["decision"] == "block" and ran_in(case, "stop")[-1] == warm_pid
    # The off switch lives in the environment: the warm process of the old one must not answer.
    off, off_pid = hook(case, "stop", stop, EVOTEAM_MAX_IDLE_CONTINUES="10", EVOTEAM_AUTOCONTINUE="0")
    assert off is None and ran_in(case, "stop")[-1] == off_pid  # no warm process had that environment
    assert wait_until(lambda: len(sockets(case)) == 2)  # it started its own


def test_parallel_hooks_all_answered(case):
    start = base_input(case["project"], "SessionStart", source="startup")
    expected, _ = hook(case, "session-start", start)
    assert wait_until(lambda: sockets(case))
    results: list = []
    threads = [threading.Thread(target=lambda: results.append(hook(case, "session-start", start)[0]))
               for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [expected] * 6


def test_a_failing_hook_is_logged_and_the_session_goes_on(case):
    state.activate(case["project"], "run_missing", session_id="sess-1")
    hook(case, "session-start", base_input(case["project"], "SessionStart"))
    assert wait_until(lambda: sockets(case))
    out, _ = hook(case, "session-start", base_input(case["project"], "SessionStart"))
    assert out is None
    assert case["log"].read_text().count("session-start: failed") == 2


def test_idle_warm_process_leaves_and_the_next_hook_runs_in_its_own_process(case):
    """A warm process nobody asks leaves after its idle time and removes its socket; the next
    hook then runs in its own process. The test starts the warm process as a hook does, but
    itself, to watch it from its first moment: on a busy machine a one-second idle can pass
    while the hook that started it is still running its own event."""
    env = {**case["env"], "EVOTEAM_HOOK_WARM_IDLE": "1"}
    key = warm.environment_key(env, str(case["cwd"]))
    path = warm.socket_path(key, env)
    proc = subprocess.Popen([sys.executable, "-P", "-m", "evoteam.plugin.warm"], cwd=case["cwd"],
                            env=env, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    proc.stdin.write(json.dumps({"path": path, "key": key}).encode())  # as warm.start hands them over
    proc.stdin.close()
    # 0: it listened (2 would mean it refused the key or found no socket) and left when idle.
    assert proc.wait(timeout=120) == 0, proc.stderr.read()
    assert not os.path.exists(path) and not sockets(case)
    out, pid = hook(case, "session-start", base_input(case["project"], "SessionStart", source="startup"),
                    EVOTEAM_HOOK_WARM_IDLE="1")
    assert out is not None and ran_in(case, "session-start")[-1] == pid  # ran in its own process


def test_removing_the_socket_ends_the_warm_process(case):
    hook(case, "session-start", base_input(case["project"], "SessionStart"))
    assert wait_until(lambda: sockets(case))
    sockets(case)[0].unlink()
    assert wait_until(lambda: not _warm_pids(case["home"]), seconds=10)


def test_off_switch_and_unsafe_folder_start_nothing(case):
    start = base_input(case["project"], "SessionStart", source="startup")
    out, _ = hook(case, "session-start", start, EVOTEAM_HOOK_WARM="off")
    assert out is not None
    time.sleep(1.0)
    assert not sockets(case) and not _warm_pids(case["home"])
    # A run folder that others can write into could hold someone else's socket under our name.
    (case["home"] / "run").mkdir(parents=True)
    os.chmod(case["home"] / "run", 0o777)
    out2, pid = hook(case, "session-start", start)
    assert out2 == out and ran_in(case, "session-start")[-1] == pid
    time.sleep(1.0)
    assert not sockets(case) and not _warm_pids(case["home"])


def test_warm_process_refuses_a_request_of_another_environment(case):
    hook(case, "session-start", base_input(case["project"], "SessionStart"))
    assert wait_until(lambda: sockets(case))
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(str(sockets(case)[0]))
    conn.settimeout(10)
    nonce = warm._read_challenge(conn)  # noqa: SLF001
    assert nonce is not None
    conn.sendall(warm.sign("0" * 64, nonce, "session-start", "{}"))  # signed with another key
    conn.shutdown(socket.SHUT_WR)
    assert conn.recv(100) == b""  # closed without taking it
    conn.close()


def _fake_warm(monkeypatch, tmp_path: Path, reply: bytes | None) -> threading.Thread:
    """A socket where `ask` looks, that reads the request and answers `reply` (None: closes
    without a word)."""
    monkeypatch.setenv("EVOTEAM_HOME", tempfile.mkdtemp(prefix="evw-", dir="/tmp"))
    monkeypatch.chdir(tmp_path)
    path = warm.socket_path(warm.environment_key())
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)

    def serve():
        conn, _ = server.accept()
        with conn:
            conn.sendall(warm.CHALLENGE + b"0" * 32 + b"\n")
            while conn.recv(65536):
                pass
            if reply:
                conn.sendall(reply)
        server.close()
        shutil.rmtree(os.environ["EVOTEAM_HOME"], ignore_errors=True)

    thread = threading.Thread(target=serve)
    thread.start()
    return thread


def test_a_taken_request_is_never_run_twice(tmp_path, monkeypatch):
    thread = _fake_warm(monkeypatch, tmp_path, warm.TAKEN)  # takes it, then dies before answering
    assert warm.ask("stop", "{}") == (True, None)
    thread.join()


def test_an_untaken_request_falls_back_to_the_hooks_own_process(tmp_path, monkeypatch):
    thread = _fake_warm(monkeypatch, tmp_path, None)
    assert warm.ask("stop", "{}") == (False, None)
    thread.join()
    thread = _fake_warm(monkeypatch, tmp_path, warm.TAKEN + json.dumps({"output": {"systemMessage": "x"}}).encode())
    assert warm.ask("stop", "{}") == (True, {"systemMessage": "x"})
    thread.join()


def test_code_fingerprint_follows_edits(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    module = pkg / "sub" / "m.py"
    module.write_text("x = 1\n")
    before = reuse_key.code_fingerprint(pkg)
    assert reuse_key.code_fingerprint(pkg) == before
    module.write_text("x = 22\n")
    assert reuse_key.code_fingerprint(pkg) != before
    after = reuse_key.code_fingerprint(pkg)
    os.utime(module, ns=(1, 1))
    assert reuse_key.code_fingerprint(pkg) != after


def _warm_pids_tagged(tag: str) -> list[int]:
    """Warm processes started with EVOTEAM_TEST_TAG=tag in their environment."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            if (entry.name.isdigit() and b"evoteam.plugin.warm" in (entry / "cmdline").read_bytes()
                    and f"EVOTEAM_TEST_TAG={tag}".encode() in (entry / "environ").read_bytes().split(b"\0")):
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def test_a_home_too_long_for_a_socket_falls_back_to_a_short_private_folder(case):
    """A 120-character home and no XDG_RUNTIME_DIR: the socket cannot live under the home, so
    it lives in /tmp/evoteam-<uid> (0700, the user's), and later hooks still run warm."""
    tag = os.urandom(6).hex()
    long_home = case["home"] / ("h" * 100)
    changes = {"EVOTEAM_HOME": str(long_home), "XDG_RUNTIME_DIR": "", "EVOTEAM_TEST_TAG": tag}
    env = {**case["env"], **changes}
    assert len(os.path.join(str(long_home), "run", "hooks-" + "0" * 24 + ".sock")) > 110
    start = base_input(case["project"], "SessionStart", source="startup")
    try:
        cold, cold_pid = hook(case, "session-start", start, **changes)
        folder = Path(f"/tmp/evoteam-{os.getuid()}")

        expected = warm.socket_path(warm.environment_key(env, str(case["cwd"])), env)
        assert expected.startswith(f"{folder}/")

        def listening() -> bool:  # the process exists before its socket does
            return bool(_warm_pids_tagged(tag)) and Path(expected).exists()

        assert wait_until(listening, seconds=60), "no warm process listening for a long home"
        (warm_pid,) = _warm_pids_tagged(tag)
        hot, _ = hook(case, "session-start", start, **changes)
        assert hot == cold and ran_in(case, "session-start") == [cold_pid, warm_pid]
        info = folder.stat()
        assert info.st_uid == os.getuid() and info.st_mode & 0o777 == 0o700
        ok, why = warm.explain(env)
        assert ok and str(folder) in why
    finally:
        for pid in _warm_pids_tagged(tag):
            os.kill(pid, signal.SIGKILL)


def test_doctor_says_when_warm_hooks_cannot_run(case, monkeypatch):
    """Every place refused (too long, or a runtime folder others can write into): `explain`,
    which `evoteam doctor` prints as a warning, says warm hooks are off and why."""
    import asyncio

    from evoteam.doctor import check_warm_hooks

    runtime = Path(tempfile.mkdtemp(prefix="evrt-", dir="/tmp"))
    try:
        (runtime / "evoteam").mkdir()
        os.chmod(runtime / "evoteam", 0o777)
        env = {**case["env"], "EVOTEAM_HOME": str(case["home"] / ("h" * 100)), "XDG_RUNTIME_DIR": str(runtime)}
        ok, why = warm.explain(env)
        assert not ok and "too long" in why and "others can write" in why
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        check = asyncio.run(check_warm_hooks())
        assert check.ok and check.warning and "off:" in check.detail
        ok, why = warm.explain({**case["env"], "EVOTEAM_HOOK_WARM": "0"})
        assert not ok and "EVOTEAM_HOOK_WARM=0" in why
    finally:
        shutil.rmtree(runtime, ignore_errors=True)


def test_the_key_is_not_in_the_warm_processs_arguments(case):
    """Issue 23: a process's arguments are readable by every user (`ps`); the key, which a
    request must be signed with, and the socket's name (part of the key) are not among them."""
    hook(case, "session-start", base_input(case["project"], "SessionStart"))
    assert wait_until(lambda: sockets(case))
    (pid,) = _warm_pids(case["home"])
    key = warm.environment_key(case["env"], str(case["cwd"]))
    args = Path(f"/proc/{pid}/cmdline").read_bytes()
    assert key[:24].encode() not in args and str(case["home"]).encode() not in args, args


class _Recorder:
    """A Unix socket between a client and the warm process that passes bytes both ways and
    keeps what the client sent (an eavesdropper's recording)."""

    def __init__(self, path: str, upstream: str):
        self.sent = b""
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(path)
        self._server.listen(1)
        self._upstream = upstream
        self.thread = threading.Thread(target=self._relay, daemon=True)
        self.thread.start()

    def _relay(self) -> None:
        client, _ = self._server.accept()
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        upstream.connect(self._upstream)

        def pump(src: socket.socket, dst: socket.socket, record: bool) -> None:
            while chunk := src.recv(65536):
                if record:
                    self.sent += chunk
                dst.sendall(chunk)
            dst.shutdown(socket.SHUT_WR)

        back = threading.Thread(target=pump, args=(upstream, client, False))
        back.start()
        pump(client, upstream, True)
        back.join(timeout=60)
        client.close()
        upstream.close()
        self._server.close()


def test_a_recorded_request_sent_again_is_refused(case, monkeypatch):
    """Issue 23: a request is good for the one connection it was signed on. A real hook request
    is recorded on its way to the warm process and ran once; the same bytes sent again on a new
    connection are refused, and the hook does not run a second time."""
    start = base_input(case["project"], "SessionStart", source="startup")
    cold, _ = hook(case, "session-start", start)
    assert wait_until(lambda: sockets(case))
    (warm_pid,) = _warm_pids(case["home"])
    real = str(sockets(case)[0])
    recorder = _Recorder(str(case["home"] / "rec.sock"), real)
    monkeypatch.chdir(case["cwd"])  # the hook's folder: part of the key
    monkeypatch.setattr(warm, "socket_path", lambda key, env=None: str(case["home"] / "rec.sock"))
    handled, output = warm.ask("session-start", json.dumps(start), env=case["env"])
    recorder.thread.join(timeout=60)
    assert handled and output == cold
    runs = ran_in(case, "session-start")
    assert runs[-1] == warm_pid and recorder.sent

    replay = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    replay.settimeout(30)
    replay.connect(real)
    replay.sendall(recorder.sent)
    replay.shutdown(socket.SHUT_WR)
    answer = b""
    while chunk := replay.recv(65536):
        answer += chunk
    replay.close()
    assert warm.TAKEN not in answer, answer
    # The answer ends only when the warm process closes, after any run it took: none was.
    assert ran_in(case, "session-start") == runs
