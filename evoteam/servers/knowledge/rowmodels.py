"""The store's models made from its rows (SQLite and PostgreSQL rows alike): one function per
kind, so every reader builds a learning, a candidate or a cost the same way."""

from __future__ import annotations

import base64
import binascii
import json
import sqlite3

from evoteam.servers.knowledge import measurements
from evoteam.servers.knowledge.errors import Invalid, TooLarge
from evoteam.servers.knowledge.measurements import first_line
from evoteam.servers.knowledge.models import (
    ArtifactCreate,
    ArtifactInfo,
    Candidate,
    CandidateSummary,
    CostEntry,
    HistoryEntry,
    Learning,
    WorkloadResult,
)
from evoteam.servers.knowledge.rows import provenance_of


def learning_of(row: sqlite3.Row) -> Learning:
    return Learning(id=row["id"], run_id=row["run_id"], text=row["text"], kind=row["kind"],
                    tags=json.loads(row["tags"]), evidence=json.loads(row["evidence"]),
                    confidence=row["confidence"], supersedes=row["supersedes"],
                    superseded_by=row["superseded_by"], provenance=provenance_of(row))


def history_of(row: sqlite3.Row) -> HistoryEntry:
    return HistoryEntry(id=row["id"], run_id=row["run_id"], team_version=row["team_version"],
                        observed_behaviour=row["observed_behaviour"], diagnosis=row["diagnosis"],
                        design_change=row["design_change"], outcome=row["outcome"], provenance=provenance_of(row))


def artifact_info_of(row: sqlite3.Row) -> ArtifactInfo:
    return ArtifactInfo(id=row["id"], run_id=row["run_id"], name=row["name"], kind=row["kind"],
                        sha256=row["sha256"], size=row["size"], is_text=bool(row["is_text"]),
                        provenance=provenance_of(row))


def candidate_summary_of(row: sqlite3.Row) -> CandidateSummary:
    return CandidateSummary(id=row["id"], run_id=row["run_id"], status=row["status"], score=row["score"],
                            split=row["split"], parent_id=row["parent_id"], flagged=bool(row["flagged"]),
                            verified=bool(row["verified"]), provenance=provenance_of(row),
                            score_interval=measurements.interval_of(row),
                            n_measurements=row["n_measurements"] or 1,
                            contended_measurements=row["contended_measurements"] or None, code_hash=row["code_hash"],
                            note=first_line(row["notes"]), rank_score=row["rank_score"],
                            runs=measurements.runs_if_unknown(row))


def candidate_of(row: sqlite3.Row) -> Candidate:
    return Candidate(
        **candidate_summary_of(row).model_dump(), code=row["code"], artifact_id=row["artifact_id"],
        metrics=json.loads(row["metrics"]),
        workloads=[WorkloadResult(**w) for w in json.loads(row["workloads"])],
        documents_used=json.loads(row["documents_used"]), notes=row["notes"], cost_usd=row["cost_usd"],
        samples=json.loads(row["samples"]) if row["samples"] else None,
        sample_ranges=json.loads(row["sample_ranges"]) if row["sample_ranges"] else None,
    )


def cost_of(row: sqlite3.Row) -> CostEntry:
    return CostEntry(id=row["id"], run_id=row["run_id"], usd=row["usd"], source=row["source"],
                     detail=json.loads(row["detail"]), provenance=provenance_of(row))


def artifact_content(spec: ArtifactCreate, max_bytes: int) -> tuple[bytes, bool]:
    """An artifact's bytes and whether they are text, checked against the store's size limit."""
    if (spec.text is None) == (spec.content_base64 is None):
        raise Invalid("give exactly one of text or content_base64")
    if spec.text is not None:
        data, is_text = spec.text.encode("utf-8"), True
    else:
        try:
            data, is_text = base64.b64decode(spec.content_base64, validate=True), False
        except (binascii.Error, ValueError) as exc:
            raise Invalid("content_base64 is not valid base64") from exc
    if len(data) > max_bytes:
        raise TooLarge(f"artifact is {len(data)} bytes; the limit is {max_bytes}. "
                       f"Store a summary, or split it into parts")
    return data, is_text
