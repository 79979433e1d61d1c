"""Destination passing style (DPS): whether a candidate writes into outputs it is given, and how
much of a lead over one that returns its outputs that alone can be.

A kernel in DPS writes into output slots the harness allocated outside the clock; one that returns
its outputs allocates them inside it. On a memory-bound kernel the same arithmetic read up to 1.3x
faster in DPS through the bench, the more the shorter its call: 1.02-1.19x over rmsnorm_cpu's
workloads (geometric mean), 1.20-1.29x on its calls of 0.3-0.4 ms, about 1.0x on those of 2 ms
(docs/bench.md, *Outputs given or allocated*; 1.08-1.13x was a dev-workload mean, and a rewrite
read 1.16x (1.12-1.21) on held-out shapes, mp56). A lead of a DPS candidate over a returning one
within that share is not a faster kernel, and every reading of a lead says so alike: run_report's
version gain, remeasure's better_than_top and note, compare's verdict, and the trajectory's new
best (which announced a same-work rewrite into DPS as the run's new best while run_report called
it a stall; mp56). Read from the source, never run: the store and the report use it too.
"""

from __future__ import annotations

import ast
import json

STYLE_SHARE = (1.02, 1.30)  # destination passing over returning, the same arithmetic, memory-bound (docs/bench.md)
STYLE_NAME = "destination passing style's share"  # what decided a lead that is no more than it
FLAG = "DESTINATION_PASSING_STYLE"


def _flag(code: str) -> bool | None:
    """The module-level flag as the worker reads it (``bool(module.DESTINATION_PASSING_STYLE)``,
    False when unset), from the source: the last plain or annotated assignment of a constant;
    None where the source sets it otherwise (an expression, globals(), setattr), which only
    running it would tell."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    found: bool | None = False
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AnnAssign) and node.value is not None else []
        if any(isinstance(t, ast.Name) and t.id == FLAG for t in targets):
            found = bool(node.value.value) if isinstance(node.value, ast.Constant) else None
    if found is False and any(isinstance(n, ast.Constant) and n.value == FLAG or
                              isinstance(n, ast.Name) and n.id == FLAG for n in ast.walk(tree)):
        return None  # named, but not set by a plain assignment at module level
    return found


def declares_dps(code: str) -> bool:
    """Whether a candidate file sets DESTINATION_PASSING_STYLE to a true constant at module level (read, not run)."""
    return _flag(code) is True


def python_file(code: str | None) -> bool:
    """A candidate given as Python source (a Solution JSON says its style in its spec instead,
    destination passing by default, which reading the source would take for "returns")."""
    if not code:
        return False
    try:
        return not isinstance(json.loads(code), dict)
    except ValueError:
        return True


def style_of(code: str | None) -> str | None:
    """"dps" or "returns" for a Python file, None where the source does not say (a Solution JSON, a
    flag set by an expression: a misread style would take a same-style lead for the style's share)."""
    if not python_file(code):
        return None
    flag = _flag(code)
    return None if flag is None else "dps" if flag else "returns"


def passes_over_returns(own_style: str | None, other_style: str | None) -> bool:
    """Whether ``own_style`` is destination passing and ``other_style`` returns (style_of's words):
    the one pair of styles whose lead may be the style's share alone."""
    return own_style == "dps" and other_style == "returns"


def dps_over_returning(own_code: str | None, other_code: str | None) -> bool:
    """Whether ``own_code`` passes destination style and ``other_code`` returns its outputs."""
    return passes_over_returns(style_of(own_code), style_of(other_code))


def share_text(of: str = "") -> str:
    """The share as replies say it (``of``: of what, said after the numbers)."""
    return f"{STYLE_SHARE[0]:.2f}-{STYLE_SHARE[1]:.2f}x{of}, most on short calls"


def within_share(low: float) -> bool:
    """Whether a lead whose interval starts at ``low`` could be the style's share alone."""
    return low <= STYLE_SHARE[1]


async def styles_of(store, ids, missing: tuple[type[BaseException], ...] = (Exception,)) -> dict[str, str | None]:
    """The output style of each of ``ids`` from its code in ``store`` (anything with an async
    ``get_candidate``), None where the read raises one of ``missing`` (the kit's baseline side, one
    gone; by default any failure: a read that fails costs a line's style clause, never the reply)."""
    styles: dict[str, str | None] = {}
    for cid in dict.fromkeys(ids):
        try:
            styles[cid] = style_of((await store.get_candidate(cid)).code)
        except missing:
            styles[cid] = None
    return styles
