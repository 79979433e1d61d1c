"""Pydantic models of the retrieval server: what the tools take and return, and what the
`RetrievalStore` reads and writes. Everything crossing the store boundary is one of these, so
the store can later be proxied to a shared knowledge server unchanged."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from evoteam.servers.knowledge.models import SearchHit

Direction = Literal["maximize", "minimize"]
GateDecision = Literal["no-op", "look-up", "retrieve"]
GateRequest = Literal["no-op", "look-up", "retrieve", "auto"]
SearchStatus = Literal["needs_scores", "done"]

# Defaults of the inner loop (EvoDuet: R rounds, J queries a round, keep top D).
DEFAULT_ROUNDS = 3
DEFAULT_QUERIES_PER_ROUND = 3
DEFAULT_RESULTS_PER_QUERY = 5
DEFAULT_KEEP = 3
DEFAULT_CANDIDATES = 4
EXCERPT_CHARS = 280


class KnowledgeState(BaseModel):
    """What the caller knows about improving the parent, what earlier searches taught, and
    what is still open. Open questions steer the queries of the inner loop."""

    model_config = ConfigDict(extra="ignore")

    known: list[str] = Field(default_factory=list, max_length=30,
                             description="facts and techniques already known or tried")
    learned: list[str] = Field(default_factory=list, max_length=30,
                               description="what earlier searches taught (including dead ends)")
    open_questions: list[str] = Field(default_factory=list, max_length=20,
                                      description="the knowledge gaps a search should close")

    @field_validator("known", "learned", "open_questions")
    @classmethod
    def _trim(cls, items: list[str]) -> list[str]:
        return [s.strip()[:500] for s in items if isinstance(s, str) and s.strip()]

    def merged(self, update: KnowledgeState | None) -> KnowledgeState:
        """This state with an update's lists replacing ours where the update has any."""
        if update is None:
            return self
        return KnowledgeState(
            known=update.known or self.known,
            learned=_dedupe([*self.learned, *update.learned])[-30:],
            open_questions=update.open_questions or self.open_questions,
        )

    def text(self) -> str:
        parts = []
        for label, items in (("Known", self.known), ("Learned from earlier searches", self.learned),
                             ("Open questions", self.open_questions)):
            if items:
                parts.append(label + ":\n" + "\n".join(f"- {s}" for s in items))
        return "\n".join(parts) or "(empty)"


def _dedupe(items: list[str]) -> list[str]:
    seen, out = set(), []
    for s in items:
        if s.lower() not in seen:
            seen.add(s.lower())
            out.append(s)
    return out


def _finite(value: float | None) -> float | None:
    if value is not None and not math.isfinite(value):
        raise ValueError("must be a finite number")
    return value


# What to pass instead of an empty id. An empty string is not "no id": it used to reach the
# store as a key and fail there (a foreign-key error reported as a failure inside the server),
# or to be taken silently for "not given".
_ID_HINTS = {
    "gate_id": "pass the gate_id that gate returned, or leave gate_id out",
    "search_id": "pass the search_id that search returned",
    "run_id": "pass a run's id (list_runs shows them)",
    "candidate_id": "pass a candidate's id (cand_...), or leave candidate_id out",
    "parent_candidate_id": "pass the parent candidate's id (cand_...), or leave parent_candidate_id out",
}
BLANK_ID = "blank_id"


def _given(value: str | None, info: ValidationInfo) -> str | None:
    """Refuse an empty or blank id with one line naming the argument and what to pass."""
    if value is not None and not value.strip():
        raise PydanticCustomError(BLANK_ID, "{field} is empty: {hint}",
                                  {"field": info.field_name, "hint": _ID_HINTS[info.field_name]})
    return value


# ---------------------------------------------------------------- documents


class RawResult(BaseModel):
    """One result as a search backend returned it, before deduplication."""

    url: str
    title: str = ""
    content: str = ""
    backend: str
    score: float | None = None


class DocumentRef(BaseModel):
    """A stored document, compactly: what the agent sees in lists."""

    id: str
    title: str
    url: str
    excerpt: str = Field(description="a short excerpt; untrusted web text, data only")
    predicted_score: float | None = None
    promising: bool | None = Field(default=None, description="predicted better than the parent's score")
    why: str | None = None
    realised_score: float | None = Field(default=None, description="best realised score of a candidate built from it")
    outcomes: int = 0
    improved: int = Field(default=0, description="outcomes that beat their parent")


class Document(BaseModel):
    """A stored document with its full text (as fetched; untrusted)."""

    id: str
    url: str
    title: str
    content: str
    content_sha256: str
    backend: str
    first_seen_at: datetime
    predictions: list[Prediction] = Field(default_factory=list)
    outcomes: list[OutcomeRow] = Field(default_factory=list)


class StoredDocument(BaseModel):
    """What `RetrievalStore.upsert_documents` returns for each result: the stored id and
    whether this run had returned the URL before."""

    id: str
    url: str
    title: str
    content: str
    new_in_search: bool = True
    repeated_in_run: bool = False


# ---------------------------------------------------------------- predictions


class ScoreRow(BaseModel):
    """One forecast: the evaluator score a candidate built from this document would get."""

    model_config = ConfigDict(extra="ignore")

    document_id: str = Field(min_length=1, max_length=100)
    predicted_score: float = Field(strict=True, description="absolute, on the evaluator's scale")
    why: str = Field(default="", max_length=400)

    _check = field_validator("predicted_score")(_finite)

    @field_validator("why", mode="before")
    @classmethod
    def _clip_why(cls, value):
        return value[:400] if isinstance(value, str) else value


class Prediction(BaseModel):
    """A frozen forecast."""

    id: str
    run_id: str
    search_id: str
    document_id: str
    round: int
    parent_score: float | None
    predicted_score: float
    promising: bool | None
    why: str
    predictor: str
    created_at: datetime


class PredictionCreate(BaseModel):
    run_id: str
    search_id: str
    document_id: str
    round: int
    parent_score: float | None
    predicted_score: float
    promising: bool | None
    why: str = ""
    predictor: str


class ScoringResult(BaseModel):
    """What a predictor returns for one batch: valid rows plus what it dropped and why."""

    rows: list[ScoreRow] = Field(default_factory=list)
    dropped: list[str] = Field(default_factory=list)
    knowledge_state: KnowledgeState | None = None
    next_queries: list[str] = Field(default_factory=list)


# ---------------------------------------------------------------- gate


class GateCreate(BaseModel):
    run_id: str
    parent_candidate_id: str | None
    parent_score: float | None
    requested: GateRequest
    decision: GateDecision
    reason: str
    knowledge_state: KnowledgeState
    n_candidates: int


class GateRecord(GateCreate):
    id: str
    created_at: datetime


class GateReply(BaseModel):
    """The gate's decision and what to do next."""

    gate_id: str
    decision: GateDecision
    decided_by: str = Field(description="'caller', or the predictor that chose under auto")
    reason: str
    n_candidates: int = Field(description="how many candidates to generate from the parent")
    documents: list[DocumentRef] = Field(default_factory=list,
                                         description="look-up: stored documents, best first")
    knowledge: list[SearchHit] = Field(default_factory=list,
                                       description="learnings and candidates in the store that bear on the open "
                                                   "questions (any run of this project), best match first")
    next_step: str


# ---------------------------------------------------------------- search


class SearchConfig(BaseModel):
    rounds: int = Field(default=DEFAULT_ROUNDS, ge=1, le=10)
    queries_per_round: int = Field(default=DEFAULT_QUERIES_PER_ROUND, ge=1, le=10)
    results_per_query: int = Field(default=DEFAULT_RESULTS_PER_QUERY, ge=1, le=20)
    keep: int = Field(default=DEFAULT_KEEP, ge=1, le=20)
    score_low: float | None = None
    score_high: float | None = None


class SearchState(BaseModel):
    """A search session (the inner loop) as stored between rounds."""

    id: str
    run_id: str
    gate_id: str | None
    direction: Direction
    goal: str = ""
    parent_candidate_id: str | None = None
    parent_score: float | None
    parent_summary: str = ""
    config: SearchConfig
    knowledge_state: KnowledgeState
    round: int = 0
    status: SearchStatus = "needs_scores"
    predictor: str
    pool: list[str] = Field(default_factory=list, description="document ids seen by this search")
    pending: list[str] = Field(default_factory=list, description="ids awaiting a forecast (agent mode)")
    kept: list[str] = Field(default_factory=list)
    next_queries: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    raw_chars: int = Field(default=0, description="characters of raw results distilled so far")
    reports: list[RoundReport] = Field(default_factory=list)


class QueryCreate(BaseModel):
    run_id: str
    search_id: str | None
    round: int
    text: str
    backend: str
    results: int
    new_documents: int


class QueryRecord(QueryCreate):
    id: str
    created_at: datetime


class RoundReport(BaseModel):
    round: int
    queries: list[str]
    rejected_queries: list[str] = Field(default_factory=list,
                                        description="too close to an earlier query of the run")
    results: int
    new_documents: int
    scored: int = 0
    dropped: int = 0


class SearchReply(BaseModel):
    """The inner loop's state. `status='needs_scores'` (agent predictor): forecast
    `to_score` and call `score_documents`. `status='done'`: `documents` are the kept top-D."""

    search_id: str
    run_id: str
    status: SearchStatus
    round: int
    rounds: int
    parent_score: float | None
    direction: Direction
    documents: list[DocumentRef] = Field(default_factory=list, description="kept documents, best first")
    to_score: list[DocumentRef] = Field(default_factory=list,
                                        description="needs_scores: new documents to forecast")
    rounds_done: list[RoundReport] = Field(default_factory=list)
    knowledge_state: KnowledgeState
    promising: int = Field(default=0, description="kept documents predicted to beat the parent")
    notes: list[str] = Field(default_factory=list)
    next_step: str


# ---------------------------------------------------------------- outcomes


class OutcomeCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: str
    document_ids: list[str] = Field(default_factory=list, max_length=50)
    realised_score: float
    parent_score: float | None = None
    direction: Direction | None = None
    candidate_id: str | None = None
    gate_id: str | None = None
    # Set by the bench, which knows both scores' intervals: whether the candidate beat its parent
    # beyond noise. Unset (the record_outcome tool, single runs), the two scores are compared.
    improved: bool | None = None

    _check = field_validator("realised_score", "parent_score")(_finite)
    _ids = field_validator('run_id', 'candidate_id', 'gate_id')(_given)


class OutcomeRow(BaseModel):
    id: str
    run_id: str
    gate_id: str | None
    candidate_id: str | None
    realised_score: float
    parent_score: float | None
    improved: bool | None
    created_at: datetime


class OutcomeReply(BaseModel):
    outcome_id: str
    run_id: str
    gate_id: str | None
    decision: GateDecision | None
    documents: list[str]
    unknown_documents: list[str] = Field(default_factory=list)
    improved: bool | None
    realised_score: float


# ---------------------------------------------------------------- lookup / stats


class DocumentPage(BaseModel):
    items: list[DocumentRef]
    total: int
    next_cursor: str | None = None


class DecisionStats(BaseModel):
    decision: str
    gates: int
    outcomes: int
    improved: int
    improvement_rate: float | None


class RetrievalStats(BaseModel):
    run_id: str | None
    searches: int
    queries: int
    results_returned: int
    distinct_urls: int
    repeated_url_rate: float | None = Field(description="share of returned URLs this run had returned before")
    predictions: int
    outcomes: int
    spearman_predicted_vs_realised: float | None
    spearman_pairs: int
    by_decision: list[DecisionStats]
    retrievals_with_promising: float | None = Field(
        description="share of finished searches that kept at least one promising document")


class GateMark(BaseModel):
    at: datetime
    decision: str


class ForecastPair(BaseModel):
    predicted: float
    realised: float


class RetrievalSeries(BaseModel):
    """A run's retrieval over time, as its report draws it."""

    gates: list[GateMark] = Field(default_factory=list)
    pairs: list[ForecastPair] = Field(default_factory=list)
    distinct_urls: int = 0
    results_returned: int = 0
    repeated_url_rate: float | None = None
    spearman: float | None = None


Document.model_rebuild()


# ---------------------------------------------------------------- core inputs


class GateInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: str
    decision: GateRequest = "auto"
    knowledge_state: KnowledgeState = Field(default_factory=KnowledgeState)
    parent_candidate_id: str | None = None
    parent_score: float | None = None
    parent_summary: str = Field(default="", max_length=4000)
    n_candidates: int = Field(default=DEFAULT_CANDIDATES, ge=1, le=64)
    limit: int = Field(default=DEFAULT_KEEP, ge=1, le=20)

    _check = field_validator("parent_score")(_finite)
    _ids = field_validator('run_id', 'parent_candidate_id')(_given)


class SearchInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: str | None = None
    gate_id: str | None = None
    knowledge_state: KnowledgeState | None = None
    queries: list[str] = Field(default_factory=list, max_length=10)
    parent_candidate_id: str | None = None
    parent_score: float | None = None
    parent_summary: str = Field(default="", max_length=4000)
    config: SearchConfig = Field(default_factory=SearchConfig)

    _check = field_validator("parent_score")(_finite)
    _ids = field_validator('run_id', 'gate_id', 'parent_candidate_id')(_given)


class ScoreInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    search_id: str
    scores: list[dict] = Field(default_factory=list, max_length=100)
    knowledge_state: KnowledgeState | None = None
    next_queries: list[str] = Field(default_factory=list, max_length=10)

    _ids = field_validator("search_id")(_given)


class LookupReply(BaseModel):
    """`document` when one id was asked for (full text, paged by `offset`); otherwise
    `documents`, the stored documents ranked for the run (realised outcomes first, then
    relevance to the query)."""

    document: Document | None = None
    content_offset: int = 0
    next_offset: int | None = None
    documents: list[DocumentRef] = Field(default_factory=list)
    total: int = 0
    next_cursor: str | None = None
SearchState.model_rebuild()
