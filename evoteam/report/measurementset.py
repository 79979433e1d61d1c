"""What a re-measurement returns and stores (remeasure.py): each finalist measured again
(``Remeasured``), and the set of them with the order before and after (``MeasurementSet``)."""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

from pydantic import BaseModel, Field, PrivateAttr, computed_field

# Half its length: it ended every remeasure reply, 640 characters read for nothing (mp36, 2026-12-05).
RULE = ("ordered by the pessimistic end of each finalist's 95% interval, before (as recorded) and after (pooled); "
        "a reversed order is a change only where the intervals were apart before or are after, or the paired "
        "rounds find the new top better; within noise of the top: as the two's paired rounds decide, else "
        "intervals that overlap")



class Remeasured(BaseModel):
    """One finalist measured again."""

    candidate_id: str = Field(description="a candidate id, or 'baseline' (a copy of the kit's baseline: an A/A check)")
    # Said in the entry itself: only the output schema, unseen by a model, said what 'baseline' was (mp42).
    note: str | None = None
    team_version: int | None = None
    recorded_score: float | None = None
    recorded_interval: list[float] | None = None
    recorded_runs: int | None = Field(default=None, description="set where the recorded score was from too few "
                                      "runs for a 95% interval: how many")
    status: str = "PASSED"
    score: float | None = Field(default=None, description="this batch's score")
    score_interval: list[float] | None = None
    heldout_score: float | None = None
    heldout_interval: list[float] | None = None
    # Named: a model found held-out records in best_candidates that no reply had given (mp42).
    heldout_candidate_id: str | None = Field(default=None, description="the held-out record this batch made of "
                                             "it (held-out rounds pool apart from dev ones)")
    pooled_score: float | None = Field(default=None, description="the candidate's score from all its measurements")
    pooled_interval: list[float] | None = None
    runs: int | None = Field(default=None, description="program kits: the runs made here (`rounds`; fewer once "
                             "exact, or with 5+ earlier runs, up to `rounds` with them)")
    pooled_runs: int | None = Field(default=None, description="set where the candidate's pooled runs are too "
                                    "few for a 95% interval: how many")
    n_measurements: int | None = None
    # Absent for a kernel kit's entries (a model asked what `settled: false` meant on each; mp31).
    settled: bool | None = Field(default=None, description="program kits: true where its runs, with its earlier "
                                 "ones, are 5+ all alike (exact): it ran no more (runs: how many it made here; 0: "
                                 "exact before)")
    rank_before: int | None = None
    rank_after: int | None = None
    # What the order compares (the store's rank_score, before and after): the pessimistic end of the
    # rounds' own interval, which can differ from the interval shown where rounds were unresolved.
    rank_score_before: float | None = None
    rank_score_after: float | None = None
    # And whether the score was from too few runs for a 95% interval: it ranks after those with one.
    spread_unknown_before: bool = False
    spread_unknown_after: bool = False


class MeasurementSet(BaseModel):
    run_id: str
    kit: str
    measured_at: datetime
    rounds: int
    splits: list[str]
    direction: str = "maximize"
    entries: list[Remeasured]
    order_before: list[str] = Field(default_factory=list, description="finalists by pessimistic bound, as recorded")
    order_after: list[str] = Field(default_factory=list, description="the same after pooling the new rounds")
    changed: list[str] = Field(default_factory=list, description="finalists whose order reversed with one whose "
                               "interval was apart from theirs before or is after (not a swap within noise)")
    within_noise_of_top: list[str] = Field(default_factory=list, description="finalists the top is not "
                                           "established as better than (rule)")
    batches: int = Field(default=1, description="dev batches run: after one, pooling may make a candidate not "
                         "measured a version's best, and the next batch measures every finalist again with it")
    added_after_pooling: list[str] = Field(default_factory=list, description="the candidates those later batches "
                                           "added")
    better_than_top: list[str] = Field(default_factory=list, description="of those, the ones the paired rounds "
                                       "find significantly better than the top, which leads by the unpaired "
                                       "bounds only (its interval is narrower)")
    rule: str = RULE
    contended: bool = False
    processes_per_side: int | None = Field(default=None, description="a kernel kit's: each side, the baseline's "
                                           "included, timed in this many processes (3 in a batch of up to 6 "
                                           "sides, 3 on a GPU)")
    pooled: bool = Field(default=True, description="whether the new rounds were recorded as measurements of the "
                         "finalists; false when the run was timed by an earlier timing method, whose scores these "
                         "rounds cannot be pooled with (note says so)")
    heldout_set: str | None = Field(default=None, description="the held-out set measured (as evaluate's "
                                    "metrics.heldout_set): one per evaluation service")
    note: str | None = None
    version_gains: list[str] = Field(default_factory=list, description="after pooling: the gain of each team "
                                     "version whose best, or the best before it, was measured, as run_report's "
                                     "versions[].gain")

    # Whether the run kept this call's paired rounds and the set: what run_report's version gains read.
    _kept: bool = PrivateAttr(default=True)

    @computed_field(description="what orders the finalists: why a higher score in this batch can rank lower")
    @property
    def ranked_by(self) -> str:  # a model read a finalist scoring higher here yet ranked second as a bug (mp47)
        end = "lower" if self.direction == "maximize" else "upper"
        return (f"the {end} end of each finalist's pooled 95% interval (pooled_interval), so a higher score in this "
                "batch can rank lower; one from too few runs for such an interval (pooled_runs, shown then) after "
                "every one with it")

    def add_note(self, said: str) -> MeasurementSet:
        """``said`` after whatever the note already says, as a clause of its own (two ran together
        unpunctuated: "the new rounds pool with these the order held"; mp53)."""
        joint = " " if not self.note or self.note.rstrip().endswith((".", ";", ":")) else "; "
        self.note = joint.join(filter(None, [self.note, said]))
        return self

    # Kept for programs and the report; the model reads the order they give (rank_before, rank_after).
    # And the rule: ~330 characters in every reply, the same each time (mp42); the fields it decides
    # (changed, within_noise_of_top) say what they hold.
    TEXT_OMIT: ClassVar[frozenset[str]] = frozenset({"entries.rank_score_before", "entries.rank_score_after",
                                                    "entries.spread_unknown_before", "entries.spread_unknown_after",
                                                    "rule"})
