"""Issue 23: an export is whole or absent, and import refuses a partial or changed one."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from evoteam.servers.knowledge.errors import Invalid
from evoteam.servers.knowledge.export import export_run, import_run
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.models import ArtifactCreate
from evoteam.servers.knowledge.store import Actor
from tests.knowledge.test_export import populate
from tests.support.fulldisk import run_on_full_disk


@pytest.fixture
async def tree(tmp_path: Path) -> Path:
    async with LocalKnowledgeStore.open(tmp_path / "src.db", Actor(user="alice", client="t")) as a:
        run_id = await populate(a)
        await export_run(a, run_id, tmp_path / "tree")
    return tmp_path / "tree"


async def refused(tmp_path: Path, tree: Path, match: str) -> None:
    async with LocalKnowledgeStore.open(tmp_path / "victim.db") as store:
        with pytest.raises(Invalid, match=match) as info:
            await import_run(store, tree)
        assert "\n" not in str(info.value)
        assert (await store.list_runs()).total == 0


async def test_a_complete_export_carries_a_manifest_and_imports(tmp_path: Path, tree: Path):
    manifest = json.loads((tree / "MANIFEST.json").read_text())
    assert manifest["counts"]["candidates"] == 2 and manifest["counts"]["artifacts"] == 2
    assert set(manifest["files"]) >= {"run.json", "learnings.json", "artifacts/index.json"}
    async with LocalKnowledgeStore.open(tmp_path / "b.db") as store:
        run = await import_run(store, tree)
        assert run.candidates == 2


async def test_a_folder_with_a_candidate_missing_is_refused(tmp_path: Path, tree: Path):
    records = {p: json.loads(p.read_text()) for p in (tree / "candidates").glob("*.json")}
    parents = {r.get("parent_id") for r in records.values()}
    victim = next(p for p, r in records.items() if r["id"] not in parents)  # a leaf: no link breaks
    victim.unlink()
    victim.with_suffix(".py").unlink(missing_ok=True)
    await refused(tmp_path, tree, "incomplete")


async def test_a_folder_without_its_manifest_is_refused(tmp_path: Path, tree: Path):
    (tree / "MANIFEST.json").unlink()
    await refused(tmp_path, tree, "no MANIFEST.json")


async def test_an_older_export_without_a_manifest_imports_only_when_asked(tmp_path: Path, tree: Path):
    # Exports made before manifests existed are not lost: `kb import --without-manifest` takes
    # them, still checking every record; a present manifest is always checked.
    (tree / "MANIFEST.json").unlink()
    async with LocalKnowledgeStore.open(tmp_path / "old.db") as store:
        run = await import_run(store, tree, without_manifest=True)
        assert run.candidates == 2


async def test_a_changed_file_is_refused(tmp_path: Path, tree: Path):
    (tree / "HISTORY.md").write_text("rewritten")
    await refused(tmp_path, tree, "does not match its hash")


async def test_an_extra_candidate_is_refused(tmp_path: Path, tree: Path):
    record = json.loads(sorted((tree / "candidates").glob("*.json"))[0].read_text())
    record.update(id="cand_extra", parent_id=None, artifact_id=None)
    (tree / "candidates" / "cand_extra.json").write_text(json.dumps(record))
    await refused(tmp_path, tree, "incomplete|does not list")


async def test_export_onto_a_full_disk_leaves_nothing_and_says_so_in_one_line(tmp_path: Path):
    db = tmp_path / "kb.db"
    async with LocalKnowledgeStore.open(db, Actor(user="alice", client="t")) as store:
        run_id = await populate(store)
        for i in range(4):  # ~400 KB of artifacts against a 128 KB disk
            await store.put_artifact(ArtifactCreate(run_id=run_id, name=f"big{i}.txt", text=os.urandom(50_000).hex()))
    disk = tmp_path / "disk"
    env = {**os.environ, "HOME": str(tmp_path), "EVOTEAM_DB": str(db)}
    env.pop("EVOTEAM_KNOWLEDGE_URL", None)
    proc = run_on_full_disk(disk, "128k", f"$EVOTEAM kb export {run_id} {disk}/out; echo rc=$?; ls -A {disk}", env)
    out = proc.stdout.splitlines()
    assert "rc=1" in out, (proc.stdout, proc.stderr)
    assert out[out.index("rc=1") + 1:] == []  # nothing left on the disk, not even a hidden partial folder
    assert "Traceback" not in proc.stderr and proc.stderr.strip().count("\n") == 0, proc.stderr
    assert "cannot write the export" in proc.stderr, proc.stderr
