"""Tables of the team component: team versions, role sessions and supervisor wakes.
Append migrations; never edit one."""

from evoteam.servers.knowledge.migrations import register_migrations

V1 = """
CREATE TABLE team_versions (
    run_id TEXT NOT NULL REFERENCES runs(id),
    version INTEGER NOT NULL,
    design TEXT NOT NULL,
    project TEXT NOT NULL,
    user TEXT NOT NULL,
    client TEXT,
    role TEXT,
    team_version INTEGER,
    created_at TEXT NOT NULL,
    PRIMARY KEY (run_id, version)
);

CREATE TABLE role_sessions (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(id),
    version INTEGER NOT NULL,
    role TEXT NOT NULL,
    slug TEXT NOT NULL,
    runner TEXT NOT NULL,
    status TEXT NOT NULL,
    stage INTEGER NOT NULL DEFAULT 0,
    cap_usd REAL,
    cost_usd REAL NOT NULL DEFAULT 0,
    turns INTEGER NOT NULL DEFAULT 0,
    last_message TEXT NOT NULL DEFAULT '',
    error TEXT,
    session_id TEXT,
    worktree TEXT,
    branch TEXT,
    owner TEXT,
    project TEXT NOT NULL,
    user TEXT NOT NULL,
    started_at TEXT,
    ended_at TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    FOREIGN KEY (run_id, version) REFERENCES team_versions(run_id, version)
);
CREATE INDEX role_sessions_run ON role_sessions(run_id, version, slug);

CREATE TABLE supervisor_wakes (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(id),
    seq INTEGER NOT NULL,
    trigger TEXT NOT NULL,
    status TEXT NOT NULL,
    version_before INTEGER,
    version_after INTEGER,
    cost_usd REAL NOT NULL DEFAULT 0,
    session_id TEXT,
    error TEXT,
    owner TEXT,
    project TEXT NOT NULL,
    user TEXT NOT NULL,
    started_at TEXT NOT NULL,
    ended_at TEXT,
    UNIQUE (run_id, seq)
);
"""

register_migrations("team", [V1])
