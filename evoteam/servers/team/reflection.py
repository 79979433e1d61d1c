"""What `team.reflect` answers: the history entry it recorded and the version's result by the
numbers (report/summary.py), so the supervisor sees whether the gain it reflects on is real."""

from __future__ import annotations

from pydantic import Field

from evoteam.report.summary import VersionLine
from evoteam.servers.knowledge.models import HistoryEntry


class Reflection(HistoryEntry):
    """The recorded reflection, and what the reflected version achieved: its best with the
    interval, its gain over the best before it and whether that gain is significant."""

    version_result: VersionLine | None = None
    versions_without_significant_gain: int = Field(default=0, description="versions in a row, up to the newest, "
                                                   "without a significant gain: the stop rule counts these")
    roles_not_ended: list[str] = Field(default_factory=list, description="roles of the reflected version whose "
                                       "sessions have not ended (planned or running): its result may still move")
    remeasure_first: str | None = Field(default=None, description="set where the newest dev re-measurement did "
                                        "not measure the version's best (run_report's remeasure_missing): what to "
                                        "do before crowning it or designing on its gain")


def remeasure_first(line: VersionLine | None, missing: list[str]) -> str | None:
    """What a reflection on a version whose best no re-measurement has measured says: a model
    reflected on v1's gain as significant with v1's best in remeasure_missing, unsure whether the
    skill's re-measurement was per version or once at the end (mp70)."""
    if line is None or not line.best_candidate_id or line.best_candidate_id not in missing:
        return None
    return (f"the newest re-measurement did not measure v{line.version}'s best {line.best_candidate_id}: "
            "bench.remeasure on the run (it measures every version's best) before you crown it or design the next "
            "version on its gain, which is read here from separate evaluations")
