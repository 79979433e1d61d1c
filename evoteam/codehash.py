"""The identity of a candidate's code: a hash that ignores what cannot change what runs.

Two files that differ only in comments, blank lines, trailing spaces, line endings or the
formatting of their Python are the same candidate: evaluating the copy adds measurements to the
first one instead of making a second whose lucky draw could become the best. Python is compared by
its syntax tree (docstrings are kept: code can read them); a FlashInfer-Bench Solution (JSON) by
its canonical JSON; anything else by its text with line endings and trailing spaces normalised.
"""

from __future__ import annotations

import ast
import hashlib
import json


def normalised_code(code: str) -> str:
    text = code.replace("\r\n", "\n").replace("\r", "\n")
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            return "json:" + json.dumps(json.loads(stripped), sort_keys=True, separators=(",", ":"))
        except ValueError:
            pass
    try:
        return "python:" + ast.dump(ast.parse(text), annotate_fields=True, include_attributes=False)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return "text:" + "\n".join(line.rstrip() for line in stripped.split("\n"))


def code_hash(code: str) -> str:
    """``sha256:<hex16>`` of the normalised code (64 bits: enough to tell candidates of one run apart)."""
    return "sha256:" + hashlib.sha256(normalised_code(code).encode("utf-8", "surrogatepass")).hexdigest()[:16]
