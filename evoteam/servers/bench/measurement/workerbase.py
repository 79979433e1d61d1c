"""What every part of a bench worker shares: the failure it reports, and how an exception becomes
one clear message (the candidate's traceback, truncated)."""

from __future__ import annotations

import traceback
from pathlib import Path


class Failure(Exception):
    def __init__(self, status: str, message: str, flagged: bool = False):
        super().__init__(message)
        self.status = status
        self.message = message
        self.flagged = flagged


def _tail(text: str, limit: int = 1500) -> str:
    return text if len(text) <= limit else "..." + text[-limit:]


# The evoteam package: its frames are the harness's, not the candidate's.
_HARNESS = str(Path(__file__).resolve().parents[3]) + "/"


def _candidate_traceback(exc: BaseException) -> str:
    """The traceback less the harness's own frames and the import machinery's, every exception of
    its chain alike (a cause stays said): a candidate with a syntax error read ~800 characters of
    worker.py and importlib frames around its one line (mp53). All of it where nothing but the
    harness is left (its own failure, ours to debug), a syntax error aside (its text names the line)."""
    te = traceback.TracebackException(type(exc), exc, exc.__traceback__)
    seen: set[int] = set()
    kept = 0
    todo = [te]
    while todo:  # the exception, its __cause__ and __context__, each once
        one = todo.pop()
        if id(one) in seen:
            continue
        seen.add(id(one))
        frames = [f for f in one.stack if not (f.filename.startswith(_HARNESS) or f.filename.startswith("<frozen "))]
        kept += len(frames)
        one.stack = traceback.StackSummary.from_list(frames)
        todo += [x for x in (one.__cause__, one.__context__) if x is not None]
    if not kept and not isinstance(exc, SyntaxError):
        return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return "".join(te.format())


def _exc_message(exc: BaseException, memory_mb: int | None, harness: bool = False) -> str:
    """One clear message: ``harness``, the worker's own failure, keeps every frame (ours to debug)."""
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)) if harness else \
        _candidate_traceback(exc)
    head = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, MemoryError) or "out of memory" in str(exc).lower():
        head = (f"the candidate ran out of memory (cap {memory_mb} MiB): {type(exc).__name__}: {exc}. "
                "Allocate less; large temporaries are the usual cause")
    return head + "\n" + _tail(tb)
