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

Export goes through the `KnowledgeStore` interface, so it works against a shared server;
import restores ids and provenance and so runs against the local file only.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from pydantic import TypeAdapter

from evoteam.servers.knowledge.errors import Invalid
from evoteam.servers.knowledge.local import LocalKnowledgeStore
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


def _dump(path: Path, data) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8")


async def export_run(store: KnowledgeStore, run_id: str, out: Path) -> RunBundle:
    """Write run `run_id` under `out` (created; must be empty if it exists)."""
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise Invalid(f"{out} is not empty: export into a new or empty folder")
    bundle = await collect_bundle(store, run_id)
    (out / "artifacts").mkdir(parents=True, exist_ok=True)
    (out / "candidates").mkdir(exist_ok=True)
    _dump(out / "run.json", bundle.run.model_dump(mode="json"))
    (out / "LEARNINGS.md").write_text((await store.render_learnings(run_id, max_chars=1_000_000)).markdown,
                                      encoding="utf-8")
    (out / "HISTORY.md").write_text((await store.render_history(run_id, max_chars=100_000_000)).markdown, encoding="utf-8")
    _dump(out / "learnings.json", [x.model_dump(mode="json") for x in bundle.learnings])
    _dump(out / "history.json", [x.model_dump(mode="json") for x in bundle.history])
    _dump(out / "costs.json", [x.model_dump(mode="json") for x in bundle.costs])
    index = []
    for artifact in bundle.artifacts:
        filename = f"{artifact.id}--{artifact.name}"
        data = artifact.text.encode("utf-8") if artifact.is_text else base64.b64decode(artifact.content_base64 or "")
        (out / "artifacts" / filename).write_bytes(data)
        index.append({**artifact.model_dump(mode="json", exclude={"text", "content_base64"}), "file": filename})
    _dump(out / "artifacts" / "index.json", index)
    for candidate in bundle.candidates:
        _dump(out / "candidates" / f"{candidate.id}.json", candidate.model_dump(mode="json", exclude={"code"}))
        if candidate.code is not None:
            (out / "candidates" / f"{candidate.id}.py").write_text(candidate.code, encoding="utf-8")
    return bundle


def read_bundle(folder: Path) -> RunBundle:
    """Read an exported tree back into a bundle, checking it is complete."""
    folder = Path(folder)
    try:
        run = Run.model_validate_json((folder / "run.json").read_text(encoding="utf-8"))
        learnings = TypeAdapter(list[Learning]).validate_json((folder / "learnings.json").read_bytes())
        history = TypeAdapter(list[HistoryEntry]).validate_json((folder / "history.json").read_bytes())
        costs_file = folder / "costs.json"
        costs = TypeAdapter(list[CostEntry]).validate_json(costs_file.read_bytes()) if costs_file.exists() else []
        artifacts = []
        for entry in json.loads((folder / "artifacts" / "index.json").read_text(encoding="utf-8")):
            data = (folder / "artifacts" / entry.pop("file")).read_bytes()
            info = ArtifactInfo.model_validate(entry)
            if info.is_text:
                artifacts.append(Artifact(**info.model_dump(), text=data.decode("utf-8")))
            else:
                artifacts.append(Artifact(**info.model_dump(), content_base64=base64.b64encode(data).decode()))
        candidates = []
        for path in sorted((folder / "candidates").glob("*.json")):
            record = json.loads(path.read_text(encoding="utf-8"))
            code_path = path.with_suffix(".py")
            record["code"] = code_path.read_text(encoding="utf-8") if code_path.exists() else None
            candidates.append(Candidate.model_validate(record))
    except FileNotFoundError as exc:
        raise Invalid(f"{folder} is not a complete evoteam export: {exc.filename} is missing") from exc
    except (ValueError, KeyError) as exc:
        raise Invalid(f"{folder} holds a damaged export: {exc}") from exc
    candidates.sort(key=lambda c: (c.provenance.created_at, c.id))  # parents before children
    return RunBundle(run=run, learnings=learnings, history=history, artifacts=artifacts, candidates=candidates,
                     costs=costs)


async def import_run(store: LocalKnowledgeStore, folder: Path, project: str | None = None) -> Run:
    return await store.import_bundle(read_bundle(folder), project=project)
