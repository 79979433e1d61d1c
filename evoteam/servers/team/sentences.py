"""Sentences of a status line: a role's report cut without cutting a sentence in half, and the
run's best as `evoteam team status` and the supervisor's live view say it."""

from __future__ import annotations

import re

# A sentence ends at . ! ? or a line break, followed by white space.
_BOUNDARY = re.compile(r"(?<=[.!?])\s+|\n+")


def sentence_tail(text: str, limit: int) -> str:
    """The last whole sentences of `text` that fit in `limit` characters, after "… " when
    something was left out. A report's end is where a role concludes; a single sentence longer
    than the limit is cut at a word, also marked."""
    text = text.strip()
    if len(text) <= limit:
        return text
    window = text[-(limit - 2):]
    match = _BOUNDARY.search(window)
    if match and match.end() < len(window):
        return "… " + window[match.end():].strip()
    words = window.split(" ", 1)
    return "… " + (words[1] if len(words) > 1 else window)


def describe_team_best(status) -> str:
    """A team status's best (models.TeamStatus, or quickstatus's view of the same; its interval
    already a 95% one or none), as knowledge/bestline.py names it."""
    from evoteam.servers.knowledge.bestline import named_best

    return named_best(status.best_score, status.best_interval, getattr(status, "best_candidate_id", None),
                      getattr(status, "paired_best", None), getattr(status, "best_within_noise_of", None))


def describe_spend(status) -> str:
    """"$1.20 of $10.00", and where no cost was recorded (team_status's costs_recorded), that the
    figure is not what was spent: "spent $0.00 of $10.00" beside team.budget's "costs unrecorded"
    (mp71)."""
    budget = "no budget" if status.budget_usd is None else f"${status.budget_usd:.2f}"
    return f"${status.spent_usd:.2f} of {budget}" + ("" if getattr(status, "costs_recorded", True)
                                                    else " (costs unrecorded: team budget counts versions)")
