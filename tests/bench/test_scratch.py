"""What a harness killed by a signal left in the temporary directory is removed by the next one,
and nothing a live harness holds is, nor anything it did not make (confinement/scratch.py); every
folder an evaluation, a compare or a remeasure makes is let go when it ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from evoteam.servers.bench.confinement import scratch
from tests.bench.conftest import RMSNORM

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
        (tmp_path / "evoteam-notours-x-held").mkdir()  # not a scratch kind: never touched
        legacy = tmp_path / "evoteam-cand-k2j3h4x9"  # an evoteam's from before the holds: maybe in use
        legacy.mkdir()
        os.utime(legacy, (time.time() - 86_400, time.time() - 86_400))
        target = tmp_path / "elsewhere"
        target.mkdir()
        (target / "keep").write_text("x")
        (tmp_path / "evoteam-cand-link").symlink_to(target)  # a link is never followed
        assert sorted(scratch.sweep_abandoned(tmp_path, grace_s=0)) == sorted([d1.name, d2.name])
        assert not d1.exists() and not d2.exists()
        assert l1.is_dir() and (tmp_path / "evoteam-notours-x-held").is_dir() and (target / "keep").exists()
        assert legacy.is_dir()
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


def test_a_folder_that_cannot_be_held_is_not_made(tmp_path: Path, monkeypatch):
    """An unheld folder would look abandoned to the next sweep: refused, and nothing left."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    def refused(fd, op):
        raise OSError(37, "No locks available")

    monkeypatch.setattr(scratch.fcntl, "flock", refused)
    with pytest.raises(OSError, match="cannot hold the scratch folder"):
        scratch.new_folder("cand")
    assert list(tmp_path.iterdir()) == []


async def test_compare_and_remeasure_let_their_folders_go(fast_kit, fast_settings, store):
    """Each side of a compare or a remeasure has a folder of its own; a long-lived server that kept
    their holds would run out of descriptors."""
    from evoteam.report.remeasure import remeasure_run
    from evoteam.servers.bench.evaluation.compare import compare_candidates
    from evoteam.servers.bench.evaluation.core import evaluate_candidate

    def held() -> set[str]:  # a kit's trusted worker (and its folder) is kept for its next evaluation
        return {k for k in scratch._held if "-trusted-" not in k}

    before = held()
    cmp = await compare_candidates(fast_settings, str(fast_kit), {"code": RMSNORM},
                                   {"code": RMSNORM.replace("x * x", "x ** 2")}, repeats=1)
    assert cmp.a.status == "PASSED", cmp.a.message
    assert held() == before
    e = await evaluate_candidate(fast_settings, str(fast_kit), code=RMSNORM, store=store)
    assert held() == before
    mset = await remeasure_run(fast_settings, store, e.run_id, rounds=2)
    assert mset.entries and held() == before
    # A default batch of the run's one candidate says why there is no ranking to read (mp46).
    assert "only the run's best was re-measured" in mset.note, mset.note
