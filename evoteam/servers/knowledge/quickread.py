"""Quick reads of a local store file for the command line, with the standard library's sqlite3.

`evoteam kb runs` through the store costs pydantic, asyncio and aiosqlite before the first row
(about 0.3 s of a 0.4 s answer); a newcomer's first commands should answer within 0.2 s
(issue 24). So the plain-text listings read the file here instead — with the store's own
queries (readsql.py), so both paths see the same rows in the same order — and hand the printer
rows with the attributes of the store's models (`SimpleNamespace`, not a second set of models).

A quick read answers only when it can answer exactly as the store would: a local SQLite file
(no shared server, no PostgreSQL URL), which exists, opens read-only and carries exactly the
schema this evoteam writes (an older one the store would migrate first; a newer one it would
refuse). Otherwise, and on any SQLite error, it returns None and the command takes the normal
path, which also gives the usual messages (a missing run, a damaged file).
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace

from evoteam.configsource import is_store_url
from evoteam.servers.knowledge import readsql

# The schema version of every component this evoteam writes (db.py's registered migrations).
# tests/test_cli_quick.py keeps it equal to the registry; a file at other versions
# takes the normal path, so a stale entry costs speed, never a wrong answer.
SCHEMA_VERSIONS = {
    "knowledge": 1, "knowledge.counters": 1, "knowledge.idempotency": 2, "knowledge.lineage": 1,
    "knowledge.measurements": 8, "knowledge.search": 2, "knowledge.sessions": 1, "knowledge.verified": 3,
    "retrieval": 1, "retrieval.search": 1, "team": 1,
}

# Turn the quick reads off (=0), e.g. to compare them with the normal path.
ENV_SWITCH = "EVOTEAM_QUICK_READS"


def store_file(values: dict, file_only: bool = False) -> Path | None:
    """The SQLite file the settings `values` (configsource.setting_values) name, when a quick
    read may serve them: no database URL, and no shared knowledge server unless the read is of
    the file itself whatever server is set (`file_only`: the tokens)."""
    if os.environ.get(ENV_SWITCH, "1") == "0" or (values.get("knowledge_url") and not file_only):
        return None
    db = values.get("db")
    if not isinstance(db, (str, Path)) or is_store_url(db):
        return None
    path = Path(db)
    return path if path.is_file() and path.stat().st_size > 0 else None


@contextmanager
def _connect(path: Path) -> Iterator[sqlite3.Connection]:
    # as_uri() escapes '#', '?' and '%', which SQLite would read as URI syntax (a store under
    # "proj#2/" opened "proj" read-write instead)
    conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True, isolation_level=None)
    try:
        conn.row_factory = sqlite3.Row
        versions = dict(conn.execute("SELECT component, version FROM schema_versions").fetchall())
        if versions != SCHEMA_VERSIONS:
            raise NotQuick
        yield conn
    finally:
        conn.close()


class NotQuick(Exception):
    """Raised inside a read: this read must take the normal path."""


def read(values: dict, body, file_only: bool = False):
    """`body(conn)` on a read-only connection to the settings' store file, in one snapshot; None
    when a quick read cannot answer (see the module's docstring) or `body` raises NotQuick."""
    path = store_file(values, file_only)
    if path is None:
        return None
    try:
        with _connect(path) as conn:
            conn.execute("BEGIN")  # one snapshot for every query of the read, as the store's reader
            return body(conn)
    except (NotQuick, sqlite3.Error):
        return None


def _provenance(row: sqlite3.Row) -> SimpleNamespace:
    # Fields of models.Provenance, read as store.provenance_of reads them.
    return SimpleNamespace(user=row["user"], client=row["client"], role=row["role"],
                           team_version=row["team_version"], created_at=datetime.fromisoformat(row["created_at"]))


def _run_exists(conn: sqlite3.Connection, run_id: str) -> bool:
    return conn.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is not None


def run_row(conn: sqlite3.Connection, run_id: str) -> sqlite3.Row:
    """The run's row; NotQuick when there is none (the store then says so)."""
    row = conn.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
    if row is None:
        raise NotQuick
    return row


def run_view(conn: sqlite3.Connection, row: sqlite3.Row) -> SimpleNamespace:
    """A run as `LocalKnowledgeStore._run_view` makes it (the fields of models.Run)."""
    best = conn.execute(readsql.best_ranked(row["direction"]), (row["id"],)).fetchone()
    n_cand, n_learn, spent = conn.execute(readsql.COUNTERS, (row["id"],)).fetchone() or (0, 0, 0.0)
    best_score = best["score"] if best else None
    return SimpleNamespace(
        id=row["id"], project=row["project"], goal=row["goal"], kit=row["kit"], direction=row["direction"],
        status=row["status"], budget_usd=row["budget_usd"], current_version=row["current_version"],
        best_score=best_score, best_candidate_id=best["id"] if best else None,
        best_interval=[best["score_lo"], best["score_hi"]] if best and best["score_lo"] is not None
        and best["score_hi"] is not None else None, best_spread_unknown=bool(best and best["spread_unknown"]),
        ndg=readsql.normalised_discovery_gain(row["direction"], row["x0"], row["best_known"], best_score),
        candidates=n_cand, learnings=n_learn, spent_usd=spent, provenance=_provenance(row))


def runs(values: dict, status: str | None = None, limit: int = 200) -> list[SimpleNamespace] | None:
    """The newest `limit` runs (with `status`), as `LocalKnowledgeStore.list_runs` lists them
    for a local caller (no project scope); None: take the normal path."""

    def body(conn):
        where, params = "1 = 1", []
        if status:
            where += " AND status = ?"
            params.append(status)
        page_sql = readsql.runs_listing(where)[1]
        out = [run_view(conn, row) for row in conn.execute(page_sql, [*params, limit, 0]).fetchall()]
        return out

    return read(values, body)


def _run_rows(values: dict, table: str, run_id: str, shape) -> list[SimpleNamespace] | None:
    """Every row of a run's `table`, oldest first, as the store's `list_*` pages them; None for
    a run that is not there (the store then says so)."""

    def body(conn):
        if not _run_exists(conn, run_id):
            raise NotQuick
        page_sql = readsql.run_page(table, "run_id = ?")[1]
        return [shape(r) for r in conn.execute(page_sql, (run_id, -1, 0)).fetchall()]  # LIMIT -1: every row

    return read(values, body)


def candidates(values: dict, run_id: str) -> list[SimpleNamespace] | None:
    """A run's candidates (the fields of models.CandidateSummary the listing prints)."""
    return _run_rows(values, "candidates", run_id, lambda r: SimpleNamespace(
        id=r["id"], run_id=r["run_id"], status=r["status"], score=r["score"], split=r["split"],
        parent_id=r["parent_id"], flagged=bool(r["flagged"]), verified=bool(r["verified"]),
        score_interval=[r["score_lo"], r["score_hi"]] if r["score_lo"] is not None and r["score_hi"] is not None
        else None, n_measurements=r["n_measurements"] or 1, spread_unknown=bool(r["spread_unknown"]),
        provenance=_provenance(r)))


def history(values: dict, run_id: str) -> list[SimpleNamespace] | None:
    """A run's evolution history (the fields of models.HistoryEntry)."""
    return _run_rows(values, "history", run_id, lambda r: SimpleNamespace(
        id=r["id"], run_id=r["run_id"], team_version=r["team_version"],
        observed_behaviour=r["observed_behaviour"], diagnosis=r["diagnosis"], design_change=r["design_change"],
        outcome=r["outcome"], provenance=_provenance(r)))


def learnings_markdown(values: dict, run_id: str, max_chars: int = 12_000) -> str | None:
    """The run's learnings document, as `LocalKnowledgeStore.render_learnings` writes it."""
    from evoteam.servers.knowledge.learningsdoc import KIND_TITLES, LearningsDraft

    def body(conn):
        run = run_row(conn, run_id)
        (total,) = conn.execute(readsql.LEARNINGS_COUNT, (run_id,)).fetchone() or (0,)
        draft = LearningsDraft(run_id, run["goal"], total, max_chars, owner=run["user"])
        for kind in KIND_TITLES:  # kind by kind, no more rows than can still fit, as the store reads
            room = draft.room()
            if not room:
                break
            draft.add(kind, [SimpleNamespace(id=r["id"], text=r["text"], confidence=r["confidence"],
                                             tags=json.loads(r["tags"]), evidence=json.loads(r["evidence"]),
                                             provenance=_provenance(r))
                             for r in conn.execute(readsql.LEARNINGS_OF_KIND, (run_id, kind, room)).fetchall()])
        return draft.markdown()

    return read(values, body)


def spent(conn: sqlite3.Connection, run_id: str) -> float:
    """A run's spend as `LocalKnowledgeStore.spend` sums it."""
    return sum(r["usd"] for r in conn.execute(readsql.SPEND_LINES, (run_id,)).fetchall())


def tokens(values: dict) -> list[SimpleNamespace] | None:
    """The store file's tokens (the fields of auth.TokenInfo; never their values)."""

    def body(conn):
        return [SimpleNamespace(id=r["id"], user=r["user"], project=r["project"], verifier=bool(r["verifier"]),
                                created_at=datetime.fromisoformat(r["created_at"]),
                                revoked_at=datetime.fromisoformat(r["revoked_at"]) if r["revoked_at"] else None)
                for r in conn.execute(readsql.TOKENS).fetchall()]

    return read(values, body, file_only=True)
