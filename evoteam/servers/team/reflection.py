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
