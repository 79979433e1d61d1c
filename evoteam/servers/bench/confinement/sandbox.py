"""Confining a worker process that runs candidate code.

Two layers, both applied inside the worker before the candidate is imported:

1. **Landlock** (Linux >= 5.13, where enabled): an OS-level allow-list. The process may read only
   the Python installation, system directories and its scratch folder, may write only to its
   scratch folder (and ``/dev``), may not open TCP connections and may not signal processes
   outside its sandbox. It holds for native code too (ctypes, compiled extensions) and for any
   process the candidate starts.
2. **An audit hook** (``sys.addaudithook``, which cannot be removed from Python code): refuses
   reads of the deny roots (kit folders, the evoteam state directory with the held-out secret),
   writes outside the scratch folder, starting programs other than compilers, and network
   connections, and records each refusal so the harness can report it even when the candidate
   swallows the ``PermissionError``.

Resource limits (address space on CPU kits, file size, no core dumps) and a parent-death signal
are set as well. A program kit's candidate runs under the same confinement through
``measurement/program.py`` (``run_program``), which the kits' evaluators call.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import sys
from pathlib import Path
from typing import Any

from evoteam.servers.bench.confinement import identity, seccomp
from evoteam.servers.bench.confinement.host import check as _check
from evoteam.servers.bench.confinement.host import default_read_roots
from evoteam.servers.bench.confinement.host import libc as _libc

# Programs a candidate may start (GPU toolchains compile through subprocesses).
ALLOWED_EXECUTABLES = {
    "nvcc", "ptxas", "cicc", "fatbinary", "nvlink", "cudafe++", "cuobjdump", "nvdisasm",
    "ninja", "gcc", "g++", "cc", "c++", "clang", "clang++", "ld", "as", "collect2", "cc1", "cc1plus",
    "ldconfig", "ldconfig.real", "uname", "which",
}

violations: list[str] = []
_state: dict[str, Any] = {}

# ---------------------------------------------------------------- landlock

_SYS_CREATE, _SYS_ADD, _SYS_RESTRICT = 444, 445, 446  # same numbers on x86_64 and aarch64
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_PDEATHSIG = 1

FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_REMOVE_DIR = 1 << 4
FS_REMOVE_FILE = 1 << 5
FS_MAKE_CHAR = 1 << 6
FS_MAKE_DIR = 1 << 7
FS_MAKE_REG = 1 << 8
FS_MAKE_SOCK = 1 << 9
FS_MAKE_FIFO = 1 << 10
FS_MAKE_BLOCK = 1 << 11
FS_MAKE_SYM = 1 << 12
FS_REFER = 1 << 13
FS_TRUNCATE = 1 << 14

_FILE_RIGHTS = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def landlock_abi() -> int:
    """The Landlock ABI version of this kernel, or 0 where Landlock is unavailable."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        libc = _libc()
        libc.syscall.restype = ctypes.c_long
        version = libc.syscall(_SYS_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
        return max(0, int(version))
    except Exception:
        return 0


def apply_landlock(read_roots: list[str], write_roots: list[str]) -> str:
    """Restrict this process (and its future children) to the given roots. Returns a short
    description of what was applied, or raises OSError."""
    abi = landlock_abi()
    if abi < 1:
        raise OSError("landlock is not available on this kernel")
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    handled = (FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_READ_DIR | FS_REMOVE_DIR | FS_REMOVE_FILE
               | FS_MAKE_CHAR | FS_MAKE_DIR | FS_MAKE_REG | FS_MAKE_SOCK | FS_MAKE_FIFO | FS_MAKE_BLOCK
               | FS_MAKE_SYM)
    if abi >= 2:
        handled |= FS_REFER
    if abi >= 3:
        handled |= FS_TRUNCATE
    attr = _RulesetAttr(handled, 0, 0)
    size = 8
    if abi >= 4:
        attr.handled_access_net = 0b11  # bind + connect TCP: no rules, so both are refused
        size = 16
    if abi >= 6:
        attr.scoped = 0b11  # abstract unix sockets + signals stay inside the sandbox
        size = 24
    fd = libc.syscall(_SYS_CREATE, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if fd < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
    read_rights = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR
    write_rights = handled

    def add(path: str, rights: int) -> None:
        try:
            pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return
        try:
            if not os.path.isdir(path):
                rights &= _FILE_RIGHTS
            rule = _PathBeneathAttr(rights & handled, pfd)
            if libc.syscall(_SYS_ADD, ctypes.c_int(fd), ctypes.c_int(1), ctypes.byref(rule), ctypes.c_uint32(0)) < 0:
                raise OSError(ctypes.get_errno(), f"landlock_add_rule failed for {path}")
        finally:
            os.close(pfd)

    try:
        for root in read_roots:
            add(root, read_rights)
        for root in write_roots:
            add(root, write_rights)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(NO_NEW_PRIVS) failed")
        if libc.syscall(_SYS_RESTRICT, ctypes.c_int(fd), ctypes.c_uint32(0)) < 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    finally:
        os.close(fd)
    return f"landlock-abi{abi}"


# ---------------------------------------------------------------- audit hook


def _real(path: Any) -> str | None:
    if isinstance(path, int):
        return None
    try:
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        return os.path.realpath(os.fspath(path))
    except Exception:
        return None


def _under(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _refuse(what: str) -> None:
    message = f"evoteam sandbox: {what} is not allowed inside the bench's sandbox"
    violations.append(message)
    raise PermissionError(message)


def _write_mode(mode: Any, flags: Any) -> bool:
    if isinstance(mode, str) and any(c in mode for c in "wax+"):
        return True
    if isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND):
        return True
    return False


_PATH_EVENTS_WRITE = {"os.remove", "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.truncate",
                      "os.utime", "shutil.rmtree", "os.chflags", "os.lchflags", "os.setxattr",
                      "os.removexattr"}


def _other_process(path: str) -> bool:
    """A path in /proc/<pid> of a process other than this one."""
    if not path.startswith("/proc/"):
        return False
    head = path[6:].split("/", 1)[0]
    return head.isdigit() and int(head) != os.getpid()


def _hook(event: str, args: tuple) -> None:
    if event == "open":
        path = _real(args[0])
        if path is None:
            return
        if _under(path, _state["deny"]) or _other_process(path):
            _refuse(f"opening {path}")
        if _write_mode(args[1] if len(args) > 1 else None, args[2] if len(args) > 2 else None) \
                and not _under(path, _state["write"]):
            _refuse(f"writing {path}")
    elif event in _PATH_EVENTS_WRITE:
        path = _real(args[0]) if args else None
        if path is not None and not _under(path, _state["write"]):
            _refuse(f"{event.split('.')[-1]} on {path}")
    elif event in ("os.rename", "os.link", "os.symlink"):
        for p in args[:2]:
            path = _real(p)
            if path is not None and not _under(path, _state["write"]):
                _refuse(f"{event.split('.')[-1]} involving {path}")
    elif event in ("os.listdir", "os.scandir", "glob.glob"):
        path = _real(args[0]) if args and args[0] is not None else None
        if path is not None and _under(path, _state["deny"]):
            _refuse(f"listing {path}")
    elif event == "subprocess.Popen":
        exe = args[0]
        if exe is None and args[1]:
            argv = args[1]
            exe = argv if isinstance(argv, (str, bytes)) else argv[0]
        name = os.path.basename(os.fsdecode(exe)) if isinstance(exe, (str, bytes, os.PathLike)) else str(exe)
        if name not in _state.get("exec", ALLOWED_EXECUTABLES):
            _refuse(f"starting the program {name!r}")
    elif event in ("os.system", "os.exec", "os.posix_spawn", "os.spawn", "pty.spawn"):
        _refuse(f"{event}")
    elif event in ("os.kill", "os.killpg"):
        # A kit evaluator with a uid of its own may signal what it started (the kernel lets a
        # process of that uid reach nothing else); everything else signals only itself.
        if args and args[0] not in (os.getpid(), 0) and not _state.get("signal_own_uid"):
            _refuse(f"sending a signal to process {args[0]}")
    elif event in ("socket.connect", "socket.bind", "socket.sendto", "socket.getaddrinfo"):
        _refuse("network access")
    elif event == "sys.addaudithook":
        _refuse("installing another audit hook")


def install_audit_hook(deny_roots: list[str], write_roots: list[str]) -> None:
    _state["deny"] = [os.path.realpath(p) for p in deny_roots]
    _state["write"] = [os.path.realpath(p) for p in write_roots]
    sys.addaudithook(_hook)


# ---------------------------------------------------------------- whole set-up


def set_limits(memory_mb: int | None, file_mb: int = 1024) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_mb << 20, file_mb << 20))
    if memory_mb:
        cap = memory_mb << 20
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


def undumpable() -> str:
    """No process of another identity's and none without CAP_SYS_PTRACE — in particular not a
    program this process starts — may read this process's memory (/proc/PID/mem), even as the
    same user. (Dropping to a uid of its own does this too; without root it is the only guard.)"""
    _check(_libc().prctl(4, 0, 0, 0, 0), "prctl(PR_SET_DUMPABLE, 0)")  # PR_SET_DUMPABLE
    return "undumpable"


def die_with_parent() -> None:
    if sys.platform.startswith("linux"):
        try:
            _libc().prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except Exception:
            pass


def confine(scratch: str, deny_roots: list[str], memory_mb: int | None, extra_read: list[str] | None = None,
            use_landlock: bool = True, private_tmp: bool = False, executables: set[str] | None = None,
            allow_setsid: bool = False, own_uid: int | None = None) -> str:
    """Apply every layer to this process. Returns a description of the layers in force.
    ``executables``: programs it may start beyond the build tools (a kit evaluator may start
    Python to run the program in a process of its own). ``allow_setsid``: a kit evaluator may
    start that program in a session of its own (the harness reaches it by cgroup or uid)."""
    _state["exec"] = ALLOWED_EXECUTABLES | set(executables or ())
    # Only where this process already runs as a uid of its own (``isolate`` dropped to it).
    _state["signal_own_uid"] = bool(allow_setsid and own_uid is not None and os.getuid() == own_uid)
    layers = []
    set_limits(memory_mb)
    layers.append("rlimits" + (f"(as={memory_mb}MiB)" if memory_mb else ""))
    # Writable: the scratch folder and device files; not /dev/shm or /tmp (files there would
    # outlive the evaluation), except where they are this worker's private tmpfs.
    write_roots = [scratch, "/dev/null", "/dev/zero", "/dev/full", "/dev/tty"] + sorted(
        str(p) for p in Path("/dev").glob("nvidia*"))
    if private_tmp:
        write_roots += ["/tmp", "/dev/shm"]
    if use_landlock and os.environ.get("EVOTEAM_BENCH_NO_LANDLOCK") != "1":
        try:
            layers.append(apply_landlock(default_read_roots(scratch) + list(extra_read or []), write_roots))
        except OSError as exc:
            layers.append(f"NO-LANDLOCK({exc})")
    else:
        layers.append("NO-LANDLOCK(disabled)")
    # The read override drop_identity kept must not outlive its need (identity.py).
    released = identity.release_read_override(default_read_roots(scratch) + list(extra_read or []),
                                              landlocked=not layers[-1].startswith("NO-LANDLOCK"))
    if released:
        layers.append(released)
    try:
        layers.append(seccomp.apply(allow_setsid=allow_setsid))
    except OSError as exc:
        layers.append(f"NO-SECCOMP({exc})")
    install_audit_hook(deny_roots, write_roots)
    layers.append("audit-hook")
    return "+".join(layers)
