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


def test_a_run_of_a_kit_found_here_takes_its_direction(tmp_path):
    """`kb start --kit` starts a run as the MCP tool does: with the kit's direction, refusing the
    other one before anything is made (before, it made a maximize run of any kit, or a minimize one
    of a speedup kit that the bench then refused to record into)."""
    wrong = evoteam(tmp_path, "kb", "start", "cut the time", "--kit", "rmsnorm_cpu", "--direction", "minimize")
    assert wrong.returncode != 0 and "Traceback" not in wrong.stderr
    assert "maximized" in wrong.stderr and "direction='maximize'" in wrong.stderr
    assert json.loads(evoteam(tmp_path, "kb", "runs", "--json").stdout)["items"] == []
    first = evoteam(tmp_path, "kb", "start", "make it fast", "--kit", "task_kits/rmsnorm_cpu")
    assert first.returncode == 0, first.stderr
    run = json.loads(evoteam(tmp_path, "kb", "runs", "--json").stdout)["items"][0]
    assert (run["id"], run["kit"], run["direction"]) == (first.stdout.strip(), "rmsnorm_cpu", "maximize")
    again = evoteam(tmp_path, "kb", "start", "make it fast", "--kit", "rmsnorm_cpu")
    assert again.returncode == 0 and again.stdout.strip() != run["id"]
    assert f"You already have an active run of this kit: {run['id']}" in again.stderr
