"""One driver per run on a shared PostgreSQL store: the lock is an advisory lock in the database,
so drivers on different machines exclude each other, and a driver killed with SIGKILL frees it."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from evoteam.supervisor.driver import DatabaseRunLock, RunLock, RunLocked, run_lock
from tests.support.polling import wait_until


def test_the_store_decides_the_kind_of_lock(tmp_path, postgres_url):
    assert isinstance(run_lock(tmp_path / "kb.db", "run_1"), RunLock)
    assert isinstance(run_lock(postgres_url, "run_1"), DatabaseRunLock)


def test_one_driver_per_run_on_a_shared_database(postgres_url):
    a, b = run_lock(postgres_url, "run_1"), run_lock(postgres_url, "run_1")
    other = run_lock(postgres_url, "run_2")
    a.acquire()
    try:
        with pytest.raises(RunLocked, match="advisory lock"):
            b.acquire()
        other.acquire()  # another run is driven independently
        other.release()
    finally:
        a.release()
    b.acquire()
    b.release()


def test_a_driver_killed_with_sigkill_frees_the_lock(postgres_url):
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time\n"
         "from evoteam.supervisor.driver import run_lock\n"
         f"lock = run_lock({postgres_url!r}, 'run_k')\n"
         "lock.acquire()\n"
         "print('held', flush=True)\n"
         "time.sleep(600)\n"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        mine = run_lock(postgres_url, "run_k")
        with pytest.raises(RunLocked):
            mine.acquire()
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)

        def free() -> bool:
            try:
                mine.acquire()
                return True
            except RunLocked:
                return False

        # The server frees the lock once it sees the dead holder's connection close.
        assert wait_until(free)
        mine.release()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
