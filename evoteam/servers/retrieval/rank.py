"""Pure functions of the retrieval core: rank correlation, look-up ranking, query novelty,
the fallback query writer and the plausible range of a forecast. No I/O here."""

from __future__ import annotations

import math
import re
from collections import Counter

from evoteam.servers.retrieval.models import Direction, KnowledgeState

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9+#._-]{1,}")
STOPWORDS = frozenset("""
a an and are as at be but by can could do does for from has have how i if in into is it its
may more most not of on or our should so than that the their them then there these this those
to too under use used using was we what when where which while who why will with without would
you your best better faster way ways about any each other over such only also very much many one
""".split())


def spearman(xs: list[float], ys: list[float]) -> float | None:
    """Spearman's rank correlation (average ranks for ties); None when undefined."""
    if len(xs) != len(ys) or len(xs) < 2:
        return None
    rx, ry = _ranks(xs), _ranks(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    vx = sum((a - mx) ** 2 for a in rx)
    vy = sum((b - my) ** 2 for b in ry)
    if vx == 0 or vy == 0:
        return None
    return cov / math.sqrt(vx * vy)


def _ranks(values: list[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def better(direction: Direction, a: float, b: float) -> bool:
    return a > b if direction == "maximize" else a < b


def relative_gain(direction: Direction, realised: float, parent: float | None) -> float:
    """Signed improvement over the parent, relative to its magnitude (positive = better)."""
    if parent is None:
        return 0.0
    sign = 1.0 if direction == "maximize" else -1.0
    return sign * (realised - parent) / max(abs(parent), 1e-9)


def lookup_utility(direction: Direction, relevance: float, outcomes: list[tuple[float, float | None, bool | None]],
                   predicted: float | None, parent: float | None) -> float:
    """How useful a stored document looks for the next generation.

    Realised outcomes dominate: each outcome that beat its parent adds, each that did not
    subtracts, scaled by how much. Untested documents lean on relevance to the open questions
    and on whether their forecast beat the current parent.
    """
    if outcomes:
        votes = [(1.0 if imp else -1.0) if imp is not None else 0.0 for _, _, imp in outcomes]
        gains = [max(-1.0, min(1.0, relative_gain(direction, r, p))) for r, p, _ in outcomes]
        evidence = 1.0 * sum(votes) / len(votes) + 0.5 * sum(gains) / len(gains)
    else:
        evidence = 0.0
        if predicted is not None and parent is not None:
            evidence = 0.25 if better(direction, predicted, parent) else -0.1
    return evidence + 0.5 * relevance


def words(text: str) -> list[str]:
    return [w.lower().strip("._-") for w in _WORD.findall(text) if w.lower() not in STOPWORDS]


def similarity(a: str, b: str) -> float:
    """Jaccard similarity of two queries' content words."""
    wa, wb = set(words(a)), set(words(b))
    if not wa or not wb:
        return 1.0 if a.strip().lower() == b.strip().lower() else 0.0
    return len(wa & wb) / len(wa | wb)


def novel_queries(proposed: list[str], earlier: list[str], limit: int,
                  threshold: float = 0.8) -> tuple[list[str], list[str]]:
    """Split proposed queries into those unlike every earlier query (and each other) and
    the rejected near-duplicates."""
    kept, rejected = [], []
    seen = list(earlier)
    for q in proposed:
        q = " ".join(q.split())[:300]
        if not q:
            continue
        if len(kept) >= limit or any(similarity(q, s) >= threshold for s in seen):
            rejected.append(q)
            continue
        kept.append(q)
        seen.append(q)
    return kept, rejected


ANGLES = ("implementation details", "benchmark results", "paper method", "open source code",
          "known limitations", "state of the art", "optimisation tricks", "alternative approach",
          "worked example", "performance analysis", "survey comparison", "common pitfalls")


def distinctive_terms(evidence: list[str], background: list[str], exclude: set[str], limit: int = 40) -> list[str]:
    """Relevance feedback: words frequent in the best documents and rare in the worst ones
    (and in no earlier query), best first."""
    good = Counter()
    for text in evidence:
        good.update(set(w for w in words(text) if len(w) > 3))
    bad = Counter()
    for text in background:
        bad.update(set(w for w in words(text) if len(w) > 3))
    n_good, n_bad = max(len(evidence), 1), max(len(background), 1)
    scored = [((good[w] / n_good) - (bad[w] / n_bad), good[w], w) for w in good if w not in exclude]
    scored = [t for t in scored if t[0] > 0 or not background]
    scored.sort(key=lambda t: (-t[0], -t[1], t[2]))
    return [w for _, _, w in scored[:limit]]


def fallback_queries(state: KnowledgeState, earlier: list[str], evidence_texts: list[str], n: int,
                     task_hint: str = "", background_texts: list[str] | None = None) -> list[str]:
    """Queries written without a model. Each open question as asked; then one key word of a
    question with fresh terms that distinguish the best documents so far from the worst
    (relevance feedback, so later queries follow the evidence into new territory); then the
    question from other angles (method, benchmarks, code, limitations, ...). Anything too
    close to an earlier query is dropped."""
    questions = state.open_questions or ([task_hint] if task_hint else []) or state.known[:1]
    if not questions:
        return []
    used = Counter(w for q in earlier for w in words(q))
    fresh = distinctive_terms(evidence_texts, background_texts or [], set(used))
    candidates: list[str] = [" ".join(q.split()[:14]) for q in questions]
    keys = [words(q)[:4] or q.split()[:4] for q in questions]
    offset = len(earlier)
    for i in range(0, min(len(fresh), 18), 3):
        k = keys[(i // 3) % len(keys)]
        anchor = min(k, key=lambda w: (used[w], k.index(w)))  # the key word used least so far
        candidates.append(" ".join([anchor, *fresh[i:i + 3]]))
    for j in range(len(ANGLES)):
        k = keys[j % len(keys)]
        candidates.append(" ".join([*k, ANGLES[(j + offset) % len(ANGLES)]]))
    kept, _ = novel_queries(candidates, earlier, n)
    return kept


def score_bounds(parent: float | None, x0: float | None, best_known: float | None,
                 low: float | None = None, high: float | None = None) -> tuple[float, float]:
    """The range a forecast must fall in to be believed. Explicit bounds win; otherwise a
    wide band around the run's known scores (ten spans either side)."""
    anchors = [v for v in (parent, x0, best_known) if v is not None and math.isfinite(v)]
    if not anchors:
        lo, hi = -1e12, 1e12
    else:
        span = max(max(anchors) - min(anchors), max(abs(v) for v in anchors), 1e-6)
        lo, hi = min(anchors) - 10 * span, max(anchors) + 10 * span
    return (low if low is not None else lo, high if high is not None else hi)
