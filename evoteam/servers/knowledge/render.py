"""Markdown views of a run: the learnings document and the evolution history (the papers'
LEARNINGS.md and HISTORY.md)."""

from __future__ import annotations

from evoteam.servers.knowledge.models import (
    HistoryDocument,
    HistoryEntry,
    Learning,
    LearningsDocument,
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


def render_learnings(run_id: str, goal: str, learnings: list[Learning], max_chars: int = 12_000) -> LearningsDocument:
    """Render current (not superseded) learnings grouped by kind, most confident first,
    cut to `max_chars` with a pointer to search for the rest."""
    header = f"# Learnings — run `{run_id}`\n\nGoal: {' '.join(goal.split())[:500]}\n"
    current = [item for item in learnings if item.superseded_by is None]
    by_kind: dict[str, list[Learning]] = {}
    for item in sorted(current, key=lambda x: (-x.confidence, x.provenance.created_at)):
        by_kind.setdefault(item.kind, []).append(item)
    parts, used, shown = [header], len(header), 0
    truncated = False
    for kind in KIND_TITLES:
        items = by_kind.get(kind)
        if not items:
            continue
        section = f"\n## {KIND_TITLES[kind]}\n\n"
        if used + len(section) > max_chars:
            truncated = True
            break
        parts.append(section)
        used += len(section)
        for item in items:
            line = _learning_line(item) + "\n"
            if used + len(line) > max_chars:
                truncated = True
                break
            parts.append(line)
            used += len(line)
            shown += 1
        if truncated:
            break
    if not current:
        parts.append("\n_No learnings yet._\n")
    if truncated:
        parts.append(f"\n… {len(current) - shown} more learnings not shown: use `search` or `learnings` "
                     f"(paged) to read them.\n")
    return LearningsDocument(run_id=run_id, markdown="".join(parts), shown=shown, total=len(current),
                             truncated=truncated)


def render_history(run_id: str, goal: str, entries: list[HistoryEntry]) -> HistoryDocument:
    """Render the evolution history, one section per entry in time order."""
    parts = [f"# Evolution history — run `{run_id}`\n\nGoal: {' '.join(goal.split())[:500]}\n"]
    for entry in entries:
        version = f"team v{entry.team_version}" if entry.team_version is not None else "no team version"
        who = f" by {entry.provenance.role}" if entry.provenance.role else ""
        parts.append(f"\n## {version} — {entry.provenance.created_at:%Y-%m-%d %H:%M} UTC{who} (`{entry.id}`)\n")
        for title, text in (("Observed behaviour", entry.observed_behaviour), ("Diagnosis", entry.diagnosis),
                            ("Design change", entry.design_change), ("Outcome", entry.outcome)):
            if text:
                parts.append(f"\n**{title}.** {text.strip()}\n")
    if not entries:
        parts.append("\n_No history yet._\n")
    return HistoryDocument(run_id=run_id, markdown="".join(parts), entries=len(entries))
