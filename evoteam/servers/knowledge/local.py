"""The embedded knowledge store: a SQLite file on this machine."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import aiosqlite

from evoteam.codehash import code_hash
from evoteam.servers.knowledge import idempotency, lineage
from evoteam.servers.knowledge.backend import open_database
from evoteam.servers.knowledge.db import Database
from evoteam.servers.knowledge.errors import Forbidden, Invalid, NotFound
from evoteam.servers.knowledge.models import (
    Artifact, ArtifactCreate, ArtifactInfo, Candidate, CandidateCreate, CandidateSummary, CostCreate, CostEntry,
    HistoryDocument, HistoryEntry, HistoryEntryCreate, Lead, Learning, LearningCreate, LearningKind,
    LearningsDocument, Page, Provenance, Run, RunBundle, RunCreate, RunStatus, SearchPage, SearchKind, Spend,
    SpendLine,
)
from evoteam.servers.knowledge.readsql import normalised_discovery_gain
from evoteam.servers.knowledge.render import KIND_TITLES, LearningsDraft
from evoteam.servers.knowledge.scope import missing
from evoteam.servers.knowledge.store import Actor, KnowledgeStore
from evoteam.servers.knowledge.trajectory import Trajectory
from evoteam.servers.knowledge import (bundleimport, comparisons, historystore, hits, localsearch, measurements,
                                      pgsearch, pooling, readsql)
from evoteam.servers.knowledge.verified import RANKED, check_may_store, check_may_verify
from evoteam.servers.knowledge.rowmodels import (
    artifact_content,
    artifact_info_of,
    candidate_of,
    candidate_summary_of,
    cost_of,
    history_of,
    learning_of,
)
from evoteam.servers.knowledge.rows import (
    COUNT_CAP,
    DEFAULT_MAX_ARTIFACT_BYTES,
    RANK_WINDOW,
    SAMPLE_WINDOW,
    check_artifact_name,
    decode_cursor,
    index_filters,
    insert_row,
    new_id,
    now,
    page_limit,
    page_of,
    provenance_of,
)

class LocalKnowledgeStore(KnowledgeStore):
    """A knowledge store on a local SQLite file."""

    rank_window = RANK_WINDOW
    count_cap = COUNT_CAP
    sample_window = SAMPLE_WINDOW

    def __init__(self, db: Database, actor: Actor, max_artifact_bytes: int = DEFAULT_MAX_ARTIFACT_BYTES):
        self.db = db
        self.actor = actor
        self.max_artifact_bytes = max_artifact_bytes

    @classmethod
    @asynccontextmanager
    async def open(cls, path: Path | str, actor: Actor | None = None,
                   max_artifact_bytes: int = DEFAULT_MAX_ARTIFACT_BYTES) -> AsyncIterator[LocalKnowledgeStore]:
        """The store at `path`: a SQLite file, or a `postgresql://` URL (backend.py)."""
        async with open_database(path) as db:
            yield cls(db, actor or Actor.local(), max_artifact_bytes)

    def with_actor(self, actor: Actor) -> LocalKnowledgeStore:
        return LocalKnowledgeStore(self.db, actor, self.max_artifact_bytes)

    # ------------------------------------------------------------ helpers

    def provenance_values(self, project: str, at: str | None = None) -> dict[str, Any]:
        """The provenance columns of a row this actor writes now in `project`."""
        a = self.actor
        return {"project": project, "user": a.user, "client": a.client, "role": a.role,
                "team_version": a.team_version, "created_at": at or now()}

    def _project_filter(self, alias: str = "") -> tuple[str, list]:
        if self.actor.project is None:
            return "1 = 1", []
        col = f"{alias}.project" if alias else "project"
        return f"{col} = ?", [self.actor.project]

    async def visible_run_row(self, conn: aiosqlite.Connection, run_id: str) -> sqlite3.Row:
        """The run's row, if this actor may see it; NotFound otherwise."""
        async with conn.execute("SELECT * FROM runs WHERE id = ?", (run_id,)) as cur:
            row = await cur.fetchone()
        # A run outside the token's project is reported as missing: its existence is not shared.
        if row is None or not self._sees(row):
            raise missing("runs", run_id)
        return row

    def _sees(self, row: sqlite3.Row) -> bool:
        """Whether a row (every row carries its project) is within this actor's scope."""
        return self.actor.project is None or row["project"] == self.actor.project

    async def _index(self, conn: aiosqlite.Connection, kind: str, ref_id: str, run_id: str, project: str,
                     title: str, body: str) -> None:
        await conn.execute(
            "INSERT INTO search_index (title, body, filters, kind, ref_id, run_id, project) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (title, body[:100_000], index_filters(kind, run_id, project), kind, ref_id, run_id, project),
        )

    async def _replay(self, conn: aiosqlite.Connection, run: sqlite3.Row, kind: str, spec) -> str | None:
        """The id a previous write with the spec's idempotency key produced in this run, if any."""
        return await idempotency.replay(conn, run, kind, spec)

    async def _remember(self, conn: aiosqlite.Connection, run: sqlite3.Row, kind: str, spec, ref_id: str) -> None:
        await idempotency.remember(conn, run, kind, spec, ref_id, self.actor.user)

    async def _run_page(self, table: str, row_to_model, run_id: str, filters: dict[str, Any], limit: int,
                        cursor: str | None) -> Page:
        """One page of a run's rows of `table`, oldest first. `filters` maps SQL conditions to
        their parameter (None for a condition without one)."""
        limit, offset = page_limit(limit), decode_cursor(cursor)
        where = " AND ".join(["run_id = ?", *filters])
        params = [run_id, *(v for v in filters.values() if v is not None)]
        count_sql, page_sql = readsql.run_page(table, where)
        async with self.db.read() as conn:
            await self.visible_run_row(conn, run_id)
            async with conn.execute(count_sql, params) as cur:
                (total,) = await cur.fetchone()
            async with conn.execute(page_sql, [*params, limit, offset]) as cur:
                items = [row_to_model(r) for r in await cur.fetchall()]
        return page_of(items, total, offset, limit)

    # ------------------------------------------------------------ runs

    async def start_run(self, spec: RunCreate) -> Run:
        project = spec.project or self.actor.project or self.actor.default_project
        if self.actor.project is not None and project != self.actor.project:
            raise Forbidden(f"your token is limited to project {self.actor.project!r}; "
                            f"start the run there (omit project)")
        run_id = spec.run_id or new_id("run")
        async with self.db.write() as conn:
            async with conn.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)) as cur:
                if await cur.fetchone():
                    raise Invalid(f"run {run_id!r} exists already: use get_run, or pick another id")
            if spec.seeded_from is not None:
                await self.visible_run_row(conn, spec.seeded_from)
                await lineage.check_same_project(conn, "runs", spec.seeded_from, project, "seed run")
            await insert_row(conn, "runs", {
                "id": run_id, "goal": spec.goal, "kit": spec.kit, "direction": spec.direction,
                "x0": spec.x0, "best_known": spec.best_known, "budget_usd": spec.budget_usd,
                "status": "active", "seeded_from": spec.seeded_from, **self.provenance_values(project),
            })
        return await self.get_run(run_id)

    async def _run_view(self, conn: aiosqlite.Connection, row: sqlite3.Row) -> Run:
        # The same queries as the quick CLI reads (readsql.py).
        async with conn.execute(readsql.best_ranked(row["direction"]), (row["id"],)) as cur:
            best = await cur.fetchone()
        # Counts and spend: the counters the triggers keep (counters.py), one row whatever the run's size.
        async with conn.execute(readsql.COUNTERS, (row["id"],)) as cur:
            n_cand, n_learn, spent = await cur.fetchone() or (0, 0, 0.0)
        best_score = best["score"] if best else None
        leads = []  # single runs reading beyond a measured best: they rank after it (readsql.rank_order)
        if best is not None and not best["spread_unknown"]:
            async with conn.execute(readsql.leads_from_too_few_runs(row["direction"]), (row["id"], best_score)) as cur:
                leads = [Lead(candidate_id=r["id"], score=r["score"], runs=measurements.best_runs(r) or 1)
                         for r in await cur.fetchall()]
        return Run(
            id=row["id"], project=row["project"], goal=row["goal"], kit=row["kit"],
            direction=row["direction"], x0=row["x0"], best_known=row["best_known"],
            budget_usd=row["budget_usd"], status=row["status"], spent_usd=spent,
            best_score=best_score, best_candidate_id=best["id"] if best else None,
            best_interval=measurements.interval_of(best) if best else None,
            best_runs=measurements.best_runs(best) if best else None, leads_from_too_few_runs=leads,
            best_exact=True if best and best["score_lo"] == best["score_hi"] and measurements.every_run_alike(best)
            else None,
            ndg=normalised_discovery_gain(row["direction"], row["x0"], row["best_known"], best_score),
            candidates=n_cand, learnings=n_learn, current_version=row["current_version"],
            seeded_from=row["seeded_from"], status_reason=row["status_reason"], provenance=provenance_of(row),
        )

    async def get_run(self, run_id: str) -> Run:
        async with self.db.read() as conn:
            return await self._run_view(conn, await self.visible_run_row(conn, run_id))

    async def list_runs(self, status: RunStatus | None = None, limit: int = 20,
                        cursor: str | None = None) -> Page[Run]:
        limit, offset = page_limit(limit), decode_cursor(cursor)
        where, params = self._project_filter()
        if status:
            where += " AND status = ?"
            params.append(status)
        count_sql, page_sql = readsql.runs_listing(where)
        async with self.db.read() as conn:
            async with conn.execute(count_sql, params) as cur:
                (total,) = await cur.fetchone()
            async with conn.execute(page_sql, [*params, limit, offset]) as cur:
                rows = await cur.fetchall()
            items = [await self._run_view(conn, r) for r in rows]
        return page_of(items, total, offset, limit)

    async def update_run(self, run_id: str, status: RunStatus | None = None,
                         current_version: int | None = None, reason: str | None = None) -> Run:
        reason = lineage.clean_reason(reason)
        # Writes confined to one run name it as their scope: on PostgreSQL they then wait only for
        # that run's writers (pg.py). Each such method's checks (idempotency keys, superseding,
        # evidence, pooling identical code) read that run's rows, or rows no one changes once written.
        async with self.db.write(scope=run_id) as conn:
            row = await self.visible_run_row(conn, run_id)
            if status is not None and row["user"] != self.actor.user:
                # A colleague's run is theirs to end: a second engineer's finish_run overwrote the
                # owner's status and reason, and nothing said who had (model-play 2026-12-04).
                # What to do then comes first: a model told only to build on it in a run of its own
                # could start a stray run just to end its work (mp40).
                raise Forbidden(f"run {run_id} is {row['user']}'s: only its owner changes its status, so leave that "
                                "to them (what you recorded in it is kept); to go on with it yourself, build on it in a "
                                f"run of your own (knowledge.start_run with seed_from={run_id!r})")
            if status is not None:
                # A new status replaces the reason of the old one (a resumed run has none).
                await conn.execute("UPDATE runs SET status = ?, status_reason = ? WHERE id = ?",
                                   (status, reason, run_id))
            if current_version is not None:
                await conn.execute("UPDATE runs SET current_version = ? WHERE id = ?", (current_version, run_id))
        return await self.get_run(run_id)

    # ------------------------------------------------------------ learnings

    _learning = staticmethod(learning_of)

    async def _get_learning(self, conn: aiosqlite.Connection, learning_id: str) -> Learning:
        async with conn.execute("SELECT * FROM learnings WHERE id = ?", (learning_id,)) as cur:
            row = await cur.fetchone()
        if row is None or not self._sees(row):
            raise missing("learnings", learning_id)
        return self._learning(row)

    async def _check_evidence(self, conn: aiosqlite.Connection, run_id: str, evidence: list[str]) -> None:
        for ref in evidence:
            table = {"cand": "candidates", "art": "artifacts"}.get(ref.split("_", 1)[0])
            if table is None and ref.startswith("doc_"):
                # A document says what someone wrote; a learning records what was measured.
                raise Invalid(f"evidence {ref!r} is a retrieved document, not a measurement: cite the candidate "
                              f"you built from it (cand_..., whose record lists its documents_used) or an artifact")
            if table is None:
                raise Invalid(f"evidence {ref!r} is neither a candidate (cand_...) nor an artifact (art_...) id")
            async with conn.execute(f"SELECT run_id, project FROM {table} WHERE id = ?", (ref,)) as cur:
                row = await cur.fetchone()
            if row is None or not self._sees(row):  # another project's: as if it did not exist
                raise NotFound(f"evidence {ref!r} does not exist: cite a candidate or artifact of run {run_id!r}")
            if row["run_id"] != run_id:
                # A learning cites this run's measurements (an export carries them with it). Naming
                # it in the text costs nothing; a second engineer followed "measure it first" and
                # re-ran a colleague's program already run 15 times (model-play 2026-12-04).
                how = (f"or, to cite a measurement of your own, bench.evaluate it with candidate_id={ref!r} and "
                       f"run_id={run_id!r} and cite that" if table == "candidates"
                       else "or store a copy in this run (knowledge.put_artifact) and cite that")
                if table == "candidates" and (same := await self._same_code_in(conn, run_id, ref)):
                    how = f"or cite {same}, this run's candidate with the same code"
                raise NotFound(f"evidence {ref!r} is of run {row['run_id']!r}, not {run_id!r}: evidence holds this "
                               f"run's ids; name it in the text (\"{ref} of {row['run_id']}\"), {how}")

    @staticmethod
    async def _same_code_in(conn: aiosqlite.Connection, run_id: str, candidate_id: str) -> str | None:
        """A measured candidate of ``run_id`` with the code of ``candidate_id`` (another run's), if any."""
        async with conn.execute(
                "SELECT c.id FROM candidates c JOIN candidates o ON o.code_hash = c.code_hash "
                "WHERE o.id = ? AND c.run_id = ? AND c.verified = 1 AND c.code_hash IS NOT NULL "
                "ORDER BY c.created_at, c.id LIMIT 1", (candidate_id, run_id)) as cur:
            row = await cur.fetchone()
        return row["id"] if row else None

    async def add_learning(self, spec: LearningCreate) -> Learning:
        async with self.db.write(scope=spec.run_id) as conn:
            run = await self.visible_run_row(conn, spec.run_id)
            if (done := await self._replay(conn, run, "learning", spec)) is not None:
                return await self._get_learning(conn, done)
            await self._check_evidence(conn, spec.run_id, spec.evidence)
            if spec.supersedes is not None:
                old = await self._get_learning(conn, spec.supersedes)
                if old.run_id != spec.run_id:
                    raise Invalid("a learning can only supersede one of the same run")
                if old.superseded_by:
                    raise Invalid(f"{spec.supersedes} is already superseded by {old.superseded_by}; "
                                  f"supersede that one instead")
            learning_id = new_id("lrn")
            prov = self.provenance_values(run["project"])
            await insert_row(conn, "learnings", {
                "id": learning_id, "run_id": spec.run_id, "text": spec.text, "kind": spec.kind,
                "tags": json.dumps(spec.tags), "evidence": json.dumps(spec.evidence),
                "confidence": spec.confidence, "supersedes": spec.supersedes, **prov,
            })
            if spec.supersedes is not None:
                await conn.execute("UPDATE learnings SET superseded_by = ? WHERE id = ?",
                                   (learning_id, spec.supersedes))
            await self._index(conn, "learning", learning_id, spec.run_id, run["project"],
                              hits.learning_title(spec.kind, spec.tags, spec.text), spec.text)
            await self._remember(conn, run, "learning", spec, learning_id)
        # The row is exactly what was written: no need to read it back (the hottest write path).
        return Learning(id=learning_id, run_id=spec.run_id, text=spec.text, kind=spec.kind, tags=spec.tags,
                        evidence=spec.evidence, confidence=spec.confidence, supersedes=spec.supersedes,
                        provenance=Provenance(user=prov["user"], client=prov["client"], role=prov["role"],
                                              team_version=prov["team_version"],
                                              created_at=datetime.fromisoformat(prov["created_at"])))

    async def list_learnings(self, run_id: str, kind: LearningKind | None = None,
                             include_superseded: bool = False, limit: int = 50,
                             cursor: str | None = None) -> Page[Learning]:
        filters = {"kind = ?": kind} if kind else {}
        if not include_superseded:
            filters["superseded_by IS NULL"] = None
        return await self._run_page("learnings", self._learning, run_id, filters, limit, cursor)

    async def render_learnings(self, run_id: str, max_chars: int | None = None) -> LearningsDocument:
        async with self.db.read() as conn:
            run = await self.visible_run_row(conn, run_id)
            async with conn.execute(readsql.LEARNINGS_COUNT, (run_id,)) as cur:
                (total,) = await cur.fetchone() or (0,)
            draft = LearningsDraft(run_id, run["goal"], total, max_chars or 12_000, owner=run["user"])
            # Kind by kind, read no more rows than can still fit (index learnings_document).
            for kind in KIND_TITLES:
                room = draft.room()
                if not room:
                    break
                async with conn.execute(readsql.LEARNINGS_OF_KIND, (run_id, kind, room)) as cur:
                    draft.add(kind, [self._learning(r) for r in await cur.fetchall()])
        return draft.finish()

    # ------------------------------------------------------------ history

    _history = staticmethod(history_of)

    async def _get_history(self, conn: aiosqlite.Connection, entry_id: str) -> HistoryEntry:
        return await historystore.get_history(self, conn, entry_id)

    async def add_history(self, spec: HistoryEntryCreate) -> HistoryEntry:
        return await historystore.add_history(self, spec)

    async def list_history(self, run_id: str, limit: int = 50, cursor: str | None = None) -> Page[HistoryEntry]:
        return await self._run_page("history", self._history, run_id, {}, limit, cursor)

    async def render_history(self, run_id: str, max_chars: int | None = None) -> HistoryDocument:
        return await historystore.history_document(self, run_id, max_chars)

    # ------------------------------------------------------------ artifacts


    check_artifact_name = staticmethod(check_artifact_name)

    _artifact_info = staticmethod(artifact_info_of)

    async def _get_artifact_info(self, conn: aiosqlite.Connection, artifact_id: str) -> ArtifactInfo:
        async with conn.execute("SELECT * FROM artifacts WHERE id = ?", (artifact_id,)) as cur:
            row = await cur.fetchone()
        if row is None or not self._sees(row):
            raise missing("artifacts", artifact_id)
        return self._artifact_info(row)

    async def put_artifact(self, spec: ArtifactCreate) -> ArtifactInfo:
        self.check_artifact_name(spec.name)
        check_may_store(spec.kind, self.actor.verifier)
        data, is_text = artifact_content(spec, self.max_artifact_bytes)
        digest = hashlib.sha256(data).hexdigest()
        async with self.db.write(scope=spec.run_id) as conn:
            run = await self.visible_run_row(conn, spec.run_id)
            if (done := await self._replay(conn, run, "artifact", spec)) is not None:
                return await self._get_artifact_info(conn, done)
            await conn.execute("INSERT OR IGNORE INTO blobs (sha256, size, data) VALUES (?, ?, ?)",
                               (digest, len(data), data))
            artifact_id = new_id("art")
            await insert_row(conn, "artifacts", {
                "id": artifact_id, "run_id": spec.run_id, "name": spec.name, "kind": spec.kind,
                "sha256": digest, "size": len(data), "is_text": int(is_text), **self.provenance_values(run["project"]),
            })
            await self._index(conn, "artifact", artifact_id, spec.run_id, run["project"],
                              f"{spec.kind}: {spec.name}", spec.text if is_text else "")
            await self._remember(conn, run, "artifact", spec, artifact_id)
            return await self._get_artifact_info(conn, artifact_id)

    async def get_artifact(self, artifact_id: str) -> Artifact:
        async with self.db.read() as conn:
            info = await self._get_artifact_info(conn, artifact_id)
            async with conn.execute("SELECT data FROM blobs WHERE sha256 = ?", (info.sha256,)) as cur:
                (data,) = await cur.fetchone()
        if info.is_text:
            return Artifact(**info.model_dump(), text=bytes(data).decode("utf-8"))
        return Artifact(**info.model_dump(), content_base64=base64.b64encode(data).decode())

    async def list_artifacts(self, run_id: str, kind: str | None = None, limit: int = 50,
                             cursor: str | None = None) -> Page[ArtifactInfo]:
        return await self._run_page("artifacts", self._artifact_info, run_id, {"kind = ?": kind} if kind else {},
                                    limit, cursor)

    # ------------------------------------------------------------ candidates

    _summary = staticmethod(candidate_summary_of)

    _candidate = staticmethod(candidate_of)

    async def _get_candidate(self, conn: aiosqlite.Connection, candidate_id: str) -> Candidate:
        async with conn.execute("SELECT * FROM candidates WHERE id = ?", (candidate_id,)) as cur:
            row = await cur.fetchone()
        if row is None or not self._sees(row):
            raise missing("candidates", candidate_id)
        return self._candidate(row)

    async def record_candidate(self, spec: CandidateCreate) -> Candidate:
        if spec.code is None and spec.artifact_id is None:
            raise Invalid("a candidate needs its code or an artifact_id holding it")
        check_may_verify(spec.verified, self.actor.verifier)
        if spec.code:  # the store's own rule, whatever a caller (an older bench, a script) computed
            spec = spec.model_copy(update={"code_hash": code_hash(spec.code)})
        async with self.db.write(scope=spec.run_id) as conn:
            run = await self.visible_run_row(conn, spec.run_id)
            if (done := await self._replay(conn, run, "candidate", spec)) is not None:
                return await self._get_candidate(conn, done)
            if spec.parent_id is not None:  # any run of the same project (lineage.py)
                await self._get_candidate(conn, spec.parent_id)
                await lineage.check_same_project(conn, "candidates", spec.parent_id, run["project"], "parent")
            if spec.artifact_id is not None:
                art = await self._get_artifact_info(conn, spec.artifact_id)
                if art.run_id != spec.run_id:
                    raise Invalid(f"artifact {spec.artifact_id} belongs to another run")
            same = await pooling.find_same_code(conn, spec, run["direction"])
            if same is not None:  # identical code: one more measurement of that candidate
                await pooling.pool(conn, same, spec, run["direction"], self.provenance_values(run["project"]))
                await self._remember(conn, run, "candidate", spec, same["id"])
                return await self._get_candidate(conn, same["id"])
            candidate_id = new_id("cand")
            # Off the event loop: the interval is a bootstrap over the candidate's rounds.
            measured = await asyncio.to_thread(measurements.columns, spec, run["direction"])
            await insert_row(conn, "candidates", {
                "id": candidate_id, "run_id": spec.run_id, "code": spec.code, "artifact_id": spec.artifact_id,
                "status": spec.status, "score": spec.score, "split": spec.split,
                "metrics": json.dumps(spec.metrics, default=str),
                "workloads": json.dumps([w.model_dump() for w in spec.workloads]),
                "parent_id": spec.parent_id, "documents_used": json.dumps(spec.documents_used),
                "notes": spec.notes, "flagged": int(spec.flagged), "verified": int(spec.verified),
                "cost_usd": spec.cost_usd, **self.provenance_values(run["project"]),
                **measured,
            })
            await self._index(conn, "candidate", candidate_id, spec.run_id, run["project"],
                              hits.candidate_title(spec.status, measured["score"], measured["score_lo"],
                                                   measured["score_hi"],
                                                   spread_unknown=bool(measured["spread_unknown"])), spec.notes)
            await self._remember(conn, run, "candidate", spec, candidate_id)
            return await self._get_candidate(conn, candidate_id)

    async def get_candidate(self, candidate_id: str) -> Candidate:
        async with self.db.read() as conn:
            return await self._get_candidate(conn, candidate_id)

    async def list_candidates(self, run_id: str, limit: int = 50,
                              cursor: str | None = None) -> Page[CandidateSummary]:
        return await self._run_page("candidates", self._summary, run_id, {}, limit, cursor)

    async def best_candidates(self, run_id: str, k: int = 5,
                              split: Literal["dev", "heldout", "all"] | None = None) -> list[CandidateSummary]:
        k = page_limit(k)
        async with self.db.read() as conn:
            run = await self.visible_run_row(conn, run_id)
            where, params = f"run_id = ? AND {RANKED}", [run_id]
            if split != "all":  # by default the dev split: a held-out score is on other workloads
                where += " AND split = ?"
                params.append(split or "dev")
            async with conn.execute(
                f"SELECT * FROM candidates WHERE {where} ORDER BY {readsql.rank_order(run['direction'])} "
                "LIMIT ?", [*params, k]
            ) as cur:
                return [self._summary(r) for r in await cur.fetchall()]

    async def trajectory(self, run_id: str) -> Trajectory:
        """Every dev candidate in order, the best so far and the new bests: standing.trajectory_points."""
        async with self.db.read() as conn:
            run = await self.visible_run_row(conn, run_id)
            async with conn.execute(
                "SELECT id, created_at, score, score_lo, score_hi, rank_score, spread_unknown, n_measurements, "
                "contended_measurements, code_hash, notes, status, verified, flagged, role, team_version, "
                f"{readsql.POINT_SAMPLES}, {readsql.KERNEL_ROUNDS}, {readsql.STYLE_CODE} FROM candidates "
                "WHERE run_id = ? AND split = 'dev' ORDER BY created_at, id", (run_id,)
            ) as cur:
                rows = await cur.fetchall()
        direction = run["direction"]
        points, best = await comparisons.trajectory_with_pairs(self, run_id, run["kit"], rows, direction, run["x0"])
        best_score = best["score"] if best is not None else None
        return Trajectory(run_id=run_id, direction=direction, points=points, best_score=best_score,
                          best_interval=measurements.interval_of(best) if best is not None else None,
                          best_runs=measurements.runs_if_unknown(best) if best is not None else None,
                          ndg=normalised_discovery_gain(direction, run["x0"], run["best_known"], best_score))

    # ------------------------------------------------------------ costs

    _cost = staticmethod(cost_of)

    async def record_cost(self, spec: CostCreate) -> CostEntry:
        async with self.db.write(scope=spec.run_id) as conn:
            run = await self.visible_run_row(conn, spec.run_id)
            done = await self._replay(conn, run, "cost", spec)
            if done is None:
                done = new_id("cost")
                await insert_row(conn, "costs", {
                    "id": done, "run_id": spec.run_id, "usd": spec.usd, "source": spec.source,
                    "detail": json.dumps(spec.detail, default=str), **self.provenance_values(run["project"]),
                })
                await self._remember(conn, run, "cost", spec, done)
            async with conn.execute("SELECT * FROM costs WHERE id = ?", (done,)) as cur:
                return self._cost(await cur.fetchone())

    async def list_costs(self, run_id: str) -> list[CostEntry]:
        async with self.db.read() as conn:
            await self.visible_run_row(conn, run_id)
            async with conn.execute("SELECT * FROM costs WHERE run_id = ? ORDER BY created_at, id", (run_id,)) as cur:
                return [self._cost(r) for r in await cur.fetchall()]

    async def spend(self, run_id: str) -> Spend:
        async with self.db.read() as conn:
            run = await self.visible_run_row(conn, run_id)
            # One maintained line per role and team version (knowledge/counters.py), not every cost.
            async with conn.execute(readsql.SPEND_LINES, (run_id,)) as cur:
                lines = [SpendLine(role=r["role"], team_version=r["team_version"], usd=r["usd"])
                         for r in await cur.fetchall()]
        spent = sum(line.usd for line in lines)
        budget = run["budget_usd"]
        return Spend(run_id=run_id, budget_usd=budget, spent_usd=spent,
                     left_usd=None if budget is None else max(0.0, budget - spent), lines=lines)

    # ------------------------------------------------------------ search

    async def search(self, query: str, run_id: str | None = None, kinds: list[SearchKind] | None = None,
                     limit: int = 10, cursor: str | None = None) -> SearchPage:
        # The same search on either backend, each with its own full-text machinery.
        backend = pgsearch if self.db.dialect == "postgres" else localsearch
        return await backend.search(self, query, run_id, kinds, limit, cursor)

    # ------------------------------------------------------------ import

    async def import_bundle(self, bundle: RunBundle, project: str | None = None, trust_scores: bool = False) -> Run:
        """Restore an exported run with its ids and provenance (bundleimport.py). Local only:
        provenance is taken from the bundle, which a remote caller must not be able to forge."""
        return await bundleimport.import_bundle(self, bundle, project, trust_scores)
