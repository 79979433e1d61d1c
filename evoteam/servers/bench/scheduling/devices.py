"""This host's devices as pool slots: GPUs by index, CPU cores in fixed groups.

`--devices 0,1,3` / `EVOTEAM_DEVICES` / `bench_devices` in evoteam.toml name them; by default a
GPU kit gets every visible GPU and a CPU kit gets the cores this process may use, split into
groups of `cores_per_eval` (one slot per group, pinned, so two evaluations never share a core
while there are cores enough).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from evoteam.config import Settings
from evoteam.errors import DomainError


@dataclass(frozen=True)
class Slot:
    name: str  # "cuda:2" or "cpu:1": also its lock's name (harness.device_lock)
    cores: tuple[int, ...] = field(default=())


def visible_gpus() -> list[int]:
    """Indices of the GPUs this process may use (CUDA_VISIBLE_DEVICES, else nvidia-smi)."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [i for i, part in enumerate(p for p in env.split(",") if p.strip())]
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [i for i, line in enumerate(out.splitlines()) if line.startswith("GPU ")]


def physical_gpu(index: int) -> str:
    """What CUDA_VISIBLE_DEVICES and nvidia-smi call this process's GPU ``index`` (the entry of
    its own CUDA_VISIBLE_DEVICES, when that narrows what it sees)."""
    env = [p.strip() for p in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if p.strip()]
    return env[index] if index < len(env) else str(index)


def _index(name: str) -> int:
    try:
        return int(name.split(":", 1)[1] if ":" in name else name)
    except ValueError:
        raise DomainError(f"bad device {name!r}: name devices by index (0,1) or as cuda:0, cpu:1") from None


def local_slots(settings: Settings, kind: str) -> list[Slot]:
    """The slots for kits of device ``kind`` ("cuda" or "cpu")."""
    named = [d for d in settings.bench_devices if d.startswith(kind) or d.isdigit()]
    if kind.startswith("cuda"):
        indices = [_index(d) for d in named] or visible_gpus()
        if not indices:
            raise DomainError("no GPU is visible to the pool; name devices with --devices or EVOTEAM_DEVICES")
        return [Slot(f"cuda:{i}") for i in indices]
    cores = sorted(os.sched_getaffinity(0))
    k = settings.cores_per_eval
    indices = [_index(d) for d in named] or list(range(max(1, len(cores) // k)))
    # More slots than core groups (asked for by name): groups wrap around and share cores.
    return [Slot(f"cpu:{i}", tuple(cores[(i * k + j) % len(cores)] for j in range(min(k, len(cores)))))
            for i in indices]


@contextlib.contextmanager
def claim_slot(lock_dir: Path, names: list[str]) -> Iterator[str]:
    """Claim the first of ``names`` that no other process has claimed, for the block (the first
    name if all are taken, waiting for it). Claims are lock files of their own, so processes that
    each run a pool (one bench server per role) spread over the devices instead of all queueing
    for the first; the device's own lock is then taken by the harness in the slot runner, which
    also keeps out evaluations that come through no pool."""
    lock_dir.mkdir(parents=True, exist_ok=True)
    for blocking in (False, True):
        for name in names:
            fd = os.open(lock_dir / ("claim-" + name.replace(":", "") + ".lock"), os.O_CREAT | os.O_RDWR, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
            except BlockingIOError:
                os.close(fd)
                continue
            try:
                yield name
            finally:
                os.close(fd)  # closing drops the claim
            return
