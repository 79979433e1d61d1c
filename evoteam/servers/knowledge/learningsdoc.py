"""The learnings document's text (the papers' LEARNINGS.md), built with no third-party import:
the store renders it (render.py, local.py) and `evoteam kb learnings` builds the same text from a
local file on its own (quickread.py)."""

from __future__ import annotations

from types import SimpleNamespace

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


def _learning_line(item, owner: str | None = None) -> str:
    # `item`: a models.Learning, or a row with its attributes (quickread.py). A learning written
    # by someone other than the run's `owner` names its user: a role is any name the writer gave
    # (a colleague's dead end signed with the owner's name read "by alice"; model-play 2026-12-04).
    meta = [f"`{item.id}`", f"confidence {item.confidence:.2f}"]
    user = getattr(item.provenance, "user", None)
    by = [user] if owner is not None and user and user != owner else []
    if item.provenance.role:
        by.append(f"as {item.provenance.role}" if by else item.provenance.role)
    if by:
        meta.append("by " + " ".join(by))
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
MIN_LINE_CHARS = len(_learning_line(SimpleNamespace(
    id="lrn_0000000000000000", text="x", confidence=0.0, tags=[], evidence=[],
    provenance=SimpleNamespace(role=None, team_version=None)))) + 1


class LearningsDraft:
    """The learnings document being filled kind by kind (in `KIND_TITLES` order), each kind's
    current learnings most confident and newest first, until `max_chars`; the rest is pointed
    to search."""

    def __init__(self, run_id: str, goal: str, total: int, max_chars: int = 12_000, owner: str | None = None):
        header = f"# Learnings — run `{run_id}`\n\nGoal: {' '.join(goal.split())[:500]}\n"
        self.run_id, self.total, self.max_chars, self.owner = run_id, total, max_chars, owner
        self.parts, self.used, self.shown, self.truncated = [header], len(header), 0, False

    def room(self) -> int:
        """At most how many more learnings can fit (0 once the document is full)."""
        if self.truncated:
            return 0
        return max(0, self.max_chars - self.used) // MIN_LINE_CHARS + 1

    def add(self, kind: str, items: list) -> None:
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
            line = _learning_line(item, self.owner) + "\n"
            if self.used + len(line) > self.max_chars:
                self.truncated = True
                return
            self.parts.append(line)
            self.used += len(line)
            self.shown += 1

    def markdown(self) -> str:
        parts = list(self.parts)
        if not self.total:
            parts.append("\n_No learnings yet._\n")
        if self.truncated:
            parts.append(f"\n… {self.total - self.shown} more learnings not shown: use `search` or `learnings` "
                         f"(paged) to read them.\n")
        return "".join(parts)

    def finish(self):
        """The document as the store answers it (models.LearningsDocument)."""
        from evoteam.servers.knowledge.models import LearningsDocument

        return LearningsDocument(run_id=self.run_id, markdown=self.markdown(), shown=self.shown, total=self.total,
                                 truncated=self.truncated)
