"""A worker's uid is its own: never one a process already runs as, never one this process handed
out a moment ago (jail.pick_uid). A random draw alone could give two workers one uid, and then
either could signal, trace or read the other."""

from __future__ import annotations

import os
import signal

import pytest

from evoteam.servers.bench.confinement import jail


def _draws(monkeypatch, values: list[int]) -> list[int]:
    """Make jail's draws return UID_BASE + each of ``values`` in turn, and every pick scan /proc
    afresh; returns the draws made, to count them."""
    drawn: list[int] = []
    it = iter(values)

    def draw() -> int:
        drawn.append(jail.UID_BASE + next(it))
        return drawn[-1]

    monkeypatch.setattr(jail, "_draw", draw)
    monkeypatch.setattr(jail, "UID_SCAN_S", -1.0)
    return drawn


def test_a_uid_handed_out_is_not_handed_out_again(monkeypatch):
    offset = 654_321
    jail._picked.pop(jail.UID_BASE + offset, None)
    drawn = _draws(monkeypatch, [offset, offset, offset + 1])
    first = jail.pick_uid()
    second = jail.pick_uid()
    assert first == jail.UID_BASE + offset and second == jail.UID_BASE + offset + 1
    assert len(drawn) == 3  # the repeat was drawn and refused


def test_a_uid_a_process_runs_as_is_refused_without_root_too(monkeypatch):
    offset = 654_450
    jail._picked.pop(jail.UID_BASE + offset, None)
    monkeypatch.setattr(jail, "running_uids", lambda: {jail.UID_BASE + offset})
    drawn = _draws(monkeypatch, [offset, offset + 3])
    assert jail.pick_uid() == jail.UID_BASE + offset + 3 and len(drawn) == 2


def test_the_scan_keeps_only_the_workers_uid_range():
    # Root (uid 0) always runs here, so the scan would hold 0 without the range filter; that a
    # worker's uid is seen is the root-only test below.
    assert all(jail.UID_BASE <= u < jail.UID_BASE + jail.UID_SPAN for u in jail.running_uids())


def test_a_reservation_lapses_after_its_hold(monkeypatch):
    offset = 654_400
    jail._picked.pop(jail.UID_BASE + offset, None)
    _draws(monkeypatch, [offset, offset])
    assert jail.pick_uid() == jail.UID_BASE + offset
    jail._picked[jail.UID_BASE + offset] -= jail.UID_HOLD_S + 1  # as if picked long ago, and no process runs as it
    assert jail.pick_uid() == jail.UID_BASE + offset


@pytest.mark.skipif(not jail.can_drop_privileges(), reason="needs root to run a process as another uid")
def test_a_uid_a_process_runs_as_is_never_picked(monkeypatch):
    offset = 654_500
    uid = jail.UID_BASE + offset
    jail._picked.pop(uid, None)
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # a process running as that uid, as a live worker of another harness would
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            os.write(write, b"x")
            signal.pause()
        finally:
            os._exit(0)
    try:
        os.close(write)
        assert os.read(read, 1) == b"x"
        assert uid in jail.running_uids()
        drawn = _draws(monkeypatch, [offset, offset + 7])
        assert jail.pick_uid() == uid + 7
        assert len(drawn) == 2
    finally:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
        os.close(read)
