"""Markdown views of a run: the learnings document and the evolution history (the papers'
LEARNINGS.md and HISTORY.md)."""

from __future__ import annotations

from evoteam.servers.knowledge.models import (
    HistoryDocument,
    HistoryEntry,
    Learning,
    LearningsDocument,
    Provenance,
)

# The order kinds appear in the document: what works first, what to avoid next.
KIND_TITLES = {
    "technique": "Techniques that work",
    "observation": "Observations",
    "workload": "Workload facts",
    "dead_end": "Dead ends (do not retry without new evidence)",
    "bug": "Bugs and pitfalls",
    "hypothesis": "Open hypotheses",
    "process": "Process and team lessons",
    "checkpoint": "Checkpoints",
}


def _learning_line(item: Learning) -> str:
    meta = [f"`{item.id}`", f"confidence {item.confidence:.2f}"]
    if item.provenance.role:
        meta.append(f"by {item.provenance.role}")
    if item.provenance.team_version is not None:
        meta.append(f"v{item.provenance.team_version}")
    if item.tags:
        meta.append("tags: " + ", ".join(item.tags))
    if item.evidence:
        meta.append("evidence: " + ", ".join(f"`{e}`" for e in item.evidence))
    text = " ".join(item.text.split())
    return f"- {text}  \n  <sub>{' · '.join(meta)}</sub>"


# The shortest line a learning can take (a one-character text, id and confidence): a bound on
# how many learnings can still fit, so the store reads no more rows than the document can show.
MIN_LINE_CHARS = len(_learning_line(Learning.model_construct(
    id="lrn_0000000000000000", text="x", confidence=0.0, tags=[], evidence=[],
    provenance=Provenance.model_construct(role=None, team_version=None)))) + 1


class LearningsDraft:
    """The learnings document being filled kind by kind (in `KIND_TITLES` order), each kind's
    current learnings most confident and newest first, until `max_chars`; the rest is pointed
    to search."""

    def __init__(self, run_id: str, goal: str, total: int, max_chars: int = 12_000):
        header = f"# Learnings — run `{run_id}`\n\nGoal: {' '.join(goal.split())[:500]}\n"
        self.run_id, self.total, self.max_chars = run_id, total, max_chars
        self.parts, self.used, self.shown, self.truncated = [header], len(header), 0, False

    def room(self) -> int:
        """At most how many more learnings can fit (0 once the document is full)."""
        if self.truncated:
            return 0
        return max(0, self.max_chars - self.used) // MIN_LINE_CHARS + 1

    def add(self, kind: str, items: list[Learning]) -> None:
        """One kind's learnings, best first; those that do not fit end the document."""
        if not items or self.truncated:
            return
        section = f"\n## {KIND_TITLES[kind]}\n\n"
        if self.used + len(section) > self.max_chars:
            self.truncated = True
            return
        self.parts.append(section)
        self.used += len(section)
        for item in items:
            line = _learning_line(item) + "\n"
            if self.used + len(line) > self.max_chars:
                self.truncated = True
                return
            self.parts.append(line)
            self.used += len(line)
            self.shown += 1

    def finish(self) -> LearningsDocument:
        parts = list(self.parts)
        if not self.total:
            parts.append("\n_No learnings yet._\n")
        if self.truncated:
            parts.append(f"\n… {self.total - self.shown} more learnings not shown: use `search` or `learnings` "
                         f"(paged) to read them.\n")
        return LearningsDocument(run_id=self.run_id, markdown="".join(parts), shown=self.shown, total=self.total,
                                 truncated=self.truncated)


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
    earlier = total - len(sections)
    if earlier > 0:
        parts.append(f"\n_… {earlier} earlier entries not shown: use `history` with view=list (paged) to read "
                     f"them._\n")
    parts += sections
    if not total:
        parts.append("\n_No history yet._\n")
    return HistoryDocument(run_id=run_id, markdown="".join(parts), entries=total, shown=len(sections),
                           truncated=earlier > 0)
