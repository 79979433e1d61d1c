"""Tables of the knowledge store (component "knowledge"). Append migrations; never edit one."""

from evoteam.servers.knowledge import idempotency  # noqa: F401 - registers its own migrations
from evoteam.servers.knowledge.migrations import register_migrations

# Every row carries its provenance: project (from the run), user (from the caller's
# identity), client, role, team version, time.
PROVENANCE_COLUMNS = """
    project TEXT NOT NULL,
    user TEXT NOT NULL,
    client TEXT,
    role TEXT,
    team_version INTEGER,
    created_at TEXT NOT NULL
"""

V1 = f"""
CREATE TABLE runs (
    id TEXT PRIMARY KEY,
    goal TEXT NOT NULL,
    kit TEXT,
    direction TEXT NOT NULL CHECK (direction IN ('maximize', 'minimize')),
    x0 REAL,
    best_known REAL,
    budget_usd REAL,
    status TEXT NOT NULL DEFAULT 'active',
    current_version INTEGER,
    {PROVENANCE_COLUMNS}
);
CREATE INDEX runs_project ON runs(project, created_at);

CREATE TABLE learnings (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(id),
    text TEXT NOT NULL,
    kind TEXT NOT NULL,
    tags TEXT NOT NULL DEFAULT '[]',
    evidence TEXT NOT NULL DEFAULT '[]',
    confidence REAL NOT NULL DEFAULT 0.5,
    supersedes TEXT REFERENCES learnings(id),
    superseded_by TEXT REFERENCES learnings(id),
    {PROVENANCE_COLUMNS}
);
CREATE INDEX learnings_run ON learnings(run_id, created_at);

CREATE TABLE history (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(id),
    observed_behaviour TEXT NOT NULL DEFAULT '',
    diagnosis TEXT NOT NULL DEFAULT '',
    design_change TEXT NOT NULL DEFAULT '',
    outcome TEXT NOT NULL DEFAULT '',
    {PROVENANCE_COLUMNS}
);
CREATE INDEX history_run ON history(run_id, created_at);

CREATE TABLE blobs (
    sha256 TEXT PRIMARY KEY,
    size INTEGER NOT NULL,
    data BLOB NOT NULL
);

CREATE TABLE artifacts (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(id),
    name TEXT NOT NULL,
    kind TEXT NOT NULL,
    sha256 TEXT NOT NULL REFERENCES blobs(sha256),
    size INTEGER NOT NULL,
    is_text INTEGER NOT NULL,
    {PROVENANCE_COLUMNS}
);
CREATE INDEX artifacts_run ON artifacts(run_id, created_at);

CREATE TABLE candidates (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(id),
    code TEXT,
    artifact_id TEXT REFERENCES artifacts(id),
    status TEXT NOT NULL,
    score REAL,
    split TEXT NOT NULL DEFAULT 'dev',
    metrics TEXT NOT NULL DEFAULT '{{}}',
    workloads TEXT NOT NULL DEFAULT '[]',
    parent_id TEXT REFERENCES candidates(id),
    documents_used TEXT NOT NULL DEFAULT '[]',
    notes TEXT NOT NULL DEFAULT '',
    flagged INTEGER NOT NULL DEFAULT 0,
    cost_usd REAL,
    {PROVENANCE_COLUMNS}
);
CREATE INDEX candidates_run ON candidates(run_id, created_at);
CREATE INDEX candidates_score ON candidates(run_id, status, score);

-- Money spent on a run: headless roles report their SDK cost, in-session roles their
-- transcript's token usage priced by the price table.
CREATE TABLE costs (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(id),
    usd REAL NOT NULL CHECK (usd >= 0),
    source TEXT NOT NULL,
    detail TEXT NOT NULL DEFAULT '{{}}',
    {PROVENANCE_COLUMNS}
);
CREATE INDEX costs_run ON costs(run_id, role, team_version);

-- A retried write with the same key returns the first write's row instead of a duplicate.
CREATE TABLE idempotency (
    user TEXT NOT NULL,
    key TEXT NOT NULL,
    kind TEXT NOT NULL,
    ref_id TEXT NOT NULL,
    PRIMARY KEY (user, key)
);

CREATE TABLE tokens (
    id TEXT PRIMARY KEY,
    user TEXT NOT NULL,
    project TEXT,
    token_sha256 TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL,
    revoked_at TEXT
);

-- One full-text index over everything searchable; rows are written with their source row.
-- `filters` holds one opaque token per filterable value (run, project, kind), so filtering
-- is a doclist intersection inside FTS5 rather than a per-row check of stored columns.
CREATE VIRTUAL TABLE search_index USING fts5(
    title, body, filters,
    kind UNINDEXED, ref_id UNINDEXED, run_id UNINDEXED, project UNINDEXED,
    tokenize = 'porter unicode61'
);
"""

register_migrations("knowledge", [V1])

# Per-run counters and the documents' indexes: a component of their own, migrated after this one.
from evoteam.servers.knowledge import counters  # noqa: E402,F401
