"""A worker's uid is its own: never one a process already runs as, never one this process handed
out a moment ago (jail.pick_uid). A random draw alone could give two workers one uid, and then
either could signal, trace or read the other."""

from __future__ import annotations

import os
import signal

import pytest

from evoteam.servers.bench.confinement import jail


def _draws(monkeypatch, values: list[int]) -> list[int]:
    """Make secrets.randbelow in jail return ``values`` in turn (offsets from UID_BASE); returns
    the list of offsets it was asked for, to count the draws."""
    asked: list[int] = []
    it = iter(values)

    def randbelow(n: int) -> int:
        asked.append(n)
        return next(it)

    monkeypatch.setattr(jail.secrets, "randbelow", randbelow)
    return asked


def test_a_uid_handed_out_is_not_handed_out_again(monkeypatch):
    offset = 654_321
    jail._picked.pop(jail.UID_BASE + offset, None)
    asked = _draws(monkeypatch, [offset, offset, offset + 1])
    first = jail.pick_uid()
    second = jail.pick_uid()
    assert first == jail.UID_BASE + offset and second == jail.UID_BASE + offset + 1
    assert len(asked) == 3  # the repeat was drawn and refused


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
        asked = _draws(monkeypatch, [offset, offset + 7])
        assert jail.pick_uid() == uid + 7
        assert len(asked) == 2
    finally:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
        os.close(read)
