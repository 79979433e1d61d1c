"""Checks on an export folder before anything of it reaches the store, and on every path an
export writes.

Exports are shared between teams, so an export folder is untrusted input: its ids become file
names on a later export, its sizes must respect the store's limits, its links must stay inside
the run it carries, and its files must be plain files (a FIFO would hang the import, a link
would read something else). Everything is checked before the first write; the first problem is
reported in one line and the store is left unchanged.
"""

from __future__ import annotations

import base64
import errno
import hashlib
import os
import re
import stat
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evoteam import safepath

from evoteam.servers.knowledge.errors import Invalid
from evoteam.servers.knowledge.rows import check_artifact_name
from evoteam.servers.knowledge.models import (
    CandidateCreate,
    CostCreate,
    HistoryEntryCreate,
    LearningCreate,
    RunBundle,
)

# The ids the store makes (new_id) and the run ids a caller may choose (RunCreate.run_id).
_ID = {prefix: re.compile(rf"^{prefix}_[A-Za-z0-9_-]{{1,60}}$") for prefix in ("run", "lrn", "his", "art", "cand",
                                                                               "cost")}
MAX_JSON_BYTES = 64 * 1024 * 1024  # one export file of metadata (learnings.json etc.)


def check_id(value: str, prefix: str, what: str = "id") -> str:
    if not isinstance(value, str) or not _ID[prefix].match(value):
        raise Invalid(f"{what} {str(value)[:80]!r} is not a valid {prefix}_ id; the export is damaged or forged")
    return value


def inside(folder: Path, name: str) -> Path:
    """`folder / name` for one plain file name, by the one safe-path rule (evoteam/safepath.py)."""
    if not isinstance(name, str) or "/" in name:
        raise Invalid(f"refusing to use {str(name)[:80]!r}: it is not a plain file name inside {folder}")
    try:
        return safepath.inside(folder, name, what="file name")
    except safepath.UnsafePath as exc:
        raise Invalid(str(exc)) from None


MANIFEST = "MANIFEST.json"
MANIFEST_FORMAT = "evoteam-run-export/1"


class ExportManifest(BaseModel):
    """What a complete export holds: written last, so a folder without it was never finished."""

    model_config = ConfigDict(extra="forbid")

    format: str = MANIFEST_FORMAT
    run_id: str = Field(max_length=80)
    counts: dict[str, int]
    files: dict[str, str] = Field(description="relative path -> sha256 of its bytes")


def check_manifest(folder: Path, counts: dict[str, int]) -> None:
    """The export is whole: its manifest's counts match what was read, every listed file is
    there with its hash, and nothing unlisted sits where import reads records."""
    try:
        manifest = ExportManifest.model_validate_json(read_plain_file(folder / MANIFEST, MAX_JSON_BYTES))
    except FileNotFoundError:
        raise Invalid(f"{folder} has no {MANIFEST}: the export is incomplete (interrupted?) or was made by an "
                      f"older evoteam; export the run again, or import an older export with --without-manifest") from None
    except ValidationError as exc:
        raise Invalid(f"{folder}/{MANIFEST} is damaged: {exc.errors()[0]['msg']}") from None
    if manifest.format != MANIFEST_FORMAT:
        raise Invalid(f"{folder} is an export of format {manifest.format[:40]!r}; this evoteam reads "
                      f"{MANIFEST_FORMAT}")
    if manifest.counts != counts:
        raise Invalid(f"{folder} is incomplete: its manifest lists {manifest.counts}, the folder holds {counts}")
    for rel, digest in manifest.files.items():
        try:
            path = safepath.inside(folder, rel, what="manifest entry")
            data = read_plain_file(path, MAX_JSON_BYTES * 4)
        except FileNotFoundError:
            raise Invalid(f"{folder} is incomplete: {rel[:80]} is missing") from None
        except safepath.UnsafePath as exc:
            raise Invalid(f"{folder}/{MANIFEST} is damaged: {exc}") from None
        if hashlib.sha256(data).hexdigest() != digest:
            raise Invalid(f"{folder} is damaged: {rel[:80]} does not match its hash in {MANIFEST}")
    for sub in ("artifacts", "candidates"):
        for path in sorted((folder / sub).iterdir()):
            if f"{sub}/{path.name}" not in manifest.files:
                raise Invalid(f"{folder} holds {sub}/{path.name[:80]}, which its manifest does not list; "
                              f"the export was changed after it was made")


def read_plain_file(path: Path, limit: int) -> bytes:
    """The bytes of a regular file of at most `limit` bytes; never follows a link, never
    blocks on a FIFO or device."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Invalid(f"{path} is a link; an export holds plain files only") from exc
        raise Invalid(f"cannot read {path}: {exc.strerror}") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Invalid(f"{path} is not a regular file; an export holds plain files only")
        if info.st_size > limit:
            raise Invalid(f"{path} is {info.st_size} bytes; the limit is {limit}")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(limit + 1)
        if len(data) > limit:
            raise Invalid(f"{path} is larger than {limit} bytes")
        return data
    finally:
        os.close(fd)


def _fields(model, item, **extra):
    """Re-validate an exported row through its Create model, so the store's limits apply."""
    data = item.model_dump(include=set(model.model_fields) - {"idempotency_key"})
    try:
        return model.model_validate({**data, **extra})
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise Invalid(f"{model.__name__.removesuffix('Create').lower()} {getattr(item, 'id', '')}: {where}: "
                      f"{err['msg']}") from None


def check_bundle(bundle: RunBundle, max_artifact_bytes: int) -> None:
    """Every id safe as a file name and unique, every limit of the store respected, every link
    (parent, artifact, evidence, supersedes) inside this run."""

    run_id = check_id(bundle.run.id, "run", "run id")
    seen: set[str] = set()

    def new(value: str, prefix: str, what: str) -> str:
        check_id(value, prefix, what)
        if value in seen:
            raise Invalid(f"{what} {value} appears twice in the export; the export is damaged")
        seen.add(value)
        return value

    artifacts = set()
    for a in bundle.artifacts:
        artifacts.add(new(a.id, "art", "artifact id"))
        check_artifact_name(a.name)
        data = a.text.encode("utf-8") if a.is_text else base64.b64decode(a.content_base64 or "")
        if len(data) > max_artifact_bytes:
            raise Invalid(f"artifact {a.id} is {len(data)} bytes; this store's limit is {max_artifact_bytes}")
        if hashlib.sha256(data).hexdigest() != a.sha256:
            raise Invalid(f"artifact {a.id} content does not match its sha256; the export is damaged")
        if not 1 <= len(a.kind) <= 50:
            raise Invalid(f"artifact {a.id}: kind must be 1-50 characters")
    candidates: set[str] = set()
    for c in bundle.candidates:
        _fields(CandidateCreate, c, run_id=run_id, parent_id=None, artifact_id=None, verified=False)
        if c.parent_id is not None and c.parent_id not in candidates:
            raise Invalid(f"candidate {c.id}: parent {str(c.parent_id)[:80]!r} is not an earlier candidate of "
                          f"this export")
        if c.artifact_id is not None and c.artifact_id not in artifacts:
            raise Invalid(f"candidate {c.id}: artifact {str(c.artifact_id)[:80]!r} is not in this export")
        candidates.add(new(c.id, "cand", "candidate id"))
    learnings = {new(item.id, "lrn", "learning id") for item in bundle.learnings}
    for item in bundle.learnings:
        _fields(LearningCreate, item, run_id=run_id, evidence=[], supersedes=None)
        for ref in item.evidence:
            if ref not in candidates and ref not in artifacts:
                raise Invalid(f"learning {item.id}: evidence {str(ref)[:80]!r} is not in this export")
        for link in (item.supersedes, item.superseded_by):
            if link is not None and link not in learnings:
                raise Invalid(f"learning {item.id}: {str(link)[:80]!r} is not a learning of this export")
    for h in bundle.history:
        new(h.id, "his", "history id")
        _fields(HistoryEntryCreate, h, run_id=run_id)
    for cost in bundle.costs:
        new(cost.id, "cost", "cost id")
        _fields(CostCreate, cost, run_id=run_id)
    for row in [*bundle.learnings, *bundle.history, *bundle.artifacts, *bundle.candidates, *bundle.costs]:
        if row.run_id != run_id:
            raise Invalid(f"{row.id} belongs to run {str(row.run_id)[:80]!r}, not to the exported run {run_id}")


async def existing_ids(conn, bundle) -> None:
    """Refuse an import whose ids are already taken in this store (in any run or project)."""
    tables = {"learnings": bundle.learnings, "history": bundle.history, "artifacts": bundle.artifacts,
              "candidates": bundle.candidates, "costs": bundle.costs}
    for table, rows in tables.items():
        for row in rows:
            async with conn.execute(f"SELECT 1 FROM {table} WHERE id = ?", (row.id,)) as cur:
                if await cur.fetchone():
                    raise Invalid(f"{row.id} exists already in this store; nothing was imported")
