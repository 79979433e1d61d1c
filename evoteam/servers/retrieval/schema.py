"""Tables of the retrieval server (component "retrieval") in the knowledge store's file.
Append migrations; never edit one.

Documents are shared by every run of a project (a page fetched for one run can be looked up by
the next); queries, hits, gate decisions, forecasts and outcomes belong to a run. Forecasts are
frozen: triggers refuse to update or delete them.
"""

from evoteam.servers.knowledge.migrations import register_migrations
from evoteam.servers.knowledge.schema import PROVENANCE_COLUMNS

V1 = f"""
CREATE TABLE retrieval_documents (
    id TEXT PRIMARY KEY,
    url TEXT NOT NULL,
    url_key TEXT NOT NULL,
    content_sha256 TEXT NOT NULL,
    title TEXT NOT NULL,
    content TEXT NOT NULL,
    backend TEXT NOT NULL,
    {PROVENANCE_COLUMNS}
);
CREATE UNIQUE INDEX retrieval_documents_url ON retrieval_documents(project, url_key);
CREATE INDEX retrieval_documents_hash ON retrieval_documents(project, content_sha256);

CREATE VIRTUAL TABLE retrieval_documents_fts USING fts5(
    title, body, doc_id UNINDEXED, project UNINDEXED,
    tokenize = 'porter unicode61'
);

CREATE TABLE retrieval_gates (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(id),
    parent_candidate_id TEXT,
    parent_score REAL,
    requested TEXT NOT NULL,
    decision TEXT NOT NULL CHECK (decision IN ('no-op', 'look-up', 'retrieve')),
    reason TEXT NOT NULL DEFAULT '',
    knowledge_state TEXT NOT NULL DEFAULT '{{}}',
    n_candidates INTEGER NOT NULL,
    {PROVENANCE_COLUMNS}
);
CREATE INDEX retrieval_gates_run ON retrieval_gates(run_id, created_at);

-- Documents a gate handed to the caller (look-up results, or what its search kept).
CREATE TABLE retrieval_gate_documents (
    gate_id TEXT NOT NULL REFERENCES retrieval_gates(id),
    document_id TEXT NOT NULL REFERENCES retrieval_documents(id),
    rank INTEGER NOT NULL,
    PRIMARY KEY (gate_id, document_id)
);

CREATE TABLE retrieval_searches (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(id),
    gate_id TEXT REFERENCES retrieval_gates(id),
    status TEXT NOT NULL,
    state TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    {PROVENANCE_COLUMNS}
);
CREATE INDEX retrieval_searches_run ON retrieval_searches(run_id, created_at);

CREATE TABLE retrieval_queries (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(id),
    search_id TEXT REFERENCES retrieval_searches(id),
    round INTEGER NOT NULL,
    text TEXT NOT NULL,
    backend TEXT NOT NULL,
    results INTEGER NOT NULL,
    new_documents INTEGER NOT NULL,
    {PROVENANCE_COLUMNS}
);
CREATE INDEX retrieval_queries_run ON retrieval_queries(run_id, created_at);

-- Every result a query returned, so repeated-URL rates can be computed per run.
CREATE TABLE retrieval_hits (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    query_id TEXT NOT NULL REFERENCES retrieval_queries(id),
    document_id TEXT NOT NULL REFERENCES retrieval_documents(id),
    rank INTEGER NOT NULL,
    repeated INTEGER NOT NULL
);
CREATE INDEX retrieval_hits_run ON retrieval_hits(run_id, document_id);

CREATE TABLE retrieval_predictions (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(id),
    search_id TEXT NOT NULL REFERENCES retrieval_searches(id),
    document_id TEXT NOT NULL REFERENCES retrieval_documents(id),
    round INTEGER NOT NULL,
    parent_score REAL,
    predicted_score REAL NOT NULL,
    promising INTEGER,
    why TEXT NOT NULL DEFAULT '',
    predictor TEXT NOT NULL,
    {PROVENANCE_COLUMNS},
    UNIQUE (search_id, document_id)
);
CREATE INDEX retrieval_predictions_doc ON retrieval_predictions(document_id, run_id);

CREATE TRIGGER retrieval_predictions_frozen_update BEFORE UPDATE ON retrieval_predictions
BEGIN
    SELECT RAISE(ABORT, 'forecasts are frozen once made');
END;

CREATE TRIGGER retrieval_predictions_frozen_delete BEFORE DELETE ON retrieval_predictions
BEGIN
    SELECT RAISE(ABORT, 'forecasts are frozen once made');
END;

CREATE TABLE retrieval_outcomes (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(id),
    gate_id TEXT REFERENCES retrieval_gates(id),
    candidate_id TEXT,
    realised_score REAL NOT NULL,
    parent_score REAL,
    improved INTEGER,
    {PROVENANCE_COLUMNS}
);
CREATE INDEX retrieval_outcomes_run ON retrieval_outcomes(run_id, created_at);
CREATE UNIQUE INDEX retrieval_outcomes_candidate ON retrieval_outcomes(candidate_id)
    WHERE candidate_id IS NOT NULL;

CREATE TABLE retrieval_outcome_documents (
    outcome_id TEXT NOT NULL REFERENCES retrieval_outcomes(id),
    document_id TEXT NOT NULL REFERENCES retrieval_documents(id),
    PRIMARY KEY (outcome_id, document_id)
);
CREATE INDEX retrieval_outcome_documents_doc ON retrieval_outcome_documents(document_id);
"""

register_migrations("retrieval", [V1])
