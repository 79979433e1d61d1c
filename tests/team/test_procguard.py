"""The process guard: a role's process group dies with the process that started it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from evoteam.servers.team.procguard import group_alive, kill_recorded, read_proc_file
from tests.support.polling import wait_until


def _parent_with_guard(tmp_path: Path, command: list[str]) -> tuple[subprocess.Popen, Path]:
    """A stand-in driver: a Python process that starts the guard around `command` and waits."""
    proc_file = tmp_path / "role.json"
    code = ("import subprocess, sys; p = subprocess.Popen([sys.executable, '-m', 'evoteam.servers.team.procguard', "
            f"*{command!r}]); p.wait()")
    env = {**os.environ, "EVOTEAM_PROC_FILE": str(proc_file)}
    parent = subprocess.Popen([sys.executable, "-c", code], env=env, start_new_session=True)
    assert wait_until(proc_file.exists, seconds=20.0), "the guard recorded no process group"
    return parent, proc_file


def test_killing_the_driver_alone_ends_the_role_group(tmp_path):
    # the "CLI" starts a grandchild, as Claude Code starts MCP servers and commands
    parent, proc_file = _parent_with_guard(tmp_path, ["/bin/sh", "-c", "sleep 300 & sleep 300"])
    record = read_proc_file(proc_file)
    try:
        assert record is not None and group_alive(record)
        os.kill(parent.pid, signal.SIGKILL)  # the driver's pid alone
        parent.wait()
        assert wait_until(lambda: subprocess.run(["pgrep", "-g", str(record["pgid"])], capture_output=True).returncode
                          != 0, seconds=20.0), "processes of the role's group outlived the driver"
    finally:
        with_group = subprocess.run(["pgrep", "-g", str(record["pgid"])], capture_output=True, text=True).stdout
        for pid in with_group.split():
            os.kill(int(pid), signal.SIGKILL)


def test_a_restarted_driver_kills_a_recorded_group_that_still_runs(tmp_path):
    sleeper = subprocess.Popen(["sleep", "300"], start_new_session=True)
    from evoteam.servers.team.procguard import start_time

    proc_file = tmp_path / "orphan.json"
    proc_file.write_text(json.dumps({"pid": sleeper.pid, "pgid": sleeper.pid, "start": start_time(sleeper.pid)}))
    assert kill_recorded(proc_file) is True
    assert sleeper.wait(timeout=10) == -signal.SIGKILL
    assert not proc_file.exists()
    # a pid reused by another process is never killed: the start time must match
    other = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        proc_file.write_text(json.dumps({"pid": other.pid, "pgid": other.pid, "start": "1"}))
        assert kill_recorded(proc_file) is False and other.poll() is None
    finally:
        other.kill()
        other.wait()


def test_guard_folders_go_with_their_process_and_abandoned_ones_are_swept(tmp_path, monkeypatch):
    """One guard folder per team server process stayed in the temporary folder for good: a
    process now removes its own at exit, and the first guard a process makes sweeps old ones that
    no process holds (a held one, of a live process in any PID namespace, stays)."""
    import fcntl
    import os
    import subprocess
    import sys
    import tempfile
    import time

    from evoteam.servers.team import launch

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    made = subprocess.run([sys.executable, "-P", "-c", "from evoteam.servers.team.launch import guarded_cli; "
                           "print(guarded_cli('/bin/true'))"], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "TMPDIR": str(tmp_path)})
    script = made.stdout.strip()
    assert made.returncode == 0 and script.startswith(str(tmp_path)), made.stderr
    assert not os.path.exists(script), "a process left its guard folder behind"

    day_old = time.time() - 2 * 24 * 3600
    abandoned, held = tmp_path / "evoteam-guard-abc", tmp_path / "evoteam-guard-def"
    for folder in (abandoned, held):
        folder.mkdir()
        (folder / "claude").write_text("#!/bin/sh\n")
        os.utime(folder, (day_old, day_old))
    fd = os.open(held, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(fd, fcntl.LOCK_SH)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(launch, "_GUARDS", {})
    try:
        own = launch.guarded_cli("/bin/true")
        assert not abandoned.exists() and held.exists() and os.path.exists(own)
    finally:
        os.close(fd)
