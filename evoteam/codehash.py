"""The identity of a candidate's code: a hash that ignores what cannot change what runs.

Two files that differ only in comments, docstrings, blank lines, trailing spaces, line endings or
the formatting of their Python are the same candidate: evaluating the copy adds measurements to
the first one instead of making a second whose lucky draw could become the best. Python is
compared by its syntax tree without docstrings; a FlashInfer-Bench Solution (JSON) by its
canonical JSON; anything else by its text with line endings and trailing spaces normalised.

Docstrings were once kept (code can read them). Then a model driving the product re-typed the
best candidate with another module docstring: a second candidate, whose lucky draw became a team
version's best. Dropping them is safe enough: code that reads its own `__doc__` is rare; comments
were already ignored although `inspect.getsource` could read them; and every pooled measurement was
itself measured and checked by the bench on the code it was given (a failing one fails the pooled
candidate), so pooling never adds a number the bench did not produce.
"""

from __future__ import annotations

import ast
import hashlib
import json

# Bodies that can open with a docstring (ast.get_docstring's own list).
_DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def _without_docstrings(tree: ast.Module) -> ast.Module:
    """``tree`` with each body's docstring removed: only a first statement that is a plain string
    (an f-string is not a docstring; a string later in a body is code like any other)."""
    for node in ast.walk(tree):
        if isinstance(node, _DOCUMENTED) and ast.get_docstring(node, clean=False) is not None:
            node.body = node.body[1:]
    return tree


def normalised_code(code: str) -> str:
    text = code.replace("\r\n", "\n").replace("\r", "\n")
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            return "json:" + json.dumps(json.loads(stripped), sort_keys=True, separators=(",", ":"))
        except ValueError:
            pass
    try:
        tree = _without_docstrings(ast.parse(text))
        return "python:" + ast.dump(tree, annotate_fields=True, include_attributes=False)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return "text:" + "\n".join(line.rstrip() for line in stripped.split("\n"))


def code_hash(code: str) -> str:
    """``sha256:<hex16>`` of the normalised code (64 bits: enough to tell candidates of one run apart)."""
    return "sha256:" + hashlib.sha256(normalised_code(code).encode("utf-8", "surrogatepass")).hexdigest()[:16]
