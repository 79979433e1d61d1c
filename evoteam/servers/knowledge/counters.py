"""Per-run counters kept by triggers (component "knowledge.counters"), so that the hot paths —
`get_run`, `spend`, the budget checks of every team tool and hook — read one row instead of
counting a run's whole history. Append migrations; never edit one.

- `run_counters`: per run, the number of candidates, of current (not superseded) learnings, of
  history entries, and the money spent.
- `run_spend`: per run, role and team version, the money spent (the lines of `spend`). SQLite
  treats NULLs as distinct in a key, so `role_key`/`version_key` stand for the nullable columns.
"""

from evoteam.servers.knowledge.migrations import register_migrations

# One upsert, reused by every trigger that adds to a run's counters.
_BUMP = ("INSERT INTO run_counters (run_id, candidates, learnings, history, spent_usd) "
         "VALUES ({run}, {c}, {l}, {h}, {usd}) "
         "ON CONFLICT(run_id) DO UPDATE SET candidates = candidates + excluded.candidates, "
         "learnings = learnings + excluded.learnings, history = history + excluded.history, "
         "spent_usd = spent_usd + excluded.spent_usd;")

_ROLE_KEY = "CASE WHEN {row}.role IS NULL THEN '' ELSE 'r' || {row}.role END"
_VERSION_KEY = "coalesce({row}.team_version, -1)"


def _spend_line(row: str, sign: str) -> str:
    return ("INSERT INTO run_spend (run_id, role_key, version_key, role, team_version, usd, n) "
            f"VALUES ({row}.run_id, {_ROLE_KEY.format(row=row)}, {_VERSION_KEY.format(row=row)}, {row}.role, "
            f"{row}.team_version, {sign}{row}.usd, {sign}1) "
            "ON CONFLICT(run_id, role_key, version_key) DO UPDATE SET usd = usd + excluded.usd, n = n + excluded.n;")


V1 = f"""
CREATE TABLE run_counters (
    run_id TEXT PRIMARY KEY,
    candidates INTEGER NOT NULL DEFAULT 0,
    learnings INTEGER NOT NULL DEFAULT 0,
    history INTEGER NOT NULL DEFAULT 0,
    spent_usd REAL NOT NULL DEFAULT 0
);

CREATE TABLE run_spend (
    run_id TEXT NOT NULL,
    role_key TEXT NOT NULL,
    version_key INTEGER NOT NULL,
    role TEXT,
    team_version INTEGER,
    usd REAL NOT NULL DEFAULT 0,
    n INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, role_key, version_key)
);

INSERT INTO run_counters (run_id, candidates, learnings, history, spent_usd)
SELECT r.id,
       (SELECT count(*) FROM candidates WHERE run_id = r.id),
       (SELECT count(*) FROM learnings WHERE run_id = r.id AND superseded_by IS NULL),
       (SELECT count(*) FROM history WHERE run_id = r.id),
       (SELECT coalesce(sum(usd), 0) FROM costs WHERE run_id = r.id)
FROM runs AS r;

INSERT INTO run_spend (run_id, role_key, version_key, role, team_version, usd, n)
SELECT c.run_id, {_ROLE_KEY.format(row="c")}, {_VERSION_KEY.format(row="c")}, c.role, c.team_version,
       sum(c.usd), count(*)
FROM costs AS c GROUP BY c.run_id, c.role, c.team_version;

CREATE TRIGGER run_counters_run AFTER INSERT ON runs BEGIN
    INSERT OR IGNORE INTO run_counters (run_id) VALUES (NEW.id);
END;
CREATE TRIGGER run_counters_run_out AFTER DELETE ON runs BEGIN
    DELETE FROM run_counters WHERE run_id = OLD.id;
    DELETE FROM run_spend WHERE run_id = OLD.id;
END;

CREATE TRIGGER run_counters_candidate_in AFTER INSERT ON candidates BEGIN
    {_BUMP.format(run="NEW.run_id", c=1, h=0, l=0, usd=0)}
END;
CREATE TRIGGER run_counters_candidate_out AFTER DELETE ON candidates BEGIN
    {_BUMP.format(run="OLD.run_id", c=-1, h=0, l=0, usd=0)}
END;

CREATE TRIGGER run_counters_learning_in AFTER INSERT ON learnings WHEN NEW.superseded_by IS NULL BEGIN
    {_BUMP.format(run="NEW.run_id", c=0, h=0, l=1, usd=0)}
END;
CREATE TRIGGER run_counters_learning_out AFTER DELETE ON learnings WHEN OLD.superseded_by IS NULL BEGIN
    {_BUMP.format(run="OLD.run_id", c=0, h=0, l=-1, usd=0)}
END;
-- Superseding (or an import restoring links) moves a learning out of the current ones.
CREATE TRIGGER run_counters_learning_change AFTER UPDATE OF superseded_by, run_id ON learnings
WHEN (OLD.superseded_by IS NULL) != (NEW.superseded_by IS NULL) OR OLD.run_id != NEW.run_id BEGIN
    {_BUMP.format(run="OLD.run_id", c=0, h=0, l="-(OLD.superseded_by IS NULL)", usd=0)}
    {_BUMP.format(run="NEW.run_id", c=0, h=0, l="(NEW.superseded_by IS NULL)", usd=0)}
END;

CREATE TRIGGER run_counters_history_in AFTER INSERT ON history BEGIN
    {_BUMP.format(run="NEW.run_id", c=0, h=1, l=0, usd=0)}
END;
CREATE TRIGGER run_counters_history_out AFTER DELETE ON history BEGIN
    {_BUMP.format(run="OLD.run_id", c=0, h=-1, l=0, usd=0)}
END;

CREATE TRIGGER run_counters_cost_in AFTER INSERT ON costs BEGIN
    {_BUMP.format(run="NEW.run_id", c=0, h=0, l=0, usd="NEW.usd")}
    {_spend_line("NEW", "")}
END;
CREATE TRIGGER run_counters_cost_out AFTER DELETE ON costs BEGIN
    {_BUMP.format(run="OLD.run_id", c=0, h=0, l=0, usd="-OLD.usd")}
    {_spend_line("OLD", "-")}
END;
CREATE TRIGGER run_counters_cost_change AFTER UPDATE OF usd, run_id, role, team_version ON costs BEGIN
    {_BUMP.format(run="OLD.run_id", c=0, h=0, l=0, usd="-OLD.usd")}
    {_spend_line("OLD", "-")}
    {_BUMP.format(run="NEW.run_id", c=0, h=0, l=0, usd="NEW.usd")}
    {_spend_line("NEW", "")}
END;

-- The learnings document reads each kind's current learnings most confident, then newest,
-- first, and stops when the document is full: this index serves exactly that order.
CREATE INDEX learnings_document ON learnings(run_id, kind, confidence DESC, created_at DESC)
    WHERE superseded_by IS NULL;
-- The history document shows the newest entries.
CREATE INDEX history_newest ON history(run_id, created_at DESC, id DESC);
"""

# The counters computed from the rows, as V1 first filled them: `kb migrate-store` fills a
# PostgreSQL store with its counter triggers off and then runs these (migrate_store.py).
REBUILD = [statement.strip() + ";" for statement in
           V1[V1.index("INSERT INTO run_counters"):V1.index("CREATE TRIGGER")].split(";") if statement.strip()]

register_migrations("knowledge.counters", [V1])
