"""Restoring an exported run (a `RunBundle`) into a store with its ids and provenance: the rows
of every kind, their search entries, and the links between them. Checked first by
bundlecheck.py; scores stay unverified unless the importer trusts them."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import TYPE_CHECKING, Any

from evoteam.codehash import code_hash
from evoteam.copystats import processes_of
from evoteam.servers.knowledge import hits, measurements
from evoteam.servers.knowledge.bundlecheck import existing_ids
from evoteam.servers.knowledge.errors import Forbidden, Invalid
from evoteam.servers.knowledge.models import Provenance, Run, RunBundle
from evoteam.servers.knowledge.rows import insert_row
from evoteam.servers.knowledge.verified import imported_kind

if TYPE_CHECKING:
    from evoteam.servers.knowledge.local import LocalKnowledgeStore


async def import_bundle(store: LocalKnowledgeStore, bundle: RunBundle, project: str | None = None, trust_scores: bool = False) -> Run:
    """Restore an exported run with its ids and provenance. Local only: provenance is
    taken from the bundle, which a remote caller must not be able to forge."""
    run = bundle.run
    project = project or run.project
    if store.actor.project is not None and project != store.actor.project:
        raise Forbidden(f"cannot import into project {project!r}")

    def prov(p: Provenance) -> dict[str, Any]:
        return {"project": project, "user": p.user, "client": p.client, "role": p.role,
                "team_version": p.team_version, "created_at": p.created_at.isoformat()}

    async with store.db.write() as conn:
        async with conn.execute("SELECT 1 FROM runs WHERE id = ?", (run.id,)) as cur:
            if await cur.fetchone():
                raise Invalid(f"run {run.id} exists already in this store; nothing was imported")
        await existing_ids(conn, bundle)
        await insert_row(conn, "runs", {
            "id": run.id, "goal": run.goal, "kit": run.kit, "direction": run.direction, "x0": run.x0,
            "best_known": run.best_known, "budget_usd": run.budget_usd, "status": run.status,
            "current_version": run.current_version, "seeded_from": run.seeded_from,
            "status_reason": run.status_reason, **prov(run.provenance)})
        for a in bundle.artifacts:
            data = a.text.encode("utf-8") if a.is_text else base64.b64decode(a.content_base64 or "")
            if hashlib.sha256(data).hexdigest() != a.sha256:
                raise Invalid(f"artifact {a.id} content does not match its sha256; the export is damaged")
            await conn.execute("INSERT OR IGNORE INTO blobs (sha256, size, data) VALUES (?, ?, ?)",
                               (a.sha256, len(data), data))
            await insert_row(conn, "artifacts", {
                "id": a.id, "run_id": run.id, "name": a.name, "kind": imported_kind(a.kind, trust_scores),
                "sha256": a.sha256, "size": len(data), "is_text": int(a.is_text), **prov(a.provenance)})
            kind = imported_kind(a.kind, trust_scores)
            await store._index(conn, "artifact", a.id, run.id, project, f"{kind}: {a.name}", a.text or "")
        # Parents before children: candidates are exported in creation order.
        for c in bundle.candidates:
            await insert_row(conn, "candidates", {
                "id": c.id, "run_id": run.id, "code": c.code, "artifact_id": c.artifact_id,
                "status": c.status, "score": c.score, "split": c.split,
                "metrics": json.dumps(c.metrics, default=str),
                "workloads": json.dumps([w.model_dump() for w in c.workloads]), "parent_id": c.parent_id,
                "documents_used": json.dumps(c.documents_used), "notes": c.notes, "flagged": int(c.flagged),
                "verified": int(c.verified and trust_scores), "cost_usd": c.cost_usd, **prov(c.provenance),
                # Hashed by this store's rule (a bundle from an older evoteam holds the hash of its day).
                "code_hash": code_hash(c.code) if c.code else c.code_hash, "n_measurements": c.n_measurements,
                "contended_measurements": max(0, min(c.n_measurements, measurements.counted_before(c.metrics)
                                                      if c.contended_measurements is None
                                                      else c.contended_measurements)),
                "score_lo": (c.score_interval or [None, None])[0], "score_hi": (c.score_interval or [None, None])[1],
                # Ranked as the store ranks (its rounds' own interval, or a copies' t), not by the interval shown.
                "rank_score": _rank_of(c, run.direction),
                "spread_unknown": _spread_unknown(c),
                "samples": json.dumps(c.samples) if c.samples else None,
                "sample_ranges": json.dumps(c.sample_ranges) if c.sample_ranges else None})
            await store._index(conn, "candidate", c.id, run.id, project,
                              hits.candidate_title(c.status, c.score, *(c.score_interval or [None, None]),
                                                   spread_unknown=bool(_spread_unknown(c))), c.notes)
        for item in bundle.learnings:
            await insert_row(conn, "learnings", {
                "id": item.id, "run_id": run.id, "text": item.text, "kind": item.kind,
                "tags": json.dumps(item.tags), "evidence": json.dumps(item.evidence),
                "confidence": item.confidence, "supersedes": None, "superseded_by": None,
                **prov(item.provenance)})
            await store._index(conn, "learning", item.id, run.id, project,
                              hits.learning_title(item.kind, item.tags, item.text), item.text)
        for item in bundle.learnings:  # links after all rows exist
            await conn.execute("UPDATE learnings SET supersedes = ?, superseded_by = ? WHERE id = ?",
                               (item.supersedes, item.superseded_by, item.id))
        for h in bundle.history:
            await insert_row(conn, "history", {
                "id": h.id, "run_id": run.id, "observed_behaviour": h.observed_behaviour,
                "diagnosis": h.diagnosis, "design_change": h.design_change, "outcome": h.outcome,
                **prov(h.provenance)})
            body = "\n".join([h.observed_behaviour, h.diagnosis, h.design_change, h.outcome])
            await store._index(conn, "history", h.id, run.id, project, f"team v{h.team_version}", body)
        for cost in bundle.costs:
            await insert_row(conn, "costs", {
                "id": cost.id, "run_id": run.id, "usd": cost.usd, "source": cost.source,
                "detail": json.dumps(cost.detail, default=str), **prov(cost.provenance)})
    return await store.get_run(run.id)


def _rank_of(c, direction: str) -> float | None:
    history = (c.metrics or {}).get("measurements")  # its measurements' own intervals: the drift between them
    # One measurement timed in copies ranked at home by the bench's t interval where wider (columns).
    shown = (c.metrics or {}).get("score_interval") \
        if c.n_measurements == 1 and processes_of(c.metrics) > 1 else None
    ranked = measurements.rank_of(c.samples, c.sample_ranges, direction, shown=shown, history=history) \
        if c.status == "PASSED" else None
    return ranked if ranked is not None else measurements.rank_value(c.score, c.score_interval, direction)


def _spread_unknown(c) -> int:
    lo, hi = c.score_interval if c.score_interval and len(c.score_interval) == 2 else (None, None)
    return measurements.unknown_spread(c.score, lo, hi, c.samples, c.n_measurements, c.sample_ranges)
