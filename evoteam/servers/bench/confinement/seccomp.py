"""A small seccomp filter for candidate workers, built by hand (no library needed).

It refuses (EPERM) the system calls through which candidate code could reach outside its own
evaluation: leaving its session (``setsid``), changing anyone's
priority, policy or CPU affinity, tracing or reading other processes, sending SIGCONT (which
would wake a worker the harness has stopped) directly or through anything the kernel delivers
later on its behalf (a POSIX timer, a message-queue notification, an fd's I/O signal, the
parent-death signal, a child's exit signal), making namespaces or mounts, and kernel
facilities that bypass the filter (io_uring, BPF, userfaultfd). ``clone3`` answers ENOSYS so
that libc falls back to ``clone``, whose flags the filter can read; ``clone`` with any
namespace flag is refused. ``setpgid`` succeeds without doing anything: build tools (ninja, which
torch's ``cpp_extension`` runs for FIB C++ solutions) spawn every compiler with
``POSIX_SPAWN_SETPGROUP`` and fail outright on EPERM, while a no-op keeps the child in the worker's
process group, where the harness stops and kills it. Everything else is allowed: the point is the harness's integrity,
not a minimal system-call surface.

Applied after ``PR_SET_NO_NEW_PRIVS``; inherited by every thread and child; cannot be removed.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_SYS_SECCOMP = {"x86_64": 317, "amd64": 317, "aarch64": 277, "arm64": 277}
_SECCOMP_SET_MODE_FILTER, _FLAG_SPEC_ALLOW = 1, 4
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_EPERM, _ENOSYS = 1, 38
_SIGCONT = 18
_NS_FLAGS = 0x7E020080  # CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET|NEWTIME

# BPF opcodes
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06
_ALU_AND_K = 0x54

# seccomp_data offsets
_NR, _ARCH = 0, 4


def _arg(i: int) -> int:
    return 16 + 8 * i  # low 32 bits of argument i (little endian)


# name -> (x86_64, aarch64)
_DENY = {
    "setsid": (112, 157), "setpriority": (141, 140),
    "sched_setparam": (142, 118), "sched_setscheduler": (144, 119), "sched_setaffinity": (203, 122),
    "sched_setattr": (314, 274), "ptrace": (101, 117), "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271), "unshare": (272, 97), "setns": (308, 268), "mount": (165, 40),
    "umount2": (166, 39), "pivot_root": (155, 41), "chroot": (161, 51), "bpf": (321, 280),
    "perf_event_open": (298, 241), "userfaultfd": (323, 282), "keyctl": (250, 219), "add_key": (248, 217),
    "request_key": (249, 218), "ioprio_set": (251, 30), "kcmp": (312, 272), "pidfd_getfd": (438, 438),
    "io_uring_setup": (425, 425), "io_uring_enter": (426, 426), "io_uring_register": (427, 427),
    "open_by_handle_at": (304, 265), "name_to_handle_at": (303, 264), "move_mount": (429, 429),
    "fsopen": (430, 430), "fsmount": (432, 432), "fsconfig": (431, 431), "open_tree": (428, 428),
    "mount_setattr": (442, 442), "personality": (135, 92), "acct": (163, 89), "swapon": (167, 224),
    "reboot": (169, 142), "kexec_load": (246, 104), "init_module": (175, 105), "finit_module": (313, 273),
    "setgroups": (116, 159), "setuid": (105, 146), "setgid": (106, 144), "setreuid": (113, 145),
    "setregid": (114, 143), "setresuid": (117, 147), "setresgid": (119, 149), "capset": (126, 91),
    "migrate_pages": (256, 238), "move_pages": (279, 239),
}
# signal-sending calls and the argument that holds the signal
_SIGNAL_ARG = {"kill": ((62, 129), 1), "tkill": ((200, 130), 1), "tgkill": ((234, 131), 2),
               "rt_sigqueueinfo": ((129, 138), 1), "rt_tgsigqueueinfo": ((297, 240), 2),
               "pidfd_send_signal": ((424, 424), 1)}
# answered 0 without effect (see the module's docstring)
_SETPGID = (109, 154)
# prlimit64(pid, ...): only on itself (pid 0)
_PRLIMIT = (302, 261)
_CLONE, _CLONE3 = (56, 220), (435, 435)
_TIMER_CREATE, _MQ_NOTIFY, _FCNTL, _PRCTL = (222, 107), (244, 184), (72, 25), (157, 167)
_F_SETSIG, _PR_SET_PDEATHSIG = 10, 1
_ARCHES = {"x86_64": (0xC000003E, 0), "amd64": (0xC000003E, 0), "aarch64": (0xC00000B7, 1),
           "arm64": (0xC00000B7, 1)}


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k & 0xFFFFFFFF)


def _null_arg(nrs: tuple[int, int], col: int, argi: int) -> list[bytes]:
    """Refuse system call ``nrs`` unless its pointer argument ``argi`` is NULL (both halves)."""
    return [_insn(_JEQ_K, 0, 6, nrs[col]), _insn(_LD_W_ABS, 0, 0, _arg(argi)), _insn(_JEQ_K, 0, 2, 0),
            _insn(_LD_W_ABS, 0, 0, _arg(argi) + 4), _insn(_JEQ_K, 1, 0, 0), _insn(_RET_K, 0, 0, _RET_ERRNO | _EPERM),
            _insn(_LD_W_ABS, 0, 0, _NR)]


def _pair_arg(nrs: tuple[int, int], col: int, arg_a: int, value_a: int, arg_b: int, value_b: int) -> list[bytes]:
    """Refuse system call ``nrs`` when argument ``arg_a`` is ``value_a`` and ``arg_b`` is ``value_b``."""
    return [_insn(_JEQ_K, 0, 6, nrs[col]), _insn(_LD_W_ABS, 0, 0, _arg(arg_a)), _insn(_JEQ_K, 0, 3, value_a),
            _insn(_LD_W_ABS, 0, 0, _arg(arg_b)), _insn(_JEQ_K, 0, 1, value_b),
            _insn(_RET_K, 0, 0, _RET_ERRNO | _EPERM), _insn(_LD_W_ABS, 0, 0, _NR)]


def build_filter(machine: str | None = None, allow_setsid: bool = False) -> bytes:
    """The BPF program for this machine's architecture, or raise OSError when it is not known.
    ``allow_setsid``: for kit evaluators, which may start their program in a session of its own
    (the harness then reaches the whole tree through the cgroup or the worker's own uid)."""
    machine = (machine or platform.machine()).lower()
    if machine not in _ARCHES:
        raise OSError(f"no seccomp syscall table for {machine}")
    audit_arch, col = _ARCHES[machine]
    errno = lambda e: _insn(_RET_K, 0, 0, _RET_ERRNO | e)  # noqa: E731
    allow = _insn(_RET_K, 0, 0, _RET_ALLOW)
    prog: list[bytes] = [_insn(_LD_W_ABS, 0, 0, _ARCH), _insn(_JEQ_K, 1, 0, audit_arch), errno(_EPERM),
                         _insn(_LD_W_ABS, 0, 0, _NR)]
    if col == 0:  # x32 system calls on x86_64 bypass the numbers below: refuse them
        prog += [_insn(_JGE_K, 0, 1, 0x40000000), errno(_EPERM)]
    for name, nrs in _DENY.items():
        if name == "setsid" and allow_setsid:
            continue
        prog += [_insn(_JEQ_K, 0, 1, nrs[col]), errno(_EPERM)]
    prog += [_insn(_JEQ_K, 0, 1, _SETPGID[col]), errno(0)]
    prog += [_insn(_JEQ_K, 0, 1, _CLONE3[col]), errno(_ENOSYS)]
    # The argument checks reload the accumulator, so each ends by reloading the number.
    reload_nr = _insn(_LD_W_ABS, 0, 0, _NR)
    for nrs, argi in _SIGNAL_ARG.values():
        prog += [_insn(_JEQ_K, 0, 4, nrs[col]), _insn(_LD_W_ABS, 0, 0, _arg(argi)),
                 _insn(_JEQ_K, 0, 1, _SIGCONT), errno(_EPERM), reload_nr]
    # Signals the kernel delivers later on the process's behalf: a POSIX timer or a message-queue
    # notification (their signal sits in a struct the filter cannot read, so only the default,
    # NULL, is allowed), an fd's I/O signal, the parent-death signal.
    prog += _null_arg(_TIMER_CREATE, col, 1) + _null_arg(_MQ_NOTIFY, col, 1)
    prog += _pair_arg(_FCNTL, col, 1, _F_SETSIG, 2, _SIGCONT)
    prog += _pair_arg(_PRCTL, col, 0, _PR_SET_PDEATHSIG, 1, _SIGCONT)
    prog += [_insn(_JEQ_K, 0, 4, _PRLIMIT[col]), _insn(_LD_W_ABS, 0, 0, _arg(0)),
             _insn(_JEQ_K, 1, 0, 0), errno(_EPERM), reload_nr]
    # clone: no namespace flag, and no SIGCONT as the child's exit signal (CSIGNAL, the low byte).
    prog += [_insn(_JEQ_K, 0, 6, _CLONE[col]), _insn(_LD_W_ABS, 0, 0, _arg(0)),
             _insn(_JSET_K, 0, 1, _NS_FLAGS), errno(_EPERM), _insn(_ALU_AND_K, 0, 0, 0xFF),
             _insn(_JEQ_K, 0, 1, _SIGCONT), errno(_EPERM)]
    prog.append(allow)
    return b"".join(prog)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def apply(allow_setsid: bool = False, spec_allow: bool | None = None) -> str:
    """Install the filter on this process (and all its future threads and children). Returns a
    short description, or raises OSError. ``spec_allow`` (default: EVOTEAM_BENCH_SPEC_ALLOW=1)
    keeps the kernel from forcing speculation mitigations on with the filter (see below)."""
    prog = build_filter(allow_setsid=allow_setsid)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(NO_NEW_PRIVS) failed")
    buf = ctypes.create_string_buffer(prog, len(prog))
    fprog = _SockFprog(len(prog) // 8, ctypes.cast(buf, ctypes.c_void_p))
    # Kernels before 5.16 by default (spec_store_bypass_disable and spectre_v2_user "seccomp") force
    # speculation mitigations on a process that installs a filter: SSBD, and IBPB/STIBP, which keep a
    # candidate from poisoning the branch predictors that the harness, the reference and other
    # users' candidates use on its core. Kept by default: a machine's owner who wants confined code
    # timed as it runs outside (the minimal harness, production) opts out (docs/bench.md).
    if spec_allow is None:
        spec_allow = os.environ.get("EVOTEAM_BENCH_SPEC_ALLOW") == "1"
    nr = _SYS_SECCOMP.get(platform.machine().lower())
    if spec_allow and nr is not None and libc.syscall(ctypes.c_long(nr), ctypes.c_long(_SECCOMP_SET_MODE_FILTER),
                                                      ctypes.c_long(_FLAG_SPEC_ALLOW), ctypes.byref(fprog)) == 0:
        return "seccomp+spec-allow"
    # The plain call: also where seccomp() lacks the flag (before 4.17) or a container refuses it.
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")
    return "seccomp"
