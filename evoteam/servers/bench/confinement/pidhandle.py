"""A worker process as the harness signals and waits for it: by pidfd, never by a stale number.

A worker's pid number is free again once it is reaped, and every worker leads a process group of
its own number, so a signal by number that comes late (a cancelled evaluation's thread stopping
"its" worker after another thread closed it) would stop or kill a worker started later. A pidfd
names the process itself. With Linux 6.9's ``PIDFD_SIGNAL_PROCESS_GROUP`` a signal through it
reaches the worker's whole group, even after the worker itself was reaped; on older kernels the
group is signalled by number, and only while the kernel still reports the worker unreaped.
"""

from __future__ import annotations

import errno
import os
import select
import signal
import threading
import time

PIDFD_SIGNAL_PROCESS_GROUP = 4  # linux/pidfd.h
_GROUP_FLAG: bool | None = None  # whether the kernel knows the flag (asked once)


def group_flag_known() -> bool:
    """Whether pidfd_send_signal takes PIDFD_SIGNAL_PROCESS_GROUP here: asked once with signal 0
    of this process (EINVAL: an older kernel; ESRCH, not a group leader, still means it does)."""
    global _GROUP_FLAG
    if _GROUP_FLAG is None:
        try:
            fd = os.pidfd_open(os.getpid())
        except (OSError, AttributeError):
            return False  # asked again next time (out of descriptors is not an old kernel)
        try:
            signal.pidfd_send_signal(fd, 0, None, PIDFD_SIGNAL_PROCESS_GROUP)
            known = True
        except OSError as exc:
            known = exc.errno != errno.EINVAL
        finally:
            os.close(fd)
        _GROUP_FLAG = known
    return _GROUP_FLAG


class PidHandle:
    """One child process that leads its own process group. Every use of the pidfd holds a lock
    that ``close`` takes too: a pidfd closed while another thread signals through it could be
    another worker's by then. A closed handle signals nobody and waits for nothing."""

    def __init__(self, pid: int):
        self.pid = pid
        self.closed = False
        self._lock = threading.Lock()
        try:
            self.pidfd: int | None = os.pidfd_open(pid)
        except (OSError, AttributeError):
            self.pidfd = None  # Linux before 5.3, or out of descriptors

    def signal_group(self, sig: int) -> bool:
        """Send ``sig`` to every process of the group; False when none is left or closed. (On a
        kernel without the flag, a reap by another thread between the check and the signal by
        number remains possible: docs/bench.md.)"""
        with self._lock:
            if self.closed:
                return False
            if self.pidfd is not None and group_flag_known():
                try:
                    signal.pidfd_send_signal(self.pidfd, sig, None, PIDFD_SIGNAL_PROCESS_GROUP)
                    return True
                except OSError:
                    return False
            if not self._unreaped():
                return False
            try:
                os.killpg(self.pid, sig)
            except (ProcessLookupError, PermissionError):
                return False
            return True

    def group_alive(self) -> bool:
        """Whether the group may still have members under its number."""
        with self._lock:
            if self.closed:
                return False
            if self.pidfd is not None and group_flag_known():
                try:
                    signal.pidfd_send_signal(self.pidfd, 0, None, PIDFD_SIGNAL_PROCESS_GROUP)
                except ProcessLookupError:
                    return False
                except OSError:
                    pass
                return True
            return self._unreaped()

    def _unreaped(self) -> bool:
        """Whether the process is still this one's child, alive or a zombie not yet reaped (which
        keeps its number). Asked of the kernel: a reap by a Popen is not seen anywhere else."""
        if self.pidfd is not None:
            try:
                signal.pidfd_send_signal(self.pidfd, 0)
            except ProcessLookupError:
                return False
            except OSError:
                pass
            return True
        try:
            os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return False
        return True

    def _wait_target(self) -> tuple[int, int]:
        """What waitid is asked about: the pidfd where there is one, else the number."""
        return (os.P_PIDFD, self.pidfd) if self.pidfd is not None else (os.P_PID, self.pid)

    def wait_stop(self) -> tuple[bool, int | None]:
        """(stopped, exit status) without blocking: (True, None) once the kernel reports it
        stopped (that report is taken), (False, status) when it has exited (the status as waitpid
        gives it), (False, None) while neither. An exit is only looked at, never reaped here: the
        worker's number stays its own until WorkerProc has killed its group and reaps it.
        ChildProcessError once it was reaped or the handle closed."""
        with self._lock:
            if self.closed:
                raise ChildProcessError("closed")
            kind, ident = self._wait_target()
            info = os.waitid(kind, ident, os.WSTOPPED | os.WEXITED | os.WNOHANG | os.WNOWAIT)
            if info is None or info.si_pid == 0:
                return False, None
            if info.si_code == os.CLD_STOPPED:
                os.waitid(kind, ident, os.WSTOPPED | os.WNOHANG)  # take the report (no exit is reaped)
                return True, None
        if info.si_code == os.CLD_EXITED:
            return False, (info.si_status & 0xFF) << 8
        return False, info.si_status | (0x80 if info.si_code == os.CLD_DUMPED else 0)

    def exited(self) -> bool:
        """Whether the process has exited (a zombie, or reaped), without reaping it."""
        with self._lock:
            if self.closed:
                return True
            kind, ident = self._wait_target()
            try:
                info = os.waitid(kind, ident, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return True
            return info is not None and info.si_pid != 0

    def wait_exit(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the process to exit, without reaping it; whether it
        has. (A pidfd becomes readable when its process exits.)"""
        if self.pidfd is None:
            deadline = time.monotonic() + timeout
            while not self.exited():
                if time.monotonic() >= deadline:
                    return False
                time.sleep(0.01)
            return True
        with self._lock:
            fd = None if self.closed or self.pidfd is None else os.dup(self.pidfd)
        if fd is None:
            return True
        try:
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            return bool(poller.poll(max(0, int(timeout * 1000)))) or self.exited()
        finally:
            os.close(fd)

    def close(self) -> None:
        with self._lock:
            self.closed = True
            if self.pidfd is not None:
                try:
                    os.close(self.pidfd)
                except OSError:
                    pass
                self.pidfd = None
