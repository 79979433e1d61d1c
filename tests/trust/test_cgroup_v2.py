"""Issue 23: the cgroup v2 path of the tree limits (bench/confinement/limits.py), on a real cgroup v2 group
made where the jail makes its own (bench/confinement/jail.py `cgroup_root`).

Where the v2 hierarchy offers the memory and pids controllers, a real process tree in the group
is held to `memory.max` and `pids.max` and `hit()` says which cap stopped it. Where it does not
(a hybrid layout binds them to v1, as on this project's build machine; or the parent group holds
processes, so the kernel refuses to hand controllers to its children), the tests say so when
they skip, and the group's caps must then come from v1, never be claimed for v2."""

from __future__ import annotations

import secrets
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from evoteam.servers.bench.confinement.jail import cgroup_root
from evoteam.servers.bench.confinement.limits import TreeLimits

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="cgroups are Linux-only")


@pytest.fixture
def v2_group():
    root = cgroup_root()
    if root is None:
        pytest.skip("no writable cgroup v2 hierarchy here (or EVOTEAM_BENCH_NO_CGROUP=1)")
    group = root / f"evoteam-test-{secrets.token_hex(4)}"
    group.mkdir()
    yield group
    for _ in range(100):
        try:
            group.rmdir()
            return
        except OSError:  # the last process of the group is still being reaped
            time.sleep(0.05)


def _v2_or_skip(limits: TreeLimits, group: Path) -> None:
    if limits.kind == "cgroup2":
        return
    root = group.parent
    offered = (root / "cgroup.controllers").read_text().split()
    enabled = (root / "cgroup.subtree_control").read_text().split()
    limits.close()
    pytest.skip(f"cgroup v2 at {root} offers controllers {offered or 'none'} (enabled for children: "
                f"{enabled or 'none'}): memory and pids cannot be given to a v2 group here")


def test_caps_are_claimed_for_v2_only_where_v2_holds_them(v2_group: Path):
    """Runs everywhere a v2 group can be made: either the caps are written into that group, or
    it is not called a v2 cap (kind is cgroup1 or none, and no v2 file was counted on)."""
    limits = TreeLimits(64, 16, v2_group)
    try:
        if limits.kind == "cgroup2":
            assert (v2_group / "memory.max").read_text().strip() == str(64 << 20)
            assert (v2_group / "pids.max").read_text().strip() == "16"
            assert limits.describe() == "tree-limits(cgroup2:memory.max=64MiB,pids.max=16)"
        else:
            assert all(path != v2_group for path in limits.dirs.values())
            assert "cgroup2" not in limits.describe()
    finally:
        limits.close()


def _run_in(group: Path, code: str) -> subprocess.CompletedProcess:
    """Run `code` in a fresh Python placed in `group` before it does anything."""
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.readline()\n" + textwrap.dedent(code)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    (group / "cgroup.procs").write_text(str(child.pid))
    out, err = child.communicate("go\n", timeout=120)
    return subprocess.CompletedProcess(child.args, child.returncode, out, err)


def test_a_tree_over_its_v2_memory_cap_is_killed_and_the_reason_named(v2_group: Path):
    limits = TreeLimits(64, 64, v2_group)
    _v2_or_skip(limits, v2_group)
    try:
        done = _run_in(v2_group, """
            import os
            kids = []
            for _ in range(4):  # four processes of 40 MiB each: each alone is under the cap
                pid = os.fork()
                if pid == 0:
                    block = bytearray(40 << 20)
                    for i in range(0, len(block), 4096):
                        block[i] = 1
                    import time; time.sleep(2)
                    os._exit(0)
                kids.append(pid)
            print([os.waitpid(pid, 0)[1] for pid in kids])
        """)
        assert limits.hit() is not None and "memory cap of 64 MiB" in limits.hit(), (done, limits.hit())
    finally:
        limits.close()


def test_a_tree_over_its_v2_pids_cap_cannot_fork_and_the_reason_named(v2_group: Path):
    limits = TreeLimits(None, 8, v2_group)
    _v2_or_skip(limits, v2_group)
    try:
        done = _run_in(v2_group, """
            import os, time
            refused = 0
            kids = []
            for _ in range(20):
                try:
                    pid = os.fork()
                except OSError:
                    refused += 1
                    continue
                if pid == 0:
                    time.sleep(1)
                    os._exit(0)
                kids.append(pid)
            for pid in kids:
                os.waitpid(pid, 0)
            print(refused)
        """)
        assert done.returncode == 0 and int(done.stdout) >= 12, (done.stdout, done.stderr)
        assert "more than 8 processes" in (limits.hit() or ""), limits.hit()
    finally:
        limits.close()
