"""The retrieval store's own arguments and answers (what crosses the `/store` endpoint besides the
server's models in models.py)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from evoteam.servers.retrieval.models import (
    Direction,
    DocumentRef,
    OutcomeRow,
    QueryCreate,
    QueryRecord,
    RawResult,
    StoredDocument,
)


class RunInfo(BaseModel):
    id: str
    project: str
    goal: str = ""
    direction: Direction
    x0: float | None
    best_known: float | None
    best_score: float | None = None


class QueryResultsCreate(BaseModel):
    query: QueryCreate
    results: list[RawResult]
    pool: list[str] = Field(default_factory=list, description="document ids the search has already seen")


class QueryResults(BaseModel):
    query: QueryRecord
    documents: list[StoredDocument]


class LookupRow(BaseModel):
    """A stored document with what look-up ranks by."""

    ref: DocumentRef
    relevance: float = 0.0  # 0..1, from full-text rank against the open questions
    realised: list[OutcomeRow] = Field(default_factory=list)  # this run's outcomes
    best_prediction: float | None = None


class LookupRows(BaseModel):
    rows: list[LookupRow]


class LookupTexts(BaseModel):
    best: list[str] = Field(default_factory=list)
    worst: list[str] = Field(default_factory=list)


class StringList(BaseModel):
    items: list[str]


class IdList(BaseModel):
    ids: list[str]
