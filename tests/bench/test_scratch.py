"""What a harness killed by a signal left in the temporary directory is removed by the next one,
and nothing a live harness holds is (confinement/scratch.py); a uid that owns such a folder is not
given to a new worker (jail.pick_uid)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from evoteam.servers.bench.confinement import jail, scratch

ROOT = Path(__file__).resolve().parents[2]
HOLDER = ("import sys, time\nfrom evoteam.servers.bench.confinement import scratch\n"
          "for kind in sys.argv[1:]:\n    print(scratch.new_folder(kind), flush=True)\ntime.sleep(120)\n")


def _holder(tmp: Path, *kinds: str) -> tuple[subprocess.Popen, list[Path]]:
    """A process that makes folders of ``kinds`` in ``tmp`` and lives on holding them."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, *kinds], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "TMPDIR": str(tmp)}, cwd=ROOT)
    return proc, [Path(proc.stdout.readline().strip()) for _ in kinds]


def test_a_killed_harness_folders_go_and_a_live_ones_stay(tmp_path: Path):
    dead, (d1, d2) = _holder(tmp_path, "cand", "trusted")
    live, (l1,) = _holder(tmp_path, "baseline")
    try:
        (d1 / "candidate.py").write_text("secret = 1\n")
        dead.send_signal(signal.SIGKILL)
        dead.wait()
        (tmp_path / "evoteam-notours-x").mkdir()  # not a scratch kind: never touched
        target = tmp_path / "elsewhere"
        target.mkdir()
        (target / "keep").write_text("x")
        (tmp_path / "evoteam-cand-link").symlink_to(target)  # a link is never followed
        assert sorted(scratch.sweep_abandoned(tmp_path, grace_s=0)) == sorted([d1.name, d2.name])
        assert not d1.exists() and not d2.exists()
        assert l1.is_dir() and (tmp_path / "evoteam-notours-x").is_dir() and (target / "keep").exists()
    finally:
        live.kill()
        live.wait()
    # Its holder gone, the live one's folder goes too, but only once it is older than the grace.
    assert scratch.sweep_abandoned(tmp_path) == [] and l1.is_dir()
    old = time.time() - scratch.GRACE_S - 5
    os.utime(l1, (old, old))
    assert scratch.sweep_abandoned(tmp_path) == [l1.name] and not l1.exists()


def test_a_folder_is_held_until_it_is_removed(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    mine = scratch.new_folder("cand")
    assert scratch.sweep_abandoned(tmp_path, grace_s=0) == [] and mine.is_dir()
    scratch.remove_folder(mine)
    assert not mine.exists() and str(mine) not in scratch._held


@pytest.mark.skipif(os.geteuid() != 0, reason="workers get uids of their own only when the harness is root")
def test_a_uid_owning_a_scratch_folder_is_not_given_to_a_worker(tmp_path: Path, monkeypatch):
    offset = 654_600  # apart from test_uid_pick's: picks are remembered per process
    owned = jail.UID_BASE + offset
    left = tmp_path / "evoteam-cand-left"
    left.mkdir()
    (left / "candidate.py").write_text("x = 1\n")
    os.chown(left / "candidate.py", owned, owned)  # a folder root owns, with a worker's file in it
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert scratch.owner_uids(jail.UID_BASE, jail.UID_BASE + jail.UID_SPAN) == {owned}
    jail._picked.pop(owned, None)
    jail._picked.pop(owned + 7, None)
    drawn = []
    it = iter([offset, offset + 7])
    monkeypatch.setattr(jail, "_draw", lambda: drawn.append(jail.UID_BASE + next(it)) or drawn[-1])
    monkeypatch.setattr(jail, "UID_SCAN_S", -1.0)
    assert jail.pick_uid() == owned + 7 and drawn == [owned, owned + 7]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the harness runs on Linux")
def test_the_next_evaluation_clears_what_a_killed_one_left(tmp_path: Path):
    """A process killed mid-life (as a stopped server is) leaves its trusted worker's and its
    scratch folders; the next process to evaluate removes them and leaves its own nothing."""
    script = ("import asyncio, sys\n"
              "from evoteam.config import load_settings\n"
              "from evoteam.servers.bench.confinement import scratch\n"
              "from evoteam.servers.bench.evaluation.core import evaluate_candidate\n"
              "from evoteam.servers.bench.formats.kits import discover\n"
              "scratch.GRACE_S = 0.0\n"
              "s = load_settings(); s.db = __import__('pathlib').Path(sys.argv[1])\n"
              "kit = discover(s)['rmsnorm_cpu']\n"
              "e = asyncio.run(evaluate_candidate(s, kit, candidate_path=str(kit.starting_point())))\n"
              "print('DONE', e.status, flush=True)\n"
              "if sys.argv[2] == 'hang':\n    import time; time.sleep(120)\n")
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    first = subprocess.Popen([sys.executable, "-c", script, str(tmp_path / "kb.db"), "hang"], env=env, cwd=ROOT,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert first.stdout.readline().strip() == "DONE PASSED"
        left = {p.name for p in tmp_path.glob("evoteam-trusted-*")}
        assert left  # kept for the kit's next evaluation in that process
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    assert {p.name for p in tmp_path.glob("evoteam-trusted-*")} == left  # nothing cleared it
    out = subprocess.run([sys.executable, "-c", script, str(tmp_path / "kb.db"), "exit"], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert "DONE PASSED" in out.stdout, out.stderr[-2000:]
    assert not [p for kind in scratch.KINDS for p in tmp_path.glob(f"evoteam-{kind}-*")], sorted(os.listdir(tmp_path))
