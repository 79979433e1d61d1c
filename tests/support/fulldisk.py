"""A real full disk for tests: a small tmpfs mounted in a private mount namespace, so the CLI
under test meets ENOSPC as it would on a full volume. Needs root and mount namespaces; tests
skip, with the reason, where the machine does not allow it."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest


def require_tmpfs() -> None:
    if os.geteuid() != 0:
        pytest.skip("a full-disk test mounts a small tmpfs, which needs root; run as root to include it")
    probe = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs in a mount namespace here: {probe.stderr.strip()[:200]}")


def run_on_full_disk(mountpoint: Path, size: str, script: str, env: dict[str, str],
                     timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``script`` (bash) with a ``size`` tmpfs mounted over ``mountpoint``; ``$EVOTEAM`` in the
    script is the evoteam command line."""
    require_tmpfs()
    mountpoint.mkdir(parents=True, exist_ok=True)
    evoteam = f"{shlex.quote(sys.executable)} -m evoteam.cli"
    inner = f"mount -t tmpfs -o size={size} tmpfs {shlex.quote(str(mountpoint))} && EVOTEAM='{evoteam}'; {script}"
    return subprocess.run(["unshare", "-m", "bash", "-c", inner], env=env, capture_output=True, text=True,
                          timeout=timeout)
