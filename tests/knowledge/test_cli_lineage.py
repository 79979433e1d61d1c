"""`evoteam kb finish`, `kb resume`, `kb prior` and `kb start --seed-from` as a user runs them
(subprocesses on a real store file), with the documented exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def evoteam(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "EVOTEAM_DB": str(tmp_path / "kb.db"), "HOME": str(tmp_path)}
    env.pop("EVOTEAM_KNOWLEDGE_URL", None)
    return subprocess.run([sys.executable, "-m", "evoteam.cli", *args], env=env, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("flag,status", [([], "finished"), (["--pause"], "paused"), (["--failed"], "failed")])
def test_finish_resume_and_seed_on_the_command_line(tmp_path, flag, status):
    first = evoteam(tmp_path, "kb", "start", "make it fast", "--kit", "rmsnorm_cpu").stdout.strip()
    done = evoteam(tmp_path, "kb", "finish", first, "--reason", "plateaued at 3.1x", *flag, "--json")
    assert done.returncode == 0, done.stderr
    assert (json.loads(done.stdout)["status"], json.loads(done.stdout)["status_reason"]) == (status, "plateaued at 3.1x")
    second = evoteam(tmp_path, "kb", "start", "again", "--kit", "rmsnorm_cpu", "--seed-from", first).stdout.strip()
    prior = json.loads(evoteam(tmp_path, "kb", "prior", "task_kits/rmsnorm_cpu", "--json").stdout)
    assert [r["id"] for r in prior["runs"]] == [second, first]
    assert prior["runs"][1]["status_reason"] == "plateaued at 3.1x"
    assert evoteam(tmp_path, "kb", "resume", first).returncode == 0
    runs = json.loads(evoteam(tmp_path, "kb", "runs", "--status", "active", "--json").stdout)["items"]
    assert {r["id"] for r in runs} == {first, second}


def test_finish_names_what_is_wrong(tmp_path):
    missing = evoteam(tmp_path, "kb", "finish", "run_nosuchrun", "--reason", "x")
    assert missing.returncode == 3 and "Traceback" not in missing.stderr
    assert evoteam(tmp_path, "kb", "finish", "run_nosuchrun").returncode == 2  # --reason is required
    seeded = evoteam(tmp_path, "kb", "start", "g", "--seed-from", "run_nosuchrun")
    assert seeded.returncode == 3 and "run_nosuchrun" in seeded.stderr
