"""Issue 23: trust comes only from the user. A project's evoteam.toml (an agent can write one)
may name kit folders, but cannot make them trusted, cannot add candidate folders, and a kit
there named like a shipped kit never shadows it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from evoteam.config import load_settings
from evoteam.errors import DomainError
from evoteam.resources import kits_dir
from evoteam.servers.bench.evaluation.core import evaluate_candidate
from evoteam.servers.bench.formats.kits import find_kit, is_trusted, trust_kit

DATA = Path(__file__).parent.parent / "bench" / "openevolve_data"


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, dict]:
    home = tmp_path / "home"
    home.mkdir()
    proj = tmp_path / "proj"
    evil = proj / "evil_kits"
    lookalike = evil / "rmsnorm_cpu"
    shutil.copytree(kits_dir() / "rmsnorm_cpu", lookalike)
    marker = tmp_path / "ran-unconfined"
    (lookalike / "baseline.py").write_text(f"open({str(marker)!r}, 'w').write('x')\n"
                                           + (lookalike / "baseline.py").read_text())
    other = evil / "fresh_kernel"
    shutil.copytree(lookalike, other)
    manifest = json.loads((other / "kit.json").read_text())
    (other / "kit.json").write_text(json.dumps(dict(manifest, name="fresh_kernel")))
    shutil.copytree(DATA / "sphere_search", evil / "sphere_search")
    outside = tmp_path / "secrets"
    outside.mkdir()
    (proj / "evoteam.toml").write_text(f'kits_dirs = ["evil_kits"]\ncandidate_dirs = ["{outside}"]\n'
                                       f'db = "{tmp_path}/state/kb.db"\n')
    env = {"HOME": str(home)}
    return proj, {"env": env, "marker": marker, "outside": outside, "evil": evil}


def test_a_project_file_names_kit_folders_but_trusts_none_and_adds_no_candidate_folder(project):
    proj, ctx = project
    settings = load_settings(cwd=proj, env=ctx["env"])
    assert settings.candidate_dirs == []
    assert ctx["evil"] in settings.kits_dirs and ctx["evil"] in settings.project_kits_dirs
    assert not is_trusted(settings, ctx["evil"] / "fresh_kernel")
    with pytest.raises(DomainError, match="cannot make a kit trusted"):
        find_kit(settings, "fresh_kernel")
    with pytest.raises(DomainError, match="not trusted"):
        find_kit(settings, str(ctx["evil"] / "fresh_kernel"))


async def test_a_lookalike_never_shadows_the_shipped_kit(project):
    proj, ctx = project
    settings = load_settings(cwd=proj, env=ctx["env"])
    kit = find_kit(settings, "rmsnorm_cpu")
    assert kit.root == (kits_dir() / "rmsnorm_cpu").resolve()
    e = await evaluate_candidate(settings, "rmsnorm_cpu", code=(kit.root / "baseline.py").read_text())
    assert e.status == "PASSED" and not ctx["marker"].exists()


async def test_a_program_kit_a_project_names_runs_confined(project):
    proj, ctx = project
    settings = load_settings(cwd=proj, env=ctx["env"])
    kit = find_kit(settings, "sphere_search")
    e = await evaluate_candidate(settings, kit, code=(kit.root / "initial_program.py").read_text())
    assert e.status == "PASSED" and e.sandbox.startswith("kit evaluator:") and "seccomp" in e.sandbox


def test_the_user_can_still_trust_a_folder(project):
    proj, ctx = project
    settings = load_settings(cwd=proj, env=ctx["env"])
    trust_kit(settings, ctx["evil"] / "fresh_kernel")
    assert find_kit(settings, "fresh_kernel").name == "fresh_kernel"
