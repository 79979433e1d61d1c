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

from evoteam.servers.bench.confinement import seccomp

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


def _libc():
    return ctypes.CDLL(None, use_errno=True)


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


def default_read_roots(scratch: str) -> list[str]:
    """Where a sandboxed worker may read: the Python installation, system folders, the evoteam
    package itself (not the repository around it: the kits live there) and its scratch folder."""
    import evoteam

    # /proc only for this process itself (and a few system-wide files): /proc/<other pid> holds
    # other processes' environments and command lines.
    roots = {"/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc", "/sys", "/dev", "/opt",
             f"/proc/{os.getpid()}", "/proc/cpuinfo", "/proc/meminfo", "/proc/stat", "/proc/sys",
             "/proc/filesystems", "/run/nvidia-persistenced", scratch,
             sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable)),
             str(Path(evoteam.__file__).resolve().parent)}
    for entry in sys.path:
        if entry and os.path.isdir(entry) and ("site-packages" in entry or "dist-packages" in entry
                                               or entry.startswith(sys.base_prefix)):
            roots.add(entry)
    out = []
    for root in sorted(roots):
        if root and os.path.exists(root):
            out.append(os.path.realpath(root))
    return out


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
    if layers[-1].startswith("NO-LANDLOCK"):
        # Nothing limits reads now: the read override drop_identity kept must not stay for nothing.
        released = release_read_override(default_read_roots(scratch) + list(extra_read or []))
        if released:
            layers.append(released)
    try:
        layers.append(seccomp.apply(allow_setsid=allow_setsid))
    except OSError as exc:
        layers.append(f"NO-SECCOMP({exc})")
    install_audit_hook(deny_roots, write_roots)
    layers.append("audit-hook")
    return "+".join(layers)


# ---------------------------------------------------------------- namespaces and identity

_CLONE_NEWNS = 0x00020000
_MS_NOSUID, _MS_NODEV, _MS_BIND, _MS_REC, _MS_PRIVATE = 0x2, 0x4, 0x1000, 0x4000, 0x40000
_PR_SET_SECUREBITS, _SECBIT_KEEP_CAPS = 28, 0x10
_PR_CAPBSET_DROP = 24
_CAP_DAC_READ_SEARCH = 2
_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_RAISE, _PR_CAP_AMBIENT_CLEAR_ALL = 47, 2, 4


def _check(rc: int, what: str) -> None:
    if rc != 0:
        raise OSError(ctypes.get_errno(), f"{what} failed: {os.strerror(ctypes.get_errno())}")


def _under_tmp(paths: list[str]) -> list[str]:
    """The paths below /tmp that must stay visible, outermost only (a path inside another is
    carried along with it)."""
    inside = sorted({os.path.realpath(p) for p in paths if os.path.realpath(p).startswith("/tmp/")})
    out: list[str] = []
    for path in inside:
        if not any(path == kept or path.startswith(kept + "/") for kept in out):
            out.append(path)
    return out


def private_mounts(scratch: str, keep_visible: list[str] | None = None) -> str:
    """A mount namespace of this worker's own: fresh tmpfs on /tmp and /dev/shm (gone with the
    worker), /proc showing only processes of this worker's user. Needs CAP_SYS_ADMIN.

    What the worker must still read below /tmp — its scratch folder, and the Python installation
    or evoteam checkout when they live there (a CI clone or a venv in /tmp) — is bound back into
    the fresh /tmp from the host's, reached through a descriptor opened before the swap. Landlock
    still decides what may be read."""
    libc = _libc()
    scratch = os.path.realpath(scratch)
    if scratch.startswith("/dev/shm/"):
        raise OSError(22, "the scratch folder is in /dev/shm")
    keep = _under_tmp([scratch, *default_read_roots(scratch), *(keep_visible or [])])
    _check(libc.unshare(_CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    # Private first: without it the new mounts would propagate back to the host.
    _check(libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None), "making / private")
    mounted: list[bytes] = []
    host_tmp = os.open("/tmp", os.O_PATH | os.O_DIRECTORY)
    try:
        _check(libc.mount(b"tmpfs", b"/tmp", b"tmpfs", _MS_NOSUID | _MS_NODEV, b"size=256m,mode=1777"),
               "mounting a tmpfs on /tmp")
        mounted.append(b"/tmp")
        for path in keep:
            source = f"/proc/self/fd/{host_tmp}/{path[len('/tmp/'):]}"
            if os.path.isdir(source):
                os.makedirs(path, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                open(path, "a").close()  # noqa: SIM115 - a mount point for one file
            _check(libc.mount(source.encode(), path.encode(), None, _MS_BIND | _MS_REC, None),
                   f"keeping {path} visible")
        _check(libc.mount(b"tmpfs", b"/dev/shm", b"tmpfs", _MS_NOSUID | _MS_NODEV, b"size=256m,mode=1777"),
               "mounting a tmpfs on /dev/shm")
        mounted.append(b"/dev/shm")
        _check(libc.mount(b"proc", b"/proc", b"proc", _MS_NOSUID | _MS_NODEV, b"hidepid=2"),
               "mounting /proc with hidepid=2")
    except OSError:
        for target in reversed(mounted):
            libc.umount2(target, 2)  # MNT_DETACH: back to the host's view
        raise
    finally:
        os.close(host_tmp)
    return "private-tmp"


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _capset(keep: int) -> None:
    """This process's capabilities (effective, permitted, inheritable) set to ``keep`` (bits of the first 32)."""
    data = (_CapData * 2)(_CapData(keep, keep, keep), _CapData(0, 0, 0))
    _check(_libc().capset(ctypes.byref(_CapHeader(0x20080522, 0)), data), "capset")


def drop_identity(uid: int) -> str:
    """Run as ``uid`` from now on with no capability but reading files (which Landlock limits to
    its allow-list): the Python installation may sit in a folder only root can read."""
    libc = _libc()
    for cap in range(64):
        if cap != _CAP_DAC_READ_SEARCH:
            libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)
    _check(libc.prctl(_PR_SET_SECUREBITS, _SECBIT_KEEP_CAPS, 0, 0, 0), "prctl(SECBIT_KEEP_CAPS)")
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    _capset(1 << _CAP_DAC_READ_SEARCH)
    # Ambient, so the programs it starts keep it too: a C++ solution's compiler reads the Python
    # headers, which sit wherever Python does. Landlock still decides what any of them reads.
    _check(libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_RAISE, _CAP_DAC_READ_SEARCH, 0, 0), "prctl(CAP_AMBIENT)")
    return f"uid{uid}"


def _holds_read_override() -> bool:
    try:
        with open("/proc/self/status") as fh:
            eff = next(line for line in fh if line.startswith("CapEff:"))
    except (OSError, StopIteration):
        return False
    return bool(int(eff.split()[1], 16) >> _CAP_DAC_READ_SEARCH & 1)


def release_read_override(read_roots: list[str]) -> str | None:
    """Where Landlock is not in force, CAP_DAC_READ_SEARCH (kept by drop_identity so that a
    Python installed where only root may read still loads) would let this worker read any file
    on the machine: the held-out key, tokens, the knowledge store. Drop it when this uid reads
    every folder the worker needs without it (os.access checks the real uid, capabilities
    aside); otherwise say so in capitals, as a missing protection. None where it is not held."""
    if os.getuid() == 0 or not _holds_read_override():
        return None
    needs = next((root for root in read_roots if os.path.exists(root) and not os.access(
        root, os.R_OK | (os.X_OK if os.path.isdir(root) else 0))), None)
    if needs is not None:
        return (f"NO-READ-LIMIT(no Landlock, and {needs} is readable only with CAP_DAC_READ_SEARCH, which lets "
                "this worker read any file; install Python where other users can read it)")
    _check(_libc().prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "prctl(CAP_AMBIENT_CLEAR_ALL)")
    _capset(0)
    return "no-read-override"


def isolate(scratch: str, uid: int | None, private: bool, keep_visible: list[str] | None = None) -> tuple[str, bool]:
    """Namespaces and identity, applied first (they need root). Returns the layers in force and
    whether /tmp and /dev/shm are private (``keep_visible``: folders below /tmp that must stay
    readable there, such as a kit's folder). A layer that cannot be applied is named in capitals
    with the reason, so results say what protection is missing."""
    layers = []
    private_tmp = False
    if private:
        try:
            layers.append(private_mounts(scratch, keep_visible))
            private_tmp = True
        except OSError as exc:
            layers.append(f"NO-PRIVATE-TMP({exc})")
    if uid is not None:
        try:
            layers.append(drop_identity(uid))
        except OSError as exc:
            layers.append(f"NO-OWN-UID({exc})")
    return "+".join(layers), private_tmp
