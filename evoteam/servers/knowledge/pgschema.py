"""PostgreSQL forms of the knowledge store's migrations that the dialect rewrite cannot carry.

- knowledge v1: the full-text index. SQLite's is an FTS5 virtual table; here it is a table with
  the same columns (so `_index` writes it with the same statement), a generated `tsv` column
  (title weighted above body; English stemming and no stopwords, as FTS5's porter tokenizer) under a GIN
  index, and an `id` that orders entries oldest to newest as FTS5's rowid does.
- knowledge.counters v1: the counters' triggers, as PL/pgSQL functions with the same rules.
- knowledge.search v1: the GIN index without a pending list (see `no_pending_list`).
- knowledge.search v2: the GIN index rebuilt over `tsv` plus a bucket lexeme per 16,384 ids
  (see `BUCKETED_TSV`), so a search can read the newest buckets of a common word's posting list;
  built concurrently, outside the migration's transaction, then swapped in inside it.
"""

from __future__ import annotations

import sys
import time

from evoteam.servers.knowledge import counters, schema
from evoteam.servers.knowledge.migrations import OutsideTransaction, register_migrations, register_postgres_form
from evoteam.servers.knowledge.dialect import to_postgres

_FTS5_START = "CREATE VIRTUAL TABLE search_index USING fts5("

# English stemming without a stopword list: FTS5's porter tokenizer drops no word, so neither
# does this configuration (a query of common words still finds its entries).
TEXT_SEARCH = """
CREATE TEXT SEARCH DICTIONARY evoteam_stem (TEMPLATE = snowball, Language = english);
CREATE TEXT SEARCH CONFIGURATION evoteam (COPY = english);
ALTER TEXT SEARCH CONFIGURATION evoteam ALTER MAPPING FOR asciiword, word, numword, asciihword, hword, numhword,
    hword_asciipart, hword_part, hword_numpart WITH evoteam_stem;
"""

SEARCH_INDEX = TEXT_SEARCH + """
CREATE TABLE search_index (
    id BIGSERIAL PRIMARY KEY,
    title TEXT NOT NULL DEFAULT '',
    body TEXT NOT NULL DEFAULT '',
    filters TEXT NOT NULL DEFAULT '',
    kind TEXT NOT NULL,
    ref_id TEXT NOT NULL,
    run_id TEXT,
    project TEXT NOT NULL,
    tsv tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('evoteam', coalesce(title, '')), 'A') ||
        setweight(to_tsvector('evoteam', coalesce(body, '')), 'B')) STORED
);
CREATE INDEX search_index_tsv ON search_index USING GIN (tsv);
CREATE INDEX search_index_project ON search_index (project, id);
CREATE INDEX search_index_run ON search_index (run_id, id);
CREATE INDEX search_index_ref ON search_index (ref_id);
"""


def _knowledge_v1() -> str:
    text = schema.V1
    start = text.index(_FTS5_START)
    end = text.index(");", start) + 2
    return to_postgres(text[:start] + text[end:], params=False, ddl=True) + SEARCH_INDEX


# The counters' rules (counters.py), one function per table; `bump` is the shared upsert.
COUNTERS_V1_TRIGGERS = """
CREATE FUNCTION evoteam_bump(p_run TEXT, p_c INTEGER, p_l INTEGER, p_h INTEGER, p_usd DOUBLE PRECISION)
RETURNS void LANGUAGE sql AS $$
    INSERT INTO run_counters (run_id, candidates, learnings, history, spent_usd)
    VALUES (p_run, p_c, p_l, p_h, p_usd)
    ON CONFLICT (run_id) DO UPDATE SET candidates = run_counters.candidates + excluded.candidates,
        learnings = run_counters.learnings + excluded.learnings, history = run_counters.history + excluded.history,
        spent_usd = run_counters.spent_usd + excluded.spent_usd;
$$;

CREATE FUNCTION evoteam_spend_line(p_run TEXT, p_role TEXT, p_version INTEGER, p_usd DOUBLE PRECISION,
                                   p_n INTEGER)
RETURNS void LANGUAGE sql AS $$
    INSERT INTO run_spend (run_id, role_key, version_key, role, team_version, usd, n)
    VALUES (p_run, CASE WHEN p_role IS NULL THEN '' ELSE 'r' || p_role END, coalesce(p_version, -1), p_role,
            p_version, p_usd, p_n)
    ON CONFLICT (run_id, role_key, version_key) DO UPDATE SET usd = run_spend.usd + excluded.usd,
        n = run_spend.n + excluded.n;
$$;

CREATE FUNCTION evoteam_counters_runs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO run_counters (run_id) VALUES (NEW.id) ON CONFLICT DO NOTHING;
        RETURN NEW;
    END IF;
    DELETE FROM run_counters WHERE run_id = OLD.id;
    DELETE FROM run_spend WHERE run_id = OLD.id;
    RETURN OLD;
END $$;
CREATE TRIGGER run_counters_run AFTER INSERT OR DELETE ON runs
    FOR EACH ROW EXECUTE FUNCTION evoteam_counters_runs();

CREATE FUNCTION evoteam_counters_candidates() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN PERFORM evoteam_bump(NEW.run_id, 1, 0, 0, 0); RETURN NEW; END IF;
    PERFORM evoteam_bump(OLD.run_id, -1, 0, 0, 0);
    RETURN OLD;
END $$;
CREATE TRIGGER run_counters_candidate AFTER INSERT OR DELETE ON candidates
    FOR EACH ROW EXECUTE FUNCTION evoteam_counters_candidates();

CREATE FUNCTION evoteam_counters_history() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN PERFORM evoteam_bump(NEW.run_id, 0, 0, 1, 0); RETURN NEW; END IF;
    PERFORM evoteam_bump(OLD.run_id, 0, 0, -1, 0);
    RETURN OLD;
END $$;
CREATE TRIGGER run_counters_history AFTER INSERT OR DELETE ON history
    FOR EACH ROW EXECUTE FUNCTION evoteam_counters_history();

-- Only current (not superseded) learnings count; superseding, or an import restoring links,
-- moves a learning out of the current ones.
CREATE FUNCTION evoteam_counters_learnings() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.superseded_by IS NULL THEN PERFORM evoteam_bump(NEW.run_id, 0, 1, 0, 0); END IF;
        RETURN NEW;
    ELSIF TG_OP = 'DELETE' THEN
        IF OLD.superseded_by IS NULL THEN PERFORM evoteam_bump(OLD.run_id, 0, -1, 0, 0); END IF;
        RETURN OLD;
    END IF;
    IF (OLD.superseded_by IS NULL) <> (NEW.superseded_by IS NULL) OR OLD.run_id <> NEW.run_id THEN
        PERFORM evoteam_bump(OLD.run_id, 0, -(OLD.superseded_by IS NULL)::int, 0, 0);
        PERFORM evoteam_bump(NEW.run_id, 0, (NEW.superseded_by IS NULL)::int, 0, 0);
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER run_counters_learning AFTER INSERT OR DELETE OR UPDATE OF superseded_by, run_id ON learnings
    FOR EACH ROW EXECUTE FUNCTION evoteam_counters_learnings();

CREATE FUNCTION evoteam_counters_costs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        PERFORM evoteam_bump(OLD.run_id, 0, 0, 0, -OLD.usd);
        PERFORM evoteam_spend_line(OLD.run_id, OLD.role, OLD.team_version, -OLD.usd, -1);
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        PERFORM evoteam_bump(NEW.run_id, 0, 0, 0, NEW.usd);
        PERFORM evoteam_spend_line(NEW.run_id, NEW.role, NEW.team_version, NEW.usd, 1);
        RETURN NEW;
    END IF;
    RETURN OLD;
END $$;
CREATE TRIGGER run_counters_cost AFTER INSERT OR DELETE OR UPDATE OF usd, run_id, role, team_version ON costs
    FOR EACH ROW EXECUTE FUNCTION evoteam_counters_costs();
"""


def _counters_v1() -> str:
    text = counters.V1
    start = text.index("CREATE TRIGGER")
    end = text.rindex("END;") + len("END;")
    return to_postgres(text[:start] + text[end:], params=False, ddl=True) + COUNTERS_V1_TRIGGERS


register_postgres_form("knowledge", 0, _knowledge_v1())
register_postgres_form("knowledge.counters", 0, _counters_v1())


def no_pending_list(index: str) -> str:
    """PostgreSQL's step for a GIN index that search reads: write each entry into the index
    itself (`fastupdate = off`) and merge what is pending now.

    With GIN's default fast update, new entries wait in an unsorted pending list (up to 4 MB)
    until a vacuum merges them. Every search must read that list whole, and the planner,
    costing it, prefers a sequential scan: at 10k learnings loaded without a vacuum, a two-word
    search scanned the table (10-50 ms) where the index answers in under a millisecond. Writes
    pay a little more per entry instead, and no write pays for merging 4 MB at once."""
    return (f"ALTER INDEX {index} SET (fastupdate = off);\n"
            f"SELECT gin_clean_pending_list('{index}'::regclass);\n")


def nothing_on_sqlite(conn) -> None:
    """FTS5 has no pending list: the step exists so both backends share one version number."""


# The GIN index of search_index (v2) holds, beside each entry's lexemes, one lexeme naming its
# bucket of 2**BUCKET_BITS ids. A word's posting list is sorted by row, and a GIN match of
# several keys advances each list only to the next row the rarest key holds, skipping the rest
# (a posting tree is re-entered from its root): so "common-word AND one-of-the-newest-buckets"
# decodes the buckets' entries, not the word's whole posting list (400k entries at 1M learnings,
# 20-70 ms). pgranges.py's "bucket" way reads ranges of whole buckets so. The lexeme holds a
# space, which no parsed word does: no query word can match it (and search still bounds its ids).
BUCKET_BITS = 14
BUCKETED_TSV = f"(tsv || array_to_tsvector(ARRAY['bucket ' || (id >> {BUCKET_BITS})::text]))"
SEARCH_GIN = f"CREATE INDEX {{name}} ON search_index USING GIN ({BUCKETED_TSV}) WITH (fastupdate = off)"
_LONG_INDEX = 100_000  # entries from which rebuilding the index says so on stderr (tens of seconds at 1M)


def build_bucket_index(conn) -> None:
    """knowledge.search v2 on PostgreSQL, its long part: build search_index's GIN index over
    `BUCKETED_TSV` beside the old one, as search_index_tsv_v2, with `CREATE INDEX CONCURRENTLY`,
    outside any transaction (migrations.OutsideTransaction): it takes no lock that stops other
    servers' writes or searches, which go on, the old index serving searches meanwhile.

    On a store holding many entries it takes a while (10.6 s at 1M learnings on two quiet cores,
    more on busy ones, and a concurrent build reads the table twice), once, on the first open by
    this version: it says so on stderr, before and after, so that a server that seems not to
    start is not taken for hung. A build killed midway (the server or the database gone) leaves
    the new index INVALID, which the next open drops and builds again; one left valid by a server
    that died before the swap is kept. docs/postgres.md says what an upgrade of running replicas
    means."""
    raw = conn.raw  # psycopg's own connection, in autocommit mode: these statements need no dialect rewrite
    (valid,) = raw.execute("SELECT (SELECT indisvalid FROM pg_index "
                           "WHERE indexrelid = to_regclass('search_index_tsv_v2'))").fetchone()
    if valid:  # whole: built by a server that died before swapping it in
        return
    # An upper bound on the entries that needs no ANALYZE (reltuples is -1 before the first) and
    # no count of a million rows: ids only grow.
    (entries,) = raw.execute("SELECT coalesce(max(id), 0) FROM search_index").fetchone()
    loud = entries >= _LONG_INDEX
    if loud:
        print(f"evoteam: knowledge.search v2: rebuilding the full-text index of up to {entries:,} search entries "
              f"(once; 10 s or more per million entries; searches and writes go on meanwhile)...",
              file=sys.stderr, flush=True)
    started = time.monotonic()
    # Session settings (SET LOCAL holds only inside a transaction, and this runs outside one),
    # reset before the connection goes on to the swap and the other components. More memory than
    # the default 64 MB: GIN builds in memory and merges less. No statement or lock timeout of
    # the role's or database's own: the build waits for the writes in progress to end, and a
    # timeout would cancel it on every open, so that this version could never open the store.
    raw.execute("SET maintenance_work_mem = '256MB'")
    raw.execute("SET statement_timeout = 0")
    raw.execute("SET lock_timeout = 0")
    try:
        if valid is False:
            # Left INVALID by a build killed midway: of no use to a search, yet every write
            # still updates it. Dropped without a lock that would stop writes, and built afresh.
            raw.execute("DROP INDEX CONCURRENTLY IF EXISTS search_index_tsv_v2")
        raw.execute(SEARCH_GIN.format(name="CONCURRENTLY search_index_tsv_v2"))
    finally:
        if not raw.broken:  # a connection the server ended (a build killed midway) has nothing to reset
            for setting in ("maintenance_work_mem", "statement_timeout", "lock_timeout"):
                raw.execute(f"RESET {setting}")
    if loud:
        print(f"evoteam: knowledge.search v2: index rebuilt in {time.monotonic() - started:.0f} s",
              file=sys.stderr, flush=True)


def swap_bucket_index(conn) -> None:
    """knowledge.search v2 on PostgreSQL, its short part, in the transaction that records the
    version: the built index takes the old one's place. Dropping the old index locks the table
    whole until the commit right after (no search or write waits longer than that)."""
    conn.raw.execute("DROP INDEX IF EXISTS search_index_tsv")
    conn.raw.execute("ALTER INDEX search_index_tsv_v2 RENAME TO search_index_tsv")


def discard_bucket_index(conn) -> None:
    """knowledge.search v2 done by another server after this one built its index (an earlier
    evoteam does the whole step in one transaction, and may take the migration lock while this
    one builds): the live index is search_index_tsv by then, and a search_index_tsv_v2 left
    beside it is this server's, unused, which every write would still update."""
    raw = conn.raw
    raw.execute("SET statement_timeout = 0")  # as for the build: a timeout would fail every open
    try:
        raw.execute("DROP INDEX CONCURRENTLY IF EXISTS search_index_tsv_v2")
    finally:
        if not raw.broken:
            raw.execute("RESET statement_timeout")


register_migrations("knowledge.search", [nothing_on_sqlite, nothing_on_sqlite])
register_postgres_form("knowledge.search", 0, no_pending_list("search_index_tsv"))
register_postgres_form("knowledge.search", 1, OutsideTransaction(build_bucket_index, swap_bucket_index,
                                                                  discard_bucket_index))
