"""The trajectory's schema: where each candidate of a run stands, in creation order, as
`knowledge.trajectory` returns it (its rules: standing.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field, computed_field

from evoteam.servers.knowledge.models import BaseModel, CandidateStatus, Direction
from evoteam.servers.knowledge.readsql import ranked_by


class TrajectoryPoint(BaseModel):
    candidate_id: str
    at: datetime
    score: float | None = Field(description="the candidate's score now, every measurement of its code pooled: "
                                "points and verdicts move as measurements pool")
    score_interval: list[float] | None = None
    best_so_far: float | None = Field(description="score of the best candidate so far, ranked by the "
                                      "pessimistic end of each interval, a score with a 95% interval before "
                                      "one from too few runs (runs)")
    best_so_far_id: str | None = None
    new_best: bool = Field(default=False, description="it took the lead (or trails a best ahead by destination "
                           "passing style's share alone, or one its paired rounds beat: better_than) and clears the "
                           "last new best or, once there is one, the best just before it (none: x0): by intervals "
                           "(a busy one's widened, its low end ÷3 and high end ×3, against x0 too), or by the two's "
                           "paired rounds (bench.compare, bench.remeasure; pooled), which decide where they exist")
    within_noise_of: str | None = Field(default=None, description="the best it cannot be told apart from (\"x0\": "
                                        "the run's starting score): their paired rounds find no significant "
                                        "difference, or, where none decide, their intervals overlap, a busy one's "
                                        "(contended) widened, its low end ÷3 and high end ×3; or it is apart from it by "
                                        "output style alone (decided_by), as beside new_best")
    worse_than: str | None = Field(default=None, description="the best (\"x0\": the starting score) it is told apart "
                                   "from and below: by their paired rounds, or intervals that do not overlap (a busy one's "
                                   "widened, its low end ÷3 and high end ×3)")
    not_shown_better_than: str | None = Field(default=None, description="beside new_best: the other of those two, "
                                              "which it is not shown better than (not_shown_by says why)")
    not_shown_by: Literal["paired rounds", "intervals", "destination passing style's share"] | None = Field(
        default=None, description="why: their paired rounds find no difference (another compare only pools with "
        "them), their intervals overlap (bench.compare the two by id), or the two are apart by that style's "
        "share alone, one writing into outputs it is given (no faster kernel either way)")
    better_than: str | None = Field(default=None, description="the best it ranks below (its interval is wider) "
                                    "though their paired rounds find it better: the better of the two (bench.remeasure "
                                    "of both on a quiet machine lets the ranking follow)")
    decided_by: Literal["paired rounds", "paired rounds with the baseline", "intervals",
                        "destination passing style's share"] | None = Field(
        default=None, description="what decided new_best, within_noise_of or worse_than: the two candidates' kept "
        "paired rounds (bench.compare by id, bench.remeasure; pooled), against x0 a kernel's with the baseline "
        "(bench.compare with a_candidate_id \"baseline\"), or their separate intervals; \"destination passing "
        "style's share\": apart from it, by either, by no more than that style's share, one of the two writing "
        "into outputs it is given: no faster (or slower) kernel; none beside within_noise_of: apart, but measured "
        "on a busy machine")
    too_few_runs: bool | None = Field(default=None, description="it leads but does not clear the last new best "
                                      "(none yet: the starting score x0), or trails the best with a different "
                                      "score, and one of the two is a score from under 5 runs (a program's, or one "
                                      "recorded without an interval), whose spread is unknown: whether it beat that "
                                      "best, or is worse, is not known until both have run 5 times (bench.remeasure)")
    status: CandidateStatus
    verified: bool = False
    n_measurements: int = 1
    runs: int | None = Field(default=None, description="set only where the score is from too few runs for a 95% "
                             "interval: how many (score_interval is just their range)")
    contended: bool | None = Field(default=None, description="measured on a busy machine: a new_best only by "
                                   "paired rounds (bench.remeasure it beside the best), by an interval clear even "
                                   "widened, its low end ÷3 and high end ×3")
    code_hash: str | None = None
    note: str | None = None
    role: str | None
    team_version: int | None


class Trajectory(BaseModel):
    run_id: str
    direction: Direction
    points: list[TrajectoryPoint]
    best_score: float | None
    best_interval: list[float] | None = None
    best_runs: int | None = Field(default=None, description="set where the best is from too few runs for a 95% "
                                  "interval: how many")
    ndg: float | None

    @computed_field(description="what orders candidates: why a higher score can rank lower")
    @property
    def ranked_by(self) -> str:
        return ranked_by(self.direction)
