"""Issue 22, "candidates refused in the project": evoteam's state is its own files (the store,
its journal files, the bench's state folder, an operator's key file), not the folder tree that
holds the store. With the store in the user's home, a project under home evaluates by path."""

from __future__ import annotations

from pathlib import Path

import pytest

from evoteam.config import Settings
from evoteam.errors import DomainError
from evoteam.servers.bench.evaluation.candidates import check_candidate_path
from evoteam.servers.bench.evaluation.core import evaluate_candidate
from evoteam.servers.bench.formats.kits import heldout_secret, state_dir
from evoteam.servers.knowledge.local import LocalKnowledgeStore


@pytest.fixture
def home(tmp_path: Path) -> Path:
    folder = tmp_path / "home"
    folder.mkdir()
    return folder


@pytest.fixture
def home_settings(home: Path, fast_kit: Path) -> Settings:
    """EVOTEAM_DB=~/evoteam.db: the store sits directly in the home folder."""
    return Settings(db=home / "evoteam.db", kits_dirs=[fast_kit.parent])


async def test_a_project_under_the_store_folder_evaluates_by_path(home, home_settings, fast_kit, monkeypatch):
    project = home / "work" / "proj"
    (project / "candidates").mkdir(parents=True)
    (project / "candidates" / "c1.py").write_text((fast_kit / "baseline.py").read_text())
    monkeypatch.chdir(project)
    async with LocalKnowledgeStore.open(home_settings.db) as store:
        result = await evaluate_candidate(home_settings, str(fast_kit), candidate_path="candidates/c1.py", store=store)
    assert result.passed, result


@pytest.mark.parametrize("which", ["store", "wal", "shm", "secret"])
def test_evoteams_own_files_are_refused_by_name(home, home_settings, monkeypatch, which):
    monkeypatch.chdir(home)
    heldout_secret(home_settings)
    db = home_settings.db
    target = {"store": db, "wal": Path(f"{db}-wal"), "shm": Path(f"{db}-shm"),
              "secret": state_dir(home_settings) / "heldout.secret"}[which]
    if not target.exists():
        target.write_text("x")
    # Named as a .py through a link, as an agent trying its luck would: the link resolves to the file.
    link = home / f"looks_like_{which}.py"
    link.symlink_to(target)
    for given in (str(target), str(link)):
        with pytest.raises(DomainError) as info:
            check_candidate_path(home_settings, given, cwd=home)
        message = str(info.value)
        assert "\n" not in message
        assert str(target if which != "secret" else state_dir(home_settings)) in message, message
        assert "code=" in message, message  # the way out


def test_an_operator_key_file_is_refused(home, home_settings, monkeypatch):
    key = home / "keys" / "heldout.py"
    key.parent.mkdir()
    key.write_text("00" * 32)
    monkeypatch.setenv("EVOTEAM_HELDOUT_KEY_FILE", str(key))
    with pytest.raises(DomainError, match="held-out key file"):
        check_candidate_path(home_settings, str(key), cwd=home)


def test_task_kits_names_the_kit_from_a_folder_with_its_own_copy(tmp_path, monkeypatch):
    """Issue 22, "paths and kits": a clone of evoteam (or a project vendoring kits) holds
    task_kits/ itself; `task_kits/<kit>` still names the configured kit, not an untrusted path."""
    import shutil

    from evoteam.config import SOURCE_ROOT
    from evoteam.servers.bench.formats.kits import find_kit

    clone = tmp_path / "clone"
    shutil.copytree(SOURCE_ROOT / "task_kits" / "rmsnorm_cpu", clone / "task_kits" / "rmsnorm_cpu")
    monkeypatch.chdir(clone)
    settings = Settings(db=tmp_path / "state" / "kb.db", kits_dirs=[SOURCE_ROOT / "task_kits"])
    kit = find_kit(settings, "task_kits/rmsnorm_cpu")
    assert kit.name == "rmsnorm_cpu" and kit.root == (SOURCE_ROOT / "task_kits" / "rmsnorm_cpu").resolve()
    assert find_kit(settings, "rmsnorm_cpu").root == kit.root
