"""Cutting a role's report to fit a status line without cutting a sentence in half."""

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
