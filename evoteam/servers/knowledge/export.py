"""A run as a file tree — the papers' K on disk, so agents can also just read files.

    DIR/run.json            the run
    DIR/LEARNINGS.md        the learnings document (for reading)
    DIR/HISTORY.md          the evolution history (for reading)
    DIR/learnings.json      every learning, superseded ones included (for import)
    DIR/history.json        every history entry
    DIR/costs.json          every cost entry
    DIR/artifacts/<id>--<name>        each artifact's content
    DIR/artifacts/index.json          their metadata
    DIR/candidates/<id>.json          each candidate's record
    DIR/candidates/<id>.py            its code, when it has code
    DIR/MANIFEST.json                 counts and the sha256 of every file above (import checks it)

Export goes through the `KnowledgeStore` interface, so it works against a shared server;
import restores ids and provenance and so runs against the local file only.
"""

from __future__ import annotations

import base64
import errno
import hashlib
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from pydantic import TypeAdapter, ValidationError

from evoteam import safepath
from evoteam.servers.knowledge.bundlecheck import (
    MANIFEST,
    MAX_JSON_BYTES,
    ExportManifest,
    check_bundle,
    check_id,
    check_manifest,
    inside,
    read_plain_file,
)
from evoteam.servers.knowledge.errors import Invalid, StoreFailure
from evoteam.servers.knowledge.local import DEFAULT_MAX_ARTIFACT_BYTES, LocalKnowledgeStore
from evoteam.servers.knowledge.models import (
    Artifact,
    ArtifactInfo,
    Candidate,
    CostEntry,
    HistoryEntry,
    Learning,
    Page,
    Run,
    RunBundle,
)
from evoteam.servers.knowledge.store import KnowledgeStore

T = TypeVar("T")
MAX_CODE_BYTES = 8_000_000  # a candidate's code is at most 2,000,000 characters


async def _all(fetch: Callable[[str | None], Awaitable[Page[T]]]) -> AsyncIterator[T]:
    cursor = None
    while True:
        page = await fetch(cursor)
        for item in page.items:
            yield item
        if not page.next_cursor:
            return
        cursor = page.next_cursor


async def collect_bundle(store: KnowledgeStore, run_id: str) -> RunBundle:
    run = await store.get_run(run_id)
    learnings = [x async for x in _all(lambda c: store.list_learnings(run_id, include_superseded=True,
                                                                      limit=200, cursor=c))]
    history = [x async for x in _all(lambda c: store.list_history(run_id, limit=200, cursor=c))]
    infos = [x async for x in _all(lambda c: store.list_artifacts(run_id, limit=200, cursor=c))]
    artifacts = [await store.get_artifact(info.id) for info in infos]
    summaries = [x async for x in _all(lambda c: store.list_candidates(run_id, limit=200, cursor=c))]
    candidates = [await store.get_candidate(s.id) for s in summaries]
    costs = await store.list_costs(run_id)
    return RunBundle(run=run, learnings=learnings, history=history, artifacts=artifacts,
                     candidates=candidates, costs=costs)


def _json(data) -> bytes:
    return (json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n").encode("utf-8")


class _Writer:
    """Writes an export's files through the one safe-path rule and keeps their hashes for the
    manifest."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.files: dict[str, str] = {}

    def write(self, rel: str, data: bytes) -> None:
        try:
            path = safepath.inside(self.root, rel, what="export file")
        except safepath.UnsafePath as exc:
            raise Invalid(str(exc)) from None
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        self.files[rel] = hashlib.sha256(data).hexdigest()


async def export_run(store: KnowledgeStore, run_id: str, out: Path) -> RunBundle:
    """Write run `run_id` under `out` (created; must be empty if it exists). The tree is built
    in a hidden folder beside `out` and renamed into place when complete, so a failure (a full
    disk) leaves nothing that looks like an export; MANIFEST.json lists every file's hash and the
    counts, which import checks."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise Invalid(f"{out} is not empty: export into a new or empty folder")
    bundle = await collect_bundle(store, run_id)
    # Ids and names become file names: checked before the first write, whatever the store
    # holds; the safe-path rule then refuses any path that would leave the folder.
    for artifact in bundle.artifacts:
        check_id(artifact.id, "art", "artifact id")
        LocalKnowledgeStore.check_artifact_name(artifact.name)
    for candidate in bundle.candidates:
        check_id(candidate.id, "cand", "candidate id")
    learnings_md = (await store.render_learnings(run_id, max_chars=1_000_000)).markdown
    history_md = (await store.render_history(run_id, max_chars=100_000_000)).markdown
    try:
        with safepath.staged_folder(out) as stage:
            w = _Writer(stage)
            w.write("run.json", _json(bundle.run.model_dump(mode="json")))
            w.write("LEARNINGS.md", learnings_md.encode("utf-8"))
            w.write("HISTORY.md", history_md.encode("utf-8"))
            w.write("learnings.json", _json([x.model_dump(mode="json") for x in bundle.learnings]))
            w.write("history.json", _json([x.model_dump(mode="json") for x in bundle.history]))
            w.write("costs.json", _json([x.model_dump(mode="json") for x in bundle.costs]))
            (stage / "artifacts").mkdir()
            (stage / "candidates").mkdir()
            index = []
            for artifact in bundle.artifacts:
                filename = f"{artifact.id}--{artifact.name}"
                data = (artifact.text.encode("utf-8") if artifact.is_text
                        else base64.b64decode(artifact.content_base64 or ""))
                w.write(f"artifacts/{filename}", data)
                index.append({**artifact.model_dump(mode="json", exclude={"text", "content_base64"}), "file": filename})
            w.write("artifacts/index.json", _json(index))
            for candidate in bundle.candidates:
                w.write(f"candidates/{candidate.id}.json", _json(candidate.model_dump(mode="json", exclude={"code"})))
                if candidate.code is not None:
                    w.write(f"candidates/{candidate.id}.py", candidate.code.encode("utf-8"))
            manifest = ExportManifest(run_id=bundle.run.id, counts=_counts(bundle), files=w.files)
            (stage / MANIFEST).write_bytes(_json(manifest.model_dump(mode="json")))
    except OSError as exc:
        raise StoreFailure(f"cannot write the export to {out}: {exc.strerror or exc}; nothing was left there "
                           f"(free some space or choose another folder)") from None
    return bundle


def _one_line(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        return f"{'.'.join(str(p) for p in err['loc']) or 'value'}: {err['msg']}"
    if isinstance(exc, RecursionError):
        return "it is nested too deeply"
    return str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__


class _IndexEntry(ArtifactInfo):
    file: str


def read_bundle(folder: Path, max_artifact_bytes: int = DEFAULT_MAX_ARTIFACT_BYTES,
                without_manifest: bool = False) -> RunBundle:
    """Read an exported tree back into a bundle, checking it is complete and well-formed
    (see bundlecheck.py: plain files only, bounded sizes, ids and links inside the run)."""
    folder = Path(folder)

    def read(path: Path, limit: int = MAX_JSON_BYTES) -> bytes:
        return read_plain_file(path, limit)

    try:
        run = Run.model_validate_json(read(folder / "run.json"))
        learnings = TypeAdapter(list[Learning]).validate_json(read(folder / "learnings.json"))
        history = TypeAdapter(list[HistoryEntry]).validate_json(read(folder / "history.json"))
        costs_file = folder / "costs.json"
        costs = TypeAdapter(list[CostEntry]).validate_json(read(costs_file)) if os.path.lexists(costs_file) else []
        artifacts = []
        art_dir = folder / "artifacts"
        for entry in TypeAdapter(list[_IndexEntry]).validate_json(read(art_dir / "index.json")):
            data = read(inside(art_dir, entry.file), max_artifact_bytes)
            info = ArtifactInfo.model_validate(entry.model_dump(exclude={"file"}))
            if info.is_text:
                artifacts.append(Artifact(**info.model_dump(), text=data.decode("utf-8")))
            else:
                artifacts.append(Artifact(**info.model_dump(), content_base64=base64.b64encode(data).decode()))
        candidates = []
        cand_dir = folder / "candidates"
        if not cand_dir.is_dir() or cand_dir.is_symlink():
            raise FileNotFoundError(errno.ENOENT, "missing", str(cand_dir))
        for path in sorted(cand_dir.glob("*.json")):
            record = json.loads(read(path))
            if not isinstance(record, dict):
                raise Invalid(f"{path} is not a candidate record")
            code_path = path.with_suffix(".py")
            record["code"] = read(code_path, MAX_CODE_BYTES).decode("utf-8") if os.path.lexists(code_path) else None
            candidates.append(Candidate.model_validate(record))
    except FileNotFoundError as exc:
        raise Invalid(f"{folder} is not a complete evoteam export: {exc.filename} is missing") from None
    except Invalid as exc:
        raise Invalid(f"{folder} holds a damaged export: {exc}") from None
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError, OSError) as exc:
        raise Invalid(f"{folder} holds a damaged export: {_one_line(exc)}") from None
    candidates.sort(key=lambda c: (c.provenance.created_at, c.id))  # parents before children
    bundle = RunBundle(run=run, learnings=learnings, history=history, artifacts=artifacts, candidates=candidates,
                       costs=costs)
    try:
        check_bundle(bundle, max_artifact_bytes)
    except Invalid as exc:
        raise Invalid(f"{folder} cannot be imported: {exc}") from None
    if not (without_manifest and not (folder / MANIFEST).exists()):
        check_manifest(folder, _counts(bundle))
    return bundle


def _counts(bundle: RunBundle) -> dict[str, int]:
    return {"learnings": len(bundle.learnings), "history": len(bundle.history), "artifacts": len(bundle.artifacts),
            "candidates": len(bundle.candidates), "costs": len(bundle.costs)}


async def import_run(store: LocalKnowledgeStore, folder: Path, project: str | None = None,
                     trust_scores: bool = False, without_manifest: bool = False) -> Run:
    """Import an export folder. Its scores are claims unless `trust_scores` (the importer vouches
    that the export comes from a bench they trust): a forged export cannot award itself a best.
    `without_manifest` accepts a folder an older evoteam exported (it has no MANIFEST.json, so
    its completeness cannot be checked; every record is still checked as usual)."""
    bundle = read_bundle(folder, store.max_artifact_bytes, without_manifest=without_manifest)
    return await store.import_bundle(bundle, project=project, trust_scores=trust_scores)
