"""Markdown views of a run: the learnings document and the evolution history (the papers'
LEARNINGS.md and HISTORY.md)."""

from __future__ import annotations

from evoteam.servers.knowledge.models import (
    HistoryDocument,
    HistoryEntry,
    Learning,
    LearningsDocument,
)

# The document's text is built with no third-party import (learningsdoc.py); re-exported here.
from evoteam.servers.knowledge.learningsdoc import (  # noqa: E402,F401
    KIND_TITLES,
    MIN_LINE_CHARS,
    LearningsDraft,
    _learning_line,
)


def render_learnings(run_id: str, goal: str, learnings: list[Learning], max_chars: int = 12_000) -> LearningsDocument:
    """Render the current (not superseded) learnings of a list, grouped by kind, most confident
    and newest first, cut to `max_chars` with a pointer to search for the rest."""
    current = [item for item in learnings if item.superseded_by is None]
    by_kind: dict[str, list[Learning]] = {}
    for item in sorted(current, key=lambda x: (-x.confidence, -x.provenance.created_at.timestamp())):
        by_kind.setdefault(item.kind, []).append(item)
    draft = LearningsDraft(run_id, goal, len(current), max_chars)
    for kind in KIND_TITLES:
        draft.add(kind, by_kind.get(kind, []))
    return draft.finish()


HISTORY_CHARS = 20_000  # the history document's default size: the newest entries that fit


def _history_section(entry: HistoryEntry) -> str:
    version = f"team v{entry.team_version}" if entry.team_version is not None else "no team version"
    who = f" by {entry.provenance.role}" if entry.provenance.role else ""
    parts = [f"\n## {version} — {entry.provenance.created_at:%Y-%m-%d %H:%M} UTC{who} (`{entry.id}`)\n"]
    for title, text in (("Observed behaviour", entry.observed_behaviour), ("Diagnosis", entry.diagnosis),
                        ("Design change", entry.design_change), ("Outcome", entry.outcome)):
        if text:
            parts.append(f"\n**{title}.** {text.strip()}\n")
    return "".join(parts)


def history_entry_chars(entry: HistoryEntry) -> int:
    """The characters an entry takes in the history document."""
    return len(_history_section(entry))


def render_history(run_id: str, goal: str, entries: list[HistoryEntry], total: int | None = None,
                   max_chars: int = HISTORY_CHARS) -> HistoryDocument:
    """Render the evolution history in time order: the newest entries that fit in `max_chars`
    (at least the newest one, clipped if it alone is longer), with a pointer to the earlier ones."""
    total = len(entries) if total is None else total
    sections: list[str] = []
    used = 0
    for entry in reversed(entries):  # newest first, until full
        text = _history_section(entry)
        if sections and used + len(text) > max_chars:
            break
        if not sections and len(text) > max_chars:
            text = text[: max_chars - 2].rstrip() + " …\n"
        sections.append(text)
        used += len(text)
    sections.reverse()
    parts = [f"# Evolution history — run `{run_id}`\n\nGoal: {' '.join(goal.split())[:500]}\n"]
    if total:  # a later re-measurement can overturn a verdict an entry kept (mp39 read one as current)
        parts.append("\n_Scores and verdicts below are as written then; `run_report` gives the current ones._\n")
    earlier = total - len(sections)
    if earlier > 0:
        parts.append(f"\n_… {earlier} earlier entries not shown: use `history` with view=list (paged) to read "
                     f"them._\n")
    parts += sections
    if not total:
        parts.append("\n_No history yet._\n")
    return HistoryDocument(run_id=run_id, markdown="".join(parts), entries=total, shown=len(sections),
                           truncated=earlier > 0)
