"""Memory and process caps for a worker's whole process tree, and a clear reason when one is hit.

A per-process address-space limit (``RLIMIT_AS``, set in the worker) does not bound what the
worker's children use together: six forks of a candidate, or the program a kit's evaluator starts,
each get the full limit. A cgroup bounds the tree as a whole: ``memory.max`` (the kernel kills
inside the group when it is reached) and ``pids.max`` (``fork`` fails beyond it; threads count).

Where the machine offers it: the cgroup v2 group the jail made (when the memory and pids
controllers can be enabled for it), else the cgroup v1 ``memory`` and ``pids`` hierarchies (a
hybrid layout, as on many container hosts). Where neither is writable (not root), only the
per-process limits hold; ``describe`` says which, and doctor reports it.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from evoteam.servers.bench.confinement import leftovers

DEFAULT_PIDS = 512  # processes and threads of one worker's tree
_V1 = Path("/sys/fs/cgroup")


def _v1_dir(controller: str) -> Path | None:
    """This process's folder in the v1 hierarchy of ``controller``, where it is writable."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, names, rel = line.split(":", 2)
        if controller in names.split(","):
            base = _V1 / controller / rel.lstrip("/")
            return base if base.is_dir() and os.access(base, os.W_OK) else None
    return None


def _write(path: Path, value: str) -> bool:
    try:
        path.write_text(value)
        return True
    except OSError:
        return False


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _events(text: str) -> dict[str, int]:
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if value.strip().isdigit():
            out[key] = int(value)
    return out


class TreeLimits:
    """The caps of one worker's tree: made empty, given the worker's pid right after it starts
    (before it runs anything), read for a reason after it failed, removed at the end."""

    def __init__(self, memory_mb: int | None, pids: int | None = DEFAULT_PIDS, v2_group: Path | None = None):
        self.memory_mb = memory_mb
        self.pids = pids
        self.dirs: dict[str, Path] = {}  # "memory"/"pids" -> the group holding that cap
        self.kind = "none"
        self._fds: dict[Path, int | None] = {}  # event files kept open: hit() runs after every call
        if v2_group is not None and self._v2(v2_group):
            return
        self._v1()

    def _v2(self, group: Path) -> bool:
        parent = group.parent
        wanted = [c for c, limit in (("memory", self.memory_mb), ("pids", self.pids)) if limit]
        if not wanted:
            return True
        available = _read(parent / "cgroup.controllers").split()
        enabled = _read(parent / "cgroup.subtree_control").split()
        for c in wanted:
            if c not in available:
                return False
            if c not in enabled and not _write(parent / "cgroup.subtree_control", f"+{c}"):
                return False
        ok = not self.memory_mb or _write(group / "memory.max", str(self.memory_mb << 20))
        if ok and self.memory_mb:
            _write(group / "memory.swap.max", "0")  # no swapping past the cap, where swap is accounted
        ok = ok and (not self.pids or _write(group / "pids.max", str(self.pids)))
        if ok:
            self.dirs = {c: group for c in wanted}
            self.kind = "cgroup2"
        return ok

    def _v1(self) -> None:
        name = f"evoteam-{os.getpid()}-{secrets.token_hex(4)}"
        for controller, limit, file in (("memory", self.memory_mb, "memory.limit_in_bytes"),
                                        ("pids", self.pids, "pids.max")):
            base = _v1_dir(controller) if limit else None
            if base is None:
                continue
            leftovers.sweep_leftovers(base)
            path = base / name
            try:
                path.mkdir()
            except OSError:
                continue
            value = str(limit << 20) if controller == "memory" else str(limit)
            if _write(path / file, value):
                if controller == "memory":
                    _write(path / "memory.memsw.limit_in_bytes", value)  # no swap beyond it, where offered
                self.dirs[controller] = path
            else:
                self._rmdir(path)
        if self.dirs:
            self.kind = "cgroup1"

    def attach(self, pid: int) -> None:
        for controller, path in list(self.dirs.items()):
            if self.kind == "cgroup1" and not _write(path / "cgroup.procs", str(pid)):
                self._rmdir(path)
                del self.dirs[controller]

    def describe(self) -> str:
        caps = [f"memory.max={self.memory_mb}MiB" for _ in [0] if "memory" in self.dirs]
        caps += [f"pids.max={self.pids}" for _ in [0] if "pids" in self.dirs]
        return f"tree-limits({self.kind}:{','.join(caps)})" if caps else "tree-limits(none: per-process rlimits only)"

    def hit(self) -> str | None:
        """Why the tree was stopped by a cap, in words for the evaluation, or None."""
        mem = self.dirs.get("memory")
        if mem is not None:
            name = "memory.events" if self.kind == "cgroup2" else "memory.oom_control"
            killed = _events(self._read_events(mem / name)).get("oom_kill", 0)
            if killed:
                return (f"the process tree used more than its memory cap of {self.memory_mb} MiB (all its processes "
                        f"together) and was killed")
        pids = self.dirs.get("pids")
        if pids is not None and _events(self._read_events(pids / "pids.events")).get("max", 0):
            return f"the process tree tried to run more than {self.pids} processes and threads at once"
        return None

    def _read_events(self, path: Path) -> str:
        """An events file, read through a descriptor kept open (one pread, not an open/read/close
        of a path: this runs after every timed call, outside its clock, ~80 times an evaluation)."""
        if path not in self._fds:
            try:
                self._fds[path] = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                self._fds[path] = None
        fd = self._fds[path]
        if fd is None:
            return _read(path)
        try:
            return os.pread(fd, 4096, 0).decode("ascii", "replace")
        except OSError:
            return ""

    def close(self) -> None:
        for fd in self._fds.values():
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._fds = {}
        if self.kind == "cgroup1":
            for path in self.dirs.values():
                self._rmdir(path)
        self.dirs = {}

    @staticmethod
    def _rmdir(path: Path) -> None:
        for _ in range(50):
            try:
                path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                import time

                time.sleep(0.01)
