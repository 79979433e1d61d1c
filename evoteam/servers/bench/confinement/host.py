"""The host as a worker's confinement sees it: libc calls, and the folders a confined worker must
read (sandbox.py's Landlock allow-list, identity.py's private mounts and read capability)."""

from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path


def libc():
    return ctypes.CDLL(None, use_errno=True)


def check(rc: int, what: str) -> None:
    if rc != 0:
        raise OSError(ctypes.get_errno(), f"{what} failed: {os.strerror(ctypes.get_errno())}")


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
