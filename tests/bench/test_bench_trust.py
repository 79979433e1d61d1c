"""Issue 17 §2 as the attack: `evaluate(candidate_path=...)` reads only a candidate, and the
held-out secret can be kept out of the agents' reach."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from evoteam.errors import DomainError
from evoteam.servers.bench.evaluation.core import evaluate_candidate
from evoteam.servers.bench.formats.heldout_key import external_heldout_key
from evoteam.servers.bench.formats.kits import heldout_secret, state_dir
from evoteam.servers.knowledge.local import LocalKnowledgeStore


@pytest.fixture
def project(tmp_path: Path, monkeypatch) -> Path:
    """The agent's project folder, the bench's working directory."""
    folder = tmp_path / "project"
    folder.mkdir()
    monkeypatch.chdir(folder)
    return folder


def outside_targets(settings, project: Path) -> dict[str, str]:
    heldout_secret(settings)  # make sure the secret file exists
    secret_link = project / "innocent.py"
    secret_link.symlink_to(state_dir(settings) / "heldout.secret")
    passwd_link = project / "also_innocent.py"
    passwd_link.symlink_to("/etc/passwd")
    return {
        "the held-out secret": str(state_dir(settings) / "heldout.secret"),
        "the process environment": "/proc/self/environ",
        "the password file": "/etc/passwd",
        "a link to the secret": str(secret_link),
        "a link out of the project": str(passwd_link),
        "a relative escape": "../../../../../../etc/passwd",
    }


async def test_evaluate_reads_nothing_outside_the_project(fast_settings, fast_kit, project):
    async with LocalKnowledgeStore.open(fast_settings.db) as store:
        for what, path in outside_targets(fast_settings, project).items():
            with pytest.raises(DomainError, match="outside your project|state folder|not a .py") as info:
                await evaluate_candidate(fast_settings, str(fast_kit), candidate_path=path, store=store)
            assert "\n" not in str(info.value), what
        assert (await store.list_runs()).total == 0  # nothing was recorded, so nothing was published


async def test_evaluate_refuses_special_and_oversize_files(fast_settings, fast_kit, project):
    fifo = project / "cand.py"
    os.mkfifo(fifo)
    with pytest.raises(DomainError, match="not a regular file"):
        await evaluate_candidate(fast_settings, str(fast_kit), candidate_path=str(fifo))
    big = project / "big.py"
    big.write_text("#" * 2_100_000)
    with pytest.raises(DomainError, match="limit"):
        await evaluate_candidate(fast_settings, str(fast_kit), candidate_path=str(big))


async def test_a_candidate_in_the_project_is_evaluated_and_verified(fast_settings, fast_kit, project):
    (project / "cand.py").write_text((fast_kit / "baseline.py").read_text())
    async with LocalKnowledgeStore.open(fast_settings.db) as store:
        result = await evaluate_candidate(fast_settings, str(fast_kit), candidate_path="cand.py", store=store)
        assert result.recorded
        saved = await store.get_candidate(result.candidate_id)
        assert saved.verified is True  # the bench measured it: the one writer whose score ranks
        best = (await store.get_run(result.run_id)).best_candidate_id
        if result.status == "PASSED" and not result.flagged:
            assert best == saved.id
        else:  # a loaded machine can trip the harness's timing checks: then it must not rank
            assert best is None, result.message


def test_the_heldout_key_can_live_outside_the_state_folder(fast_settings, tmp_path, monkeypatch):
    key_file = tmp_path / "bench-user-only" / "heldout.key"
    key_file.parent.mkdir()
    key_file.write_text("ab" * 32)
    monkeypatch.setenv("EVOTEAM_HELDOUT_KEY_FILE", str(key_file))
    assert heldout_secret(fast_settings) == bytes.fromhex("ab" * 32)
    assert not (state_dir(fast_settings) / "heldout.secret").exists()  # nothing agent-readable was written
    monkeypatch.setenv("EVOTEAM_HELDOUT_KEY", "zz")
    with pytest.raises(DomainError, match="not hex"):
        external_heldout_key()
    monkeypatch.delenv("EVOTEAM_HELDOUT_KEY")
    key_file.unlink()
    with pytest.raises(DomainError, match="cannot read the held-out key"):
        heldout_secret(fast_settings)
