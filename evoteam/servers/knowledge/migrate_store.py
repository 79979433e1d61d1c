"""Move a whole store between backends (SQLite file <-> PostgreSQL database), verified.

`evoteam kb migrate-store SRC DST` is the path a team takes when it outgrows the file (and back).
Both ends are opened as stores, so each has its current schema; the destination must hold no
rows. Every table of every component is copied row by row inside one write transaction of the
destination (nothing of a failed copy stays), then verified: per table, the number of rows and
an order-independent hash of their values must be equal on both sides. The counters the
database keeps (run_counters, run_spend) are not copied: the destination's triggers rebuild
them from the rows (on PostgreSQL computed once after the copy), and they are verified like
the rest.

What is not copied, by design: the schema bookkeeping (each end has its own), SQLite's FTS5
shadow tables and the columns each backend makes for itself (FTS rowids, serial keys, the
tsvector), which the destination rebuilds as the rows arrive.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel

from evoteam.servers.knowledge import counters
from evoteam.servers.knowledge.backend import describe_location, open_database
from evoteam.servers.knowledge.errors import Invalid, NotFound, StoreFailure
from evoteam.servers.knowledge.pg import is_postgres_url

# Parents before children (foreign keys hold row by row on PostgreSQL); tables not named here
# (a component added later) follow in name order.
ORDER = ["runs", "blobs", "artifacts", "candidates", "learnings", "history", "costs", "idempotency",
         "idempotency_keys", "tokens", "search_index", "team_versions", "role_sessions", "supervisor_wakes",
         "retrieval_documents", "retrieval_documents_fts", "retrieval_gates", "retrieval_gate_documents",
         "retrieval_searches", "retrieval_queries", "retrieval_hits", "retrieval_predictions", "retrieval_outcomes",
         "retrieval_outcome_documents"]
DERIVED = {"run_counters", "run_spend"}  # kept by the destination's triggers; verified, not copied
# The counters' triggers on PostgreSQL (knowledge/pgschema.py), per table.
PG_COUNTER_TRIGGERS = [("runs", "run_counters_run"), ("candidates", "run_counters_candidate"),
                       ("history", "run_counters_history"), ("learnings", "run_counters_learning"),
                       ("costs", "run_counters_cost")]
SKIP = {"schema_versions"}
# Links to a later row of the same table: written after every row exists.
LATE_LINKS = {"learnings": ["superseded_by"]}
# Columns each backend makes for itself.
OWN_COLUMNS = {"id": {"search_index", "retrieval_documents_fts"}, "seq": {"retrieval_hits"}, "tsv": None}
BATCH = 500


class TableCheck(BaseModel):
    table: str
    rows: int
    sha256: str


class MigrateReport(BaseModel):
    source: str
    destination: str
    tables: list[TableCheck]

    @property
    def total_rows(self) -> int:
        return sum(t.rows for t in self.tables)


async def _tables(conn) -> list[str]:
    if conn_dialect(conn) == "postgres":
        sql = "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
    else:
        sql = ("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
               "AND name NOT LIKE '%\\_data' ESCAPE '\\' AND name NOT LIKE '%\\_idx' ESCAPE '\\' "
               "AND name NOT LIKE '%\\_docsize' ESCAPE '\\' AND name NOT LIKE '%\\_config' ESCAPE '\\' "
               "AND name NOT LIKE '%\\_content' ESCAPE '\\'")
    async with conn.execute(sql) as cur:
        names = {r[0] for r in await cur.fetchall()} - SKIP
    known = [t for t in ORDER if t in names]
    return known + sorted(names - set(ORDER) - DERIVED) + sorted(names & DERIVED)


def conn_dialect(conn) -> str:
    return getattr(conn, "dialect", "sqlite")


async def _columns(conn, table: str) -> list[str]:
    if conn_dialect(conn) == "postgres":
        sql = ("SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
               "AND table_name = ? ORDER BY ordinal_position")
        async with conn.execute(sql, (table,)) as cur:
            cols = [r[0] for r in await cur.fetchall()]
    else:
        async with conn.execute(f"SELECT * FROM {table} LIMIT 0") as cur:
            cols = [d[0] for d in cur.description]
    return [c for c in cols if not (c in OWN_COLUMNS and (OWN_COLUMNS[c] is None or table in OWN_COLUMNS[c]))]


def _order(conn, table: str, cols: list[str]) -> str:
    own = "id" if table in OWN_COLUMNS["id"] else "seq" if table in OWN_COLUMNS["seq"] else None
    if conn_dialect(conn) == "postgres":
        key = own or ("created_at" if "created_at" in cols else None)
        return f" ORDER BY {key}" + (", id" if key == "created_at" and "id" in cols else "") if key else ""
    if "created_at" in cols and not own:
        return " ORDER BY created_at" + (", id" if "id" in cols else "") + ", rowid"
    return " ORDER BY rowid"


def _canonical(value, derived: bool):
    if isinstance(value, (bytes, memoryview)):
        return {"b": bytes(value).hex()}
    if isinstance(value, float):
        # Derived sums may add the same terms in another order: compare them to 1e-9.
        return round(value, 9) if derived else repr(value)
    return value


class _Digest:
    """An order-independent hash of a multiset of rows (the sum of the rows' own hashes)."""

    def __init__(self) -> None:
        self.total, self.rows = 0, 0

    def add(self, cols: list[str], row, derived: bool = False) -> None:
        text = json.dumps([_canonical(row[i], derived) for i in range(len(cols))], separators=(",", ":"))
        self.total = (self.total + int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest(), "big")) % (1 << 256)
        self.rows += 1

    def hexdigest(self) -> str:
        return f"{self.total:064x}"


async def _digest(db, table: str, cols: list[str]) -> TableCheck:
    digest = _Digest()
    async with db.read() as conn:
        async with conn.execute(f"SELECT {', '.join(cols)} FROM {table}") as cur:
            for row in await cur.fetchall():
                digest.add(cols, row, derived=table in DERIVED)
    return TableCheck(table=table, rows=digest.rows, sha256=digest.hexdigest())


async def migrate_store(source: str | Path, destination: str | Path,
                        progress: Callable[[str, int], None] | None = None) -> MigrateReport:
    """Copy the store at `source` into the empty store at `destination`, then verify it."""
    if not is_postgres_url(source) and not Path(source).is_file():
        raise NotFound(f"no store at {source}: give an existing SQLite file or a postgresql:// URL")
    if str(source) == str(destination):
        raise Invalid("the source and the destination are the same store")
    async with open_database(source) as src, open_database(destination) as dst:
        async with src.read() as sconn:
            tables = await _tables(sconn)
            columns = {t: await _columns(sconn, t) for t in tables}
            orders = {t: _order(sconn, t, columns[t]) for t in tables}
        async with dst.read() as dconn:
            dst_tables = set(await _tables(dconn))
            for table in tables:
                if table not in dst_tables:
                    raise Invalid(f"the destination has no table {table}: upgrade evoteam where it runs, "
                                  f"or migrate with the same version on both ends")
                mine = set(await _columns(dconn, table))
                if missing := [c for c in columns[table] if c not in mine]:
                    raise Invalid(f"the destination's {table} lacks {', '.join(missing)}: the two ends are "
                                  f"on different evoteam versions")
                async with dconn.execute(f"SELECT 1 FROM {table} LIMIT 1") as cur:
                    if await cur.fetchone():
                        raise Invalid(f"the destination {describe_location(destination)} holds data already "
                                      f"({table}); migrate-store fills an empty store only")
        copied = [t for t in tables if t not in DERIVED]
        async with dst.write() as wconn:
            # On PostgreSQL a counter trigger updating one run's row once per copied row, all in
            # one transaction, walks an ever longer chain of that row's versions (quadratic:
            # 40k rows took 62 s); the triggers are off during the copy (inside the transaction,
            # so a failed copy leaves them on) and the counters are computed from the rows after.
            rebuild = conn_dialect(wconn) == "postgres"
            if rebuild:
                for table, trigger in PG_COUNTER_TRIGGERS:
                    await wconn.execute(f"ALTER TABLE {table} DISABLE TRIGGER {trigger}")
            for table in copied:
                await _copy(src, wconn, table, columns[table], orders[table], progress)
            if rebuild:
                for table, trigger in PG_COUNTER_TRIGGERS:
                    await wconn.execute(f"ALTER TABLE {table} ENABLE TRIGGER {trigger}")
                for statement in counters.REBUILD:
                    await wconn.execute(statement)
        report = []
        for table in tables:
            mine, theirs = await _digest(src, table, columns[table]), await _digest(dst, table, columns[table])
            if (mine.rows, mine.sha256) != (theirs.rows, theirs.sha256):
                raise StoreFailure(f"verification failed for {table}: {mine.rows} rows at the source, "
                                   f"{theirs.rows} at the destination, or their contents differ; the destination "
                                   f"must be dropped and the migration run again")
            report.append(mine)
    return MigrateReport(source=describe_location(source), destination=describe_location(destination),
                         tables=report)


async def _copy(src, wconn, table: str, cols: list[str], order: str,
                progress: Callable[[str, int], None] | None) -> None:
    late = [c for c in LATE_LINKS.get(table, []) if c in cols]
    insert = f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)})"
    late_idx = [cols.index(c) for c in late]
    links: list[tuple] = []
    done = 0
    async with src.read() as sconn:
        async with sconn.execute(f"SELECT {', '.join(cols)} FROM {table}{order}") as cur:
            rows = await cur.fetchall()
    for start in range(0, len(rows), BATCH):
        batch = []
        for row in rows[start:start + BATCH]:
            values = list(row)
            if late:
                if any(values[i] is not None for i in late_idx):
                    links.append((*[values[i] for i in late_idx], values[cols.index("id")]))
                for i in late_idx:
                    values[i] = None
            batch.append(values)
        await wconn.executemany(insert, batch)
        done += len(batch)
        if progress:
            progress(table, done)
    if links:
        setter = ", ".join(f"{c} = ?" for c in late)
        await wconn.executemany(f"UPDATE {table} SET {setter} WHERE id = ?", links)
