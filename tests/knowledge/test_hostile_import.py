"""A shared export folder is untrusted: the attacks of issue 17/14 on `kb import` and `kb export`."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
from pathlib import Path

import pytest

from evoteam.servers.knowledge.errors import Invalid
from evoteam.servers.knowledge.export import export_run, import_run
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.models import CandidateCreate
from evoteam.servers.knowledge.store import Actor
from tests.knowledge.test_export import populate


@pytest.fixture
async def tree(tmp_path: Path) -> Path:
    """A genuine export of a populated run, as a starting point for each forgery."""
    async with LocalKnowledgeStore.open(tmp_path / "src.db", Actor(user="alice", client="t")) as a:
        run_id = await populate(a)
        await export_run(a, run_id, tmp_path / "tree")
    return tmp_path / "tree"


def one_candidate(tree: Path) -> Path:
    return next(p for p in sorted((tree / "candidates").glob("*.json")) if p.with_suffix(".py").exists())


def victim(request, tmp_path: Path, backend: str = "sqlite") -> Path | str:
    """Where the importing store lives: a SQLite file, or a fresh PostgreSQL database (the
    refusals that depend on what the store holds must hold on both)."""
    return request.getfixturevalue("postgres_url") if backend == "postgres" else tmp_path / "victim.db"


async def refused(where: Path | str, tree: Path, match: str, **store_kw) -> None:
    """The import fails with one line matching `match`, and the store stays empty."""
    if isinstance(where, Path) and where.is_dir():
        where = where / "victim.db"
    async with LocalKnowledgeStore.open(where, **store_kw) as store:
        with pytest.raises(Invalid, match=match) as info:
            await asyncio.wait_for(import_run(store, tree), timeout=30)
        assert "\n" not in str(info.value)
        assert (await store.list_runs()).total == 0


@pytest.mark.parametrize("forged_id", ["/tmp/evoteam-pwned", "../../../pwned", "cand_../../x"])
async def test_a_path_as_candidate_id_is_refused_on_import(tmp_path, tree, forged_id):
    record_path = one_candidate(tree)
    record = json.loads(record_path.read_text())
    record["id"] = forged_id
    record_path.write_text(json.dumps(record))
    await refused(tmp_path, tree, "not a valid cand_ id")


async def test_export_never_writes_outside_its_folder_whatever_the_store_holds(tmp_path):
    """Even a store already holding a hostile id (from an older evoteam) exports nothing outside."""
    target = tmp_path / "outside" / "pwned"
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="a", client="t")) as store:
        run_id = await populate(store)
    with sqlite3.connect(tmp_path / "kb.db") as conn:
        conn.execute("UPDATE candidates SET id = ? WHERE id = (SELECT min(id) FROM candidates WHERE code IS NOT NULL)",
                     (str(target),))
    async with LocalKnowledgeStore.open(tmp_path / "kb.db") as store:
        with pytest.raises(Invalid, match="not a valid cand_ id"):
            await export_run(store, run_id, tmp_path / "out")
    assert not target.with_suffix(".py").exists() and not (tmp_path / "outside").exists()
    assert not (tmp_path / "out").exists()  # refused before the first write


async def test_an_oversize_artifact_is_refused(tmp_path, tree):
    art = next(p for p in (tree / "artifacts").iterdir() if p.name.endswith("profile.txt"))
    art.write_bytes(b"x" * 5000)
    await refused(tmp_path, tree, "limit is 4096", max_artifact_bytes=4096)


async def test_an_oversize_learning_is_refused(tmp_path, tree):
    learnings = json.loads((tree / "learnings.json").read_text())
    learnings[0]["text"] = "y" * 9000
    (tree / "learnings.json").write_text(json.dumps(learnings))
    await refused(tmp_path, tree, "text")


BACKENDS = pytest.mark.parametrize("backend", ["sqlite", "postgres"])


@BACKENDS
@pytest.mark.parametrize("field,value", [("evidence", ["cand_0000aaaa0000aaaa"]),
                                         ("supersedes", "lrn_of_another_project")])
async def test_links_outside_the_exported_run_are_refused(request, tmp_path, tree, field, value, backend):
    learnings = json.loads((tree / "learnings.json").read_text())
    learnings[0][field] = value
    (tree / "learnings.json").write_text(json.dumps(learnings))
    await refused(victim(request, tmp_path, backend), tree, "not .*(in|of) this export")


@BACKENDS
async def test_a_parent_in_another_run_is_refused(request, tmp_path, tree, backend):
    child = next(p for p in (tree / "candidates").glob("*.json") if json.loads(p.read_text())["parent_id"])
    record = json.loads(child.read_text())
    record["parent_id"] = "cand_someoneelses0001"
    child.write_text(json.dumps(record))
    await refused(victim(request, tmp_path, backend), tree, "parent")


async def test_a_fifo_does_not_hang_the_import(tmp_path, tree):
    code = one_candidate(tree).with_suffix(".py")
    code.unlink()
    os.mkfifo(code)
    await refused(tmp_path, tree, "not a regular file")


async def test_a_symlink_to_another_file_is_refused(tmp_path, tree):
    secret = tmp_path / "someone-elses-secret.txt"
    secret.write_text("private")
    code = one_candidate(tree).with_suffix(".py")
    code.unlink()
    code.symlink_to(secret)
    await refused(tmp_path, tree, "link")


@pytest.mark.parametrize("damage,backend", [("deep", "sqlite"), ("directory", "sqlite"), ("not-a-list", "sqlite"),
                                            ("duplicate", "sqlite"), ("duplicate", "postgres")])
async def test_malformed_files_give_one_line(request, tmp_path, tree, damage, backend):
    if damage == "deep":
        record_path = one_candidate(tree)
        record = json.loads(record_path.read_text())
        record_path.write_text(json.dumps(record)[:-1] + ', "metrics": ' + "[" * 100_000 + "]" * 100_000 + "}")
    elif damage == "directory":
        (tree / "run.json").unlink()
        (tree / "run.json").mkdir()
    elif damage == "not-a-list":
        (tree / "artifacts" / "index.json").write_text('["just a string"]')
    else:
        learnings = json.loads((tree / "learnings.json").read_text())
        (tree / "learnings.json").write_text(json.dumps(learnings + learnings[:1]))
    await refused(victim(request, tmp_path, backend), tree, "damaged|cannot be imported")


@BACKENDS
async def test_imported_scores_are_claims_unless_trusted(request, tmp_path: Path, backend):
    async with LocalKnowledgeStore.open(tmp_path / "src.db", Actor(user="a", client="t", verifier=True)) as a:
        run_id = await populate(a)
        await a.record_candidate(CandidateCreate(run_id=run_id, code="x", status="PASSED", score=0.39, verified=True))
        assert (await a.get_run(run_id)).best_score == pytest.approx(0.39)
        await export_run(a, run_id, tmp_path / "tree")
    async with LocalKnowledgeStore.open(victim(request, tmp_path, backend)) as b:
        run = await import_run(b, tmp_path / "tree")
        assert run.best_score is None  # a forged export cannot award itself a best score
    async with LocalKnowledgeStore.open(tmp_path / "c.db") as c:
        run = await import_run(c, tmp_path / "tree", trust_scores=True)
        assert run.best_score == pytest.approx(0.39)
