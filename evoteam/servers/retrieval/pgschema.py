"""PostgreSQL forms of the retrieval component's migrations that the dialect rewrite cannot carry:
the documents' full-text index (a table with a generated tsvector under GIN, written with the
same INSERT as the FTS5 table) and the triggers that freeze forecasts; and (retrieval.search v1)
that index without a GIN pending list, as the knowledge store's (knowledge/pgschema.py)."""

from __future__ import annotations

from evoteam.servers.knowledge.migrations import register_migrations, register_postgres_form
from evoteam.servers.knowledge.dialect import to_postgres
from evoteam.servers.knowledge.pgschema import no_pending_list, nothing_on_sqlite
from evoteam.servers.retrieval import schema

DOCUMENTS_FTS = """
CREATE TABLE retrieval_documents_fts (
    id BIGSERIAL PRIMARY KEY,
    title TEXT NOT NULL DEFAULT '',
    body TEXT NOT NULL DEFAULT '',
    doc_id TEXT NOT NULL,
    project TEXT NOT NULL,
    tsv tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('evoteam', coalesce(title, '')), 'A') ||
        setweight(to_tsvector('evoteam', coalesce(body, '')), 'B')) STORED
);
CREATE INDEX retrieval_documents_fts_tsv ON retrieval_documents_fts USING GIN (tsv);
CREATE INDEX retrieval_documents_fts_project ON retrieval_documents_fts (project);
"""

FROZEN = """
CREATE FUNCTION evoteam_forecasts_frozen() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'forecasts are frozen once made';
END $$;
CREATE TRIGGER retrieval_predictions_frozen BEFORE UPDATE OR DELETE ON retrieval_predictions
    FOR EACH ROW EXECUTE FUNCTION evoteam_forecasts_frozen();
"""


def _cut(text: str, start_marker: str, end_marker: str) -> str:
    start = text.index(start_marker)
    end = text.index(end_marker, start) + len(end_marker)
    return text[:start] + text[end:]


def _retrieval_v1() -> str:
    text = _cut(schema.V1, "CREATE VIRTUAL TABLE retrieval_documents_fts", ");")
    text = _cut(text, "CREATE TRIGGER retrieval_predictions_frozen_update", "END;")
    text = _cut(text, "CREATE TRIGGER retrieval_predictions_frozen_delete", "END;")
    return to_postgres(text, params=False, ddl=True) + DOCUMENTS_FTS + FROZEN


register_postgres_form("retrieval", 0, _retrieval_v1())
register_migrations("retrieval.search", [nothing_on_sqlite])
register_postgres_form("retrieval.search", 0, no_pending_list("retrieval_documents_fts_tsv"))
