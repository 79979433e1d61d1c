"""`pip install evoteam` from a wheel, outside the checkout, is the whole product: the wheel
carries the task kits, skills, hooks and manifests (evoteam/_shipped), `python -m evoteam`
works, `evoteam doctor` passes (every server starts, a kit's baseline evaluates) and
`evoteam install-plugin` stages a plugin copy from the installed package."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def test_wheel_installs_outside_the_checkout_and_passes_doctor(tmp_path):
    dist = tmp_path / "dist"
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(dist), str(ROOT)], timeout=600)
    assert built.returncode == 0, built.stderr[-2000:]
    wheel = next(dist.glob("evoteam-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    for path in ("evoteam/_shipped/task_kits/rmsnorm_cpu/kit.json", "evoteam/_shipped/skills/evolve-team/SKILL.md",
                 "evoteam/_shipped/hooks/evoteam-launch", "evoteam/_shipped/.codex-plugin/plugin.json",
                 "evoteam/__main__.py", "evoteam/supervisor/prompts/__init__.py"):
        assert path in names, path
    assert not any(".venv" in n or "__pycache__" in n for n in names)
    metadata = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("METADATA"))).decode()
    assert "License-Expression: Apache-2.0" in metadata

    venv = tmp_path / "venv"
    assert _run([sys.executable, "-m", "venv", str(venv)], timeout=120).returncode == 0
    py = str(venv / "bin" / "python")
    installed = _run([py, "-m", "pip", "install", "--quiet", str(wheel)], timeout=900)
    assert installed.returncode == 0, installed.stderr[-2000:]

    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    env = {"HOME": str(home), "PATH": f"{venv / 'bin'}{os.pathsep}/usr/bin:/bin", "LANG": "C.UTF-8"}
    where = _run([py, "-c", "import evoteam.resources as r; print(r.shipped_root())"], cwd=work, env=env, timeout=60)
    assert where.stdout.strip().startswith(str(venv)), where.stdout + where.stderr  # not the checkout
    doctor = _run([py, "-m", "evoteam", "doctor"], cwd=work, env=env, timeout=600)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert "kit rmsnorm_cpu" in doctor.stdout and "all 8 checks passed" in doctor.stdout, doctor.stdout
    kits = _run([py, "-m", "evoteam", "bench", "list", "--json"], cwd=work, env=env, timeout=120)
    assert kits.returncode == 0 and "circle_packing_26" in kits.stdout, kits.stdout + kits.stderr

    staged = _run([str(venv / "bin" / "evoteam"), "install-plugin", "--no-claude", "--no-codex"], cwd=work, env=env,
                  timeout=120)
    assert staged.returncode == 0, staged.stdout + staged.stderr
    plugin = home / ".evoteam" / "plugin"
    assert (plugin / "skills" / "evolve-team" / "SKILL.md").is_file() and os.access(plugin / "hooks" / "evoteam-launch",
                                                                                     os.X_OK)
    assert not (plugin / "task_kits").exists() and not (plugin / ".venv").exists()
    assert (home / ".evoteam" / "python").read_text().strip() == py
