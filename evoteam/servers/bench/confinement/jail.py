"""The harness's hold on a worker process tree: stop it, resume it, read its memory, kill all of it.

Every worker is the leader of its own process group, and candidate workers cannot leave it
(seccomp refuses ``setsid``/``setpgid``), so a signal to the group reaches every process the
candidate started. Where a cgroup v2 hierarchy is writable (root), each worker also gets a cgroup
of its own: ``cgroup.freeze`` holds every process in it (SIGCONT cannot undo that) and
``cgroup.kill`` ends all of them at once, whatever group or session they are in.

The harness stops a worker (SIGSTOP to its group, then waits until the kernel reports the worker
stopped) the moment a call returns: the harness's clock stops only then, and the outputs are read
from the stopped process's memory (``/proc/PID/mem``), so nothing of the candidate runs between
the end of the timed call and the capture of its result.
"""

from __future__ import annotations

import ctypes
import os
import secrets
import signal
import threading
import time
from pathlib import Path

from evoteam.servers.bench.confinement import scratch
from evoteam.servers.bench.confinement.leftovers import kill_orphaned_workers, sweep_leftovers
from evoteam.servers.bench.confinement.limits import DEFAULT_PIDS, TreeLimits
from evoteam.servers.bench.confinement.pidhandle import PidHandle


class _IOVec(ctypes.Structure):
    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


def _vm_read():
    """libc's process_vm_readv, or None where there is none."""
    try:
        fn = ctypes.CDLL(None, use_errno=True).process_vm_readv
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.POINTER(_IOVec), ctypes.c_ulong, ctypes.POINTER(_IOVec), ctypes.c_ulong,
                   ctypes.c_ulong]
    fn.restype = ctypes.c_ssize_t
    return fn


_VM_READ = _vm_read()

# How long stop() polls before it falls back to short sleeps, unless its caller says otherwise:
# about the 50 polls it always made. The harness polls longer while it runs on CPUs apart from
# the worker's (session.py), where polling cannot take the CPU the worker needs to stop.
SPIN_S = 0.00005

_CG_ROOT: Path | None | bool = False  # False: not probed yet


def _own_cgroup_dir() -> Path | None:
    """This process's directory in a cgroup v2 hierarchy where a child with freeze and kill can
    be made, or None."""
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
        rel = next((line.split(":", 2)[2] for line in Path("/proc/self/cgroup").read_text().splitlines()
                    if line.startswith("0::")), None)
    except OSError:
        return None
    if rel is None:
        return None
    for line in mounts:
        parts = line.split()
        if len(parts) > 2 and parts[2] == "cgroup2":
            base = Path(parts[1]) / rel.lstrip("/")
            probe = base / f"evoteam-probe-{os.getpid()}-{secrets.token_hex(3)}"
            try:
                probe.mkdir()
            except OSError:
                continue
            try:
                ok = (probe / "cgroup.freeze").exists() and (probe / "cgroup.kill").exists()
            finally:
                try:
                    probe.rmdir()
                except OSError:
                    pass
            if ok:
                return base
    return None


def cgroup_root() -> Path | None:
    global _CG_ROOT
    if _CG_ROOT is False:
        _CG_ROOT = _own_cgroup_dir() if os.environ.get("EVOTEAM_BENCH_NO_CGROUP") != "1" else None
        if _CG_ROOT is not None:
            sweep_leftovers(_CG_ROOT)
    return _CG_ROOT  # type: ignore[return-value]


def can_drop_privileges() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0 and os.environ.get("EVOTEAM_BENCH_NO_UID") != "1"


# Workers' uids are drawn from [UID_BASE, UID_BASE + UID_SPAN).
UID_BASE, UID_SPAN = 200_000, 800_000
# How long a uid this process handed out stays reserved here whatever /proc says: it covers the
# time between the pick and the worker's setuid (a worker's start, well under this).
UID_HOLD_S = 600.0
# A scan of /proc is reused this long (the picks of one evaluation share one; this process's own
# picks are in _picked meanwhile).
UID_SCAN_S = 1.0
_picked: dict[int, float] = {}  # uid -> when this process handed it out
_picked_lock = threading.Lock()
_scan: tuple[float, set[int]] = (float("-inf"), set())


def running_uids() -> set[int]:
    """Every uid in the workers' range that a process this harness can see in /proc runs as now
    (real, effective, saved or filesystem uid, from the Uid line of /proc/PID/status). A process
    in another PID namespace, or hidden by a hidepid mount, is not seen."""
    uids: set[int] = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status", "rb") as fh:
                for line in fh:
                    if line.startswith(b"Uid:"):
                        uids.update(u for u in map(int, line.split()[1:]) if UID_BASE <= u < UID_BASE + UID_SPAN)
                        break
        except (OSError, ValueError):
            continue  # gone meanwhile
    return uids


def _draw() -> int:
    return UID_BASE + secrets.randbelow(UID_SPAN)


def pick_uid() -> int:
    """A uid of its own for one candidate worker: no other process (in particular no other
    candidate's) runs as it, so it can signal, trace or read /proc of nothing but itself.
    Drawn at random, then refused while a process runs as it (as of a scan at most UID_SCAN_S
    old) or this process handed it out in the last UID_HOLD_S (a random draw alone collides: with
    ten workers alive, about one draw in 80,000). Two harness processes drawing the same uid
    within one worker's start of each other remain possible (about one in 800,000 per pair)."""
    global _scan
    now = time.monotonic()
    if now - _scan[0] > UID_SCAN_S:
        _scan = (now, running_uids())  # outside the lock: a scan takes ~25 us a process
    taken = _scan[1]
    with _picked_lock:
        for uid, when in list(_picked.items()):
            if now - when > UID_HOLD_S:
                del _picked[uid]
        while True:
            uid = _draw()
            if uid not in taken and uid not in _picked:
                _picked[uid] = now
                return uid


def sched_state(pid: int) -> tuple:
    """Nice value, CPU affinity and scheduling policy of a process (what a hostile process would
    change to slow another down)."""
    return (os.getpriority(os.PRIO_PROCESS, pid), tuple(sorted(os.sched_getaffinity(pid))),
            os.sched_getscheduler(pid))


class Jail:
    """One worker's process group (and cgroup, where available)."""

    def __init__(self, label: str, memory_mb: int | None = None, pids: int | None = DEFAULT_PIDS):
        self.label = label
        self.pid: int | None = None
        self.cgroup: Path | None = None
        self.stopped = False
        self.exit_status: int | None = None
        self.mem_fd: int | None = None
        self._mem = threading.Lock()  # around every use of mem_fd, and its close
        # The worker itself, whatever its pid number becomes (signals and waits: pidhandle.py).
        self.handle: PidHandle | None = None
        # The worker's own uid, where it has one: a kit evaluator may start a session of its own,
        # which the process-group signals miss; without a cgroup, its uid still finds every process.
        self.uid: int | None = None
        self.freeze_fd: int | None = None
        self.events_fd: int | None = None
        self.thawed = False
        kill_orphaned_workers()  # once per process: workers a killed harness left stopped
        scratch.sweep_abandoned()  # at most every ten minutes: the folders a dead harness left
        root = cgroup_root()
        if root is not None:
            path = root / f"evoteam-{os.getpid()}-{secrets.token_hex(4)}"
            try:
                path.mkdir()
                self.cgroup = path
            except OSError:
                self.cgroup = None
        # Memory and process caps for the whole tree (limits.py), in this cgroup or in v1 ones.
        self.limits = TreeLimits(memory_mb, pids, self.cgroup)

    def describe(self) -> str:
        return ("cgroup" if self.cgroup else "process-group") + "+" + self.limits.describe()

    def attach(self, pid: int) -> None:
        """Called right after the worker starts, before it is sent anything (so before any
        candidate code can run)."""
        self.pid = pid
        self.handle = PidHandle(pid)
        self.limits.attach(pid)
        if self.cgroup is not None:
            try:
                (self.cgroup / "cgroup.procs").write_text(str(pid))
            except OSError:
                self._remove_cgroup()
        try:
            self.mem_fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            self.mem_fd = None

    # ------------------------------------------------------------ stop / resume

    def _cg_freeze(self, value: str) -> None:
        if self.cgroup is None:
            return
        # A freeze and a thaw around every call: the files stay open, so each is one pwrite, not an
        # open/write/close (the harness thaws just before a call's clock starts).
        try:
            if self.freeze_fd is None:
                self.freeze_fd = os.open(self.cgroup / "cgroup.freeze", os.O_WRONLY | os.O_CLOEXEC)
                self.events_fd = os.open(self.cgroup / "cgroup.events", os.O_RDONLY | os.O_CLOEXEC)
            os.pwrite(self.freeze_fd, value.encode(), 0)
        except OSError:
            return
        if value == "1":
            deadline = time.monotonic() + 2.0
            while time.monotonic() < deadline:
                try:
                    if b"frozen 1" in os.pread(self.events_fd, 256, 0):
                        return
                except OSError:
                    return
                time.sleep(0.0001)

    def _close_cgroup_files(self) -> None:
        for fd in (self.freeze_fd, self.events_fd):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.freeze_fd = self.events_fd = None

    def stop(self, timeout: float = 5.0, spin_s: float = 0.0) -> bool:
        """Stop every process of the worker and wait until the worker itself is stopped, polling
        for ``spin_s`` (at least SPIN_S) before short sleeps. Returns False when the worker is gone."""
        spin_s = max(spin_s, SPIN_S)
        if self.handle is None or self.exit_status is not None:
            return False
        if not self.handle.signal_group(signal.SIGSTOP):
            return False
        start = time.monotonic()
        deadline = start + timeout
        while True:
            try:
                stopped, status = self.handle.wait_stop()
            except ChildProcessError:
                return False
            if stopped:
                break
            if status is not None:
                self.exit_status = status
                return False
            now = time.monotonic()
            if now > deadline:
                break  # stuck in the kernel; the cgroup freeze below still holds the rest
            # This wait is inside a timed call's clock: a sleep costs ~100-200 us with timer
            # slack, and a real call needed one more often than an empty call (whose cost is
            # what is subtracted), which biased short kernels. Hence the polling first.
            if now - start > spin_s:
                time.sleep(0.00005)
        self.stopped = True
        return True

    def hold(self) -> None:
        """After stop(): freeze the cgroup too, so that nothing (not even a SIGCONT from a
        sibling that escaped the stop) runs while the harness reads the worker's memory."""
        self._cg_freeze("1")
        self.thawed = False

    def thaw(self) -> None:
        """Thaw the cgroup of a worker that is still stopped (SIGSTOP): nothing of it runs until
        resume(), so the harness does this before it starts a call's clock, not inside it."""
        if self.pid is None or self.exit_status is not None:
            return
        self._cg_freeze("0")
        self.thawed = True

    def cpu_usage_ns(self) -> int | None:
        """The CPU time every process and thread of the worker's cgroup has used so far (cpu.stat,
        kept by the kernel; exact while the cgroup is frozen), or None without a cgroup."""
        if self.cgroup is None:
            return None
        try:
            with open(self.cgroup / "cpu.stat", "rb") as fh:
                for line in fh.read(4096).split(b"\n"):
                    if line.startswith(b"usage_usec "):
                        return int(line.split()[1]) * 1000
        except (OSError, ValueError, IndexError):
            return None
        return None

    def exited(self) -> bool:
        """Whether the worker has exited (not reaping it: see pidhandle.py)."""
        return self.handle is None or self.handle.exited()

    def wait_exit(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the worker to exit by itself, not reaping it."""
        return self.handle is None or self.handle.wait_exit(timeout)

    def resume(self) -> None:
        if self.pid is None or self.exit_status is not None:
            return
        if not self.thawed:
            self._cg_freeze("0")
        self.thawed = False
        if self.handle is not None:
            self.handle.signal_group(signal.SIGCONT)
        self.stopped = False

    def read_into(self, buf, addr: int) -> bool:
        """Fill ``buf`` (a writable contiguous numpy array) with the stopped worker's memory at
        ``addr``. process_vm_readv copies straight from the worker's pages (a 1 MiB output in
        ~90 us here, against ~215 us through /proc/PID/mem, which copies page by page through
        a kernel buffer); /proc/PID/mem is the fallback where that call is refused. False when
        neither can read it all."""
        with self._mem:  # close() takes it too: a closed descriptor's number may be another file's
            if self.mem_fd is None:
                return False
            nbytes = int(buf.nbytes)
            # By pid only while the worker has not exited (it is reaped only after that, so its
            # pid is no one else's); the descriptor is bound to the worker's own memory whatever
            # happens to the pid.
            if _VM_READ is not None and self.handle is not None and not self.handle.exited():
                local = _IOVec(buf.ctypes.data, nbytes)
                remote = _IOVec(addr, nbytes)
                if _VM_READ(self.pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0) == nbytes:
                    return True
            try:
                return os.preadv(self.mem_fd, [buf], addr) == nbytes
            except (OSError, OverflowError):
                return False

    def read_memory(self, addr: int, nbytes: int) -> bytes | None:
        """Bytes of the stopped worker's memory, or None where the harness cannot read it."""
        with self._mem:
            if self.mem_fd is None:
                return None
            try:
                data = os.pread(self.mem_fd, nbytes, addr)
            except OSError:
                return None
        return data if len(data) == nbytes else None

    # ------------------------------------------------------------ the end

    def kill_all(self) -> None:
        """Kill every process of the worker: the cgroup as a whole, and the process group."""
        if self.cgroup is not None:
            try:
                (self.cgroup / "cgroup.kill").write_text("1")
            except OSError:
                pass
        if self.handle is not None:
            self.handle.signal_group(signal.SIGKILL)
            if self.stopped:
                self.handle.signal_group(signal.SIGCONT)
        for pid in self._by_uid():
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def _by_uid(self) -> list[int]:
        """Live processes running as the worker's own uid (none when it has no uid of its own)."""
        return self._walk(None)

    def _walk(self, group: int | None) -> list[int]:
        """Live processes in process group ``group`` or running as the worker's own uid: one walk of
        /proc (~5 ms with 80 processes). A process whose first thread exited while others run
        reads Z and is live (a helper did so to stay unpinned: review 2026-12-05); the uid comes
        from its status, since /proc's owner is root for a process made non-dumpable."""
        if group is None and self.uid is None:
            return []
        pids = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                mine = group is not None and int(fields[2]) == group
                if not mine and self.uid is not None:
                    status = Path(f"/proc/{entry}/status").read_text()
                    uids = next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1:]
                    mine = str(self.uid) in uids
                if mine and (fields[0] != "Z" or len(os.listdir(f"/proc/{entry}/task")) > 1):
                    pids.append(int(entry))
            except (OSError, IndexError, ValueError, StopIteration):
                continue
        return pids

    def members(self) -> list[int]:
        """Processes still in the worker's cgroup, process group or uid."""
        pids: set[int] = set()
        if self.cgroup is not None:
            try:
                pids |= {int(x) for x in (self.cgroup / "cgroup.procs").read_text().split()}
            except OSError:
                pass
        alive = self.pid is not None and self.handle is not None and self.handle.group_alive()
        pids |= set(self._walk(self.pid if alive else None))
        return sorted(pids)

    def close(self) -> None:
        self.kill_all()
        with self._mem:
            if self.mem_fd is not None:
                try:
                    os.close(self.mem_fd)
                except OSError:
                    pass
                self.mem_fd = None
        deadline = time.monotonic() + 3.0
        while self.members() and time.monotonic() < deadline:
            self.kill_all()
            time.sleep(0.01)
        self._remove_cgroup()
        self.limits.close()
        if self.handle is not None:
            self.handle.close()  # from here on this jail signals nobody (a late stop from another thread)

    def _remove_cgroup(self) -> None:
        self._close_cgroup_files()
        if self.cgroup is None:
            return
        for _ in range(50):
            try:
                self.cgroup.rmdir()
                break
            except OSError:
                time.sleep(0.01)
        self.cgroup = None


STOP_NOT_HELD = ("the harness cannot hold a stopped candidate on this machine (no cgroup freezer and no seccomp "
                 "filter against a self-delivered SIGCONT), so its timings may include work done while the "
                 "harness's clock was stopped: the score is kept but does not rank until a person reviews it")


def stop_not_held(sandbox: str) -> str | None:
    """Why the harness's stop does not hold for a worker with this sandbox description, or None.
    It holds with a cgroup (the freezer cannot be undone from inside) or with the seccomp filter
    (no SIGCONT can reach the stopped process from itself, now or later)."""
    layers = set(sandbox.split("+"))
    return None if "cgroup" in layers or "seccomp" in layers else STOP_NOT_HELD


def protections() -> dict[str, str]:
    """What confinement this machine gives candidate workers (for doctor and results): each
    layer with 'yes' or why not."""
    from evoteam.servers.bench.confinement import sandbox, seccomp

    out = {}
    abi = sandbox.landlock_abi()
    out["landlock"] = f"yes (ABI {abi})" if abi >= 1 else "no: the kernel has no Landlock; file access is " \
        "checked by the audit hook only, which native code bypasses"
    try:
        seccomp.build_filter()
        out["seccomp"] = "yes"
    except OSError as exc:
        out["seccomp"] = f"no: {exc}; a candidate could leave its process group"
    out["cgroup"] = "yes" if cgroup_root() else ("no: no writable cgroup v2 hierarchy; workers are stopped "
                                                 "and killed by process group")
    held = out["cgroup"] == "yes" or out["seccomp"] == "yes"
    out["stop_holds"] = "yes" if held else "no: " + STOP_NOT_HELD
    out["own_uid"] = "yes" if can_drop_privileges() else ("no: the harness is not root, so candidates run as "
                                                          "its user (Landlock and seccomp still confine them)")
    out["private_tmp"] = "yes" if can_drop_privileges() else "no: needs root; /tmp and /dev/shm are closed by " \
        "Landlock instead" if abi >= 1 else "no"
    return out
