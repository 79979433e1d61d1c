"""The identity of a candidate's code: a hash that ignores what cannot change what runs.

Two files that differ only in comments, docstrings, blank lines, trailing spaces, line endings or
the formatting of their Python are the same candidate: evaluating the copy adds measurements to
the first one instead of making a second whose lucky draw could become the best. Python is
compared by its syntax tree without docstrings; a FlashInfer-Bench Solution (JSON) by its
canonical JSON; anything else by its text with line endings and trailing spaces normalised.

The names a function gives its locals count no more (mp56: a copy of the run's best with its
local names changed was a second candidate whose draw became the run's best): each is read as its
place of first appearance, in functions whose names the compiler resolves from their own body
alone (no nested function, class, lambda or comprehension, no ``global`` or ``nonlocal``, no
string that spells a local's name, and no module that spells a way of reading names at run time,
``locals``, frames, ``getattr``, ``eval`` and their kind: any of these keeps the names as written).
Parameters keep their names.

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
import re

# Bodies that can open with a docstring (ast.get_docstring's own list).
_DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def _without_docstrings(tree: ast.Module) -> ast.Module:
    """``tree`` with each body's docstring removed: only a first statement that is a plain string
    (an f-string is not a docstring; a string later in a body is code like any other)."""
    for node in ast.walk(tree):
        if isinstance(node, _DOCUMENTED) and ast.get_docstring(node, clean=False) is not None:
            node.body = node.body[1:]
    return tree


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp, ast.SetComp,
           ast.DictComp, ast.GeneratorExp)
# Ways code reads a function's local names at run time: where the module spells any of them, as a
# name or an attribute, names are kept as written (a renamed copy that failed through one pooled into,
# and failed, the run's passing best; review 2026-12-06).
_READS_NAMES = {"locals", "vars", "eval", "exec", "globals", "dir", "builtins", "__builtins__", "inspect", "getattr",
                "__import__", "compile"}
# ...and as attributes (frames, code objects), which np.stack, re.compile or model.eval() are not.
_READS_ATTRIBUTES = {"f_locals", "f_back", "f_globals", "_getframe", "currentframe", "getframeinfo", "co_varnames",
                     "__dict__", "__code__"}


def _parameters(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.arg]:
    a = fn.args
    return [*a.posonlyargs, *a.args, *([a.vararg] if a.vararg else []), *a.kwonlyargs, *([a.kwarg] if a.kwarg else [])]


def _body_nodes(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.AST]:
    """Every node of ``fn``'s body, in a fixed order (its defaults, annotations and decorators are
    read in the enclosing scope: not its)."""
    return [n for stmt in fn.body for n in ast.walk(stmt)]


def _bound(node: ast.AST) -> str | None:
    """The local name ``node`` binds, if it binds one."""
    if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
        return node.id
    if isinstance(node, ast.alias):
        return node.asname or node.name.split(".")[0]
    if isinstance(node, ast.ExceptHandler) or isinstance(node, (ast.MatchAs, ast.MatchStar)):
        return node.name
    if isinstance(node, ast.MatchMapping):
        return node.rest
    return None


def _reads_names(tree: ast.Module) -> bool:
    """Whether the module spells any way of reading local names at run time (_READS_NAMES)."""
    return any((isinstance(n, ast.Name) and n.id in _READS_NAMES) or
               (isinstance(n, ast.Attribute) and n.attr in _READS_ATTRIBUTES) or
               # `from builtins import locals as L`: the name imported, whatever it is bound to
               (isinstance(n, ast.alias) and ({n.name.split(".")[0], n.name.split(".")[-1], n.asname} &
                                              (_READS_NAMES | _READS_ATTRIBUTES))) or
               (isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] in {"builtins", "inspect", "sys"})
               for n in ast.walk(tree))


def _renamable(fn: ast.FunctionDef | ast.AsyncFunctionDef, names: set[str]) -> bool:
    """No nested scope, no global or nonlocal, and no string that spells one of its local ``names``
    as a word (numexpr.evaluate("x * w"), a DataFrame query: names read from text)."""
    nodes = _body_nodes(fn)
    if any(isinstance(n, (*_SCOPES, ast.Global, ast.Nonlocal)) for n in nodes):
        return False
    texts = [n.value for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    return not any(re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", text) for text in texts for name in names)


def _locals_renamed(tree: ast.Module) -> ast.Module:
    """``tree`` with each renamable function's locals named by their order of first appearance (a
    name no Python code can spell, so none meets a global of the same text). Parameters keep
    theirs: a caller may pass them by name (a program kit's evaluator), so two signatures that
    differ are two codes."""
    if _reads_names(tree):
        return tree
    for fn in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]:
        nodes, parameters = _body_nodes(fn), {p.arg for p in _parameters(fn)}
        names = [b for n in nodes if (b := _bound(n)) is not None and b not in parameters]
        if not _renamable(fn, set(names)):
            continue
        order = {name: f"local#{i}" for i, name in enumerate(dict.fromkeys(names))}
        for n in nodes:
            if isinstance(n, ast.Name) and n.id in order:
                n.id = order[n.id]
            elif isinstance(n, ast.alias) and _bound(n) in order:
                # `import a.b` binds `a` (the package), `import a.b as c` binds the module a.b: kept apart
                n.asname = order[n.asname] if n.asname else order[n.name.split(".")[0]] + " (the package)"
            elif isinstance(n, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and n.name in order:
                n.name = order[n.name]
            elif isinstance(n, ast.MatchMapping) and n.rest in order:
                n.rest = order[n.rest]
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
        tree = _locals_renamed(_without_docstrings(ast.parse(text)))
        return "python:" + ast.dump(tree, annotate_fields=True, include_attributes=False)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return "text:" + "\n".join(line.rstrip() for line in stripped.split("\n"))


def code_hash(code: str) -> str:
    """``sha256:<hex16>`` of the normalised code (64 bits: enough to tell candidates of one run apart)."""
    return "sha256:" + hashlib.sha256(normalised_code(code).encode("utf-8", "surrogatepass")).hexdigest()[:16]
