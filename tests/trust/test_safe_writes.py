"""Issue 23, the safe-path rule: no file evoteam writes from data lands outside its folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evoteam.config import Settings
from evoteam.safepath import FIB_NAME, UnsafePath, checked_name, inside, staged_folder
from evoteam.servers.bench.formats.fib_export import export_traces
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.models import CandidateCreate, RunCreate
from evoteam.servers.knowledge.store import Actor

KIT = "rmsnorm_cpu"  # a shipped kernel kit that loads without torch


def _solution(name: str, author: str) -> str:
    return json.dumps({"name": name, "author": author, "definition": "x",
                       "spec": {"language": "python", "target_hardware": ["cpu"], "entry_point": "main.py::run"},
                       "sources": [{"path": "main.py", "content": "def run(x, w):\n    return x\n"}],
                       "hooks": {"PreToolUse": [{"command": "curl evil"}]}})


@pytest.mark.parametrize("name, author", [
    ("../../../../outside/settings", "alice"),
    ("plain", "{outside}/abs"),
    ("plain", ".."),
    ("a/b", "alice"),
])
async def test_export_traces_never_writes_outside_its_folder(tmp_path: Path, name: str, author: str):
    outside = tmp_path / "outside"
    outside.mkdir()
    author = author.format(outside=outside)
    settings = Settings(db=tmp_path / "kb.db")
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="a", client="t")) as store:
        run = await store.start_run(RunCreate(goal="g", kit=KIT))
        bad = await store.record_candidate(CandidateCreate(run_id=run.id, code=_solution(name, author),
                                                           status="PASSED", metrics={"kit": KIT}))
        good = await store.record_candidate(CandidateCreate(run_id=run.id, code=_solution("fine_v1", "bob"),
                                                            status="PASSED", metrics={"kit": KIT}))
        result = await export_traces(settings, store, run.id, tmp_path / "out")
    assert list(outside.iterdir()) == []  # nothing written outside
    everything = [p for p in tmp_path.rglob("*") if p.is_file() and p.suffix == ".json"]
    assert all(p.is_relative_to(tmp_path / "out") for p in everything), everything
    assert any(s.startswith(f"{bad.id}:") and "not allowed" in s for s in result.skipped), result.skipped
    assert result.solutions == ["fine_v1"], good.id  # the well-named candidate is still exported


async def test_a_planted_link_inside_the_folder_does_not_lead_the_export_out(tmp_path: Path):
    outside = tmp_path / "outside"
    outside.mkdir()
    out = tmp_path / "out" / "solutions"
    out.mkdir(parents=True)
    (out / "bob").symlink_to(outside)
    settings = Settings(db=tmp_path / "kb.db")
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="a", client="t")) as store:
        run = await store.start_run(RunCreate(goal="g", kit=KIT))
        await store.record_candidate(CandidateCreate(run_id=run.id, code=_solution("fine_v1", "bob"),
                                                     status="PASSED", metrics={"kit": KIT}))
        result = await export_traces(settings, store, run.id, tmp_path / "out")
    assert list(outside.rglob("*")) == []
    assert result.solutions == [] and "outside" in result.skipped[0]


@pytest.mark.parametrize("value", ["", ".", "..", "a/b", "a\\b", "/abs", "x" * 129, "a\nb", "a..b", 7, None])
def test_names_from_data_follow_the_format_rule(value):
    with pytest.raises(UnsafePath):
        checked_name(value, FIB_NAME, "name")


@pytest.mark.parametrize("rel", ["../x", "a/../../x", "/etc/passwd", "a//b", "a/./b", "a\x00b", ""])
def test_inside_refuses_every_way_out(tmp_path: Path, rel: str):
    with pytest.raises(UnsafePath):
        inside(tmp_path, rel)


def test_a_staged_folder_is_all_or_nothing(tmp_path: Path):
    dest = tmp_path / "export"
    with pytest.raises(RuntimeError):
        with staged_folder(dest) as stage:
            (stage / "half").write_text("x")
            raise RuntimeError("disk full")
    assert not dest.exists() and list(tmp_path.iterdir()) == []
    with staged_folder(dest) as stage:
        (stage / "whole").write_text("x")
    assert [p.name for p in dest.iterdir()] == ["whole"] and len(list(tmp_path.iterdir())) == 1


@pytest.mark.parametrize("run_id, slug", [("../../../escape", "dev"), ("run_a", "../x"), ("run_a/../../b", "dev")])
async def test_a_worktree_stays_under_the_projects_worktree_folder(tmp_path: Path, run_id: str, slug: str):
    import subprocess

    from evoteam.servers.team.worktrees import ensure_worktree

    project = tmp_path / "p"
    project.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    subprocess.run(["git", "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "--allow-empty", "-m", "s"],
                   cwd=project, check=True)
    with pytest.raises(UnsafePath):
        await ensure_worktree(project, run_id, 1, slug)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p"]
    path, _ = await ensure_worktree(project, "run_ok", 1, "dev")
    assert path.is_relative_to(project / ".evoteam" / "worktrees")
