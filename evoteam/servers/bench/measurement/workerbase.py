"""What every part of a bench worker shares: the failure it reports, and how an exception becomes
one clear message (the candidate's traceback, truncated)."""

from __future__ import annotations

import traceback


class Failure(Exception):
    def __init__(self, status: str, message: str, flagged: bool = False):
        super().__init__(message)
        self.status = status
        self.message = message
        self.flagged = flagged


def _tail(text: str, limit: int = 1500) -> str:
    return text if len(text) <= limit else "..." + text[-limit:]


def _exc_message(exc: BaseException, memory_mb: int | None) -> str:
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    head = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, MemoryError) or "out of memory" in str(exc).lower():
        head = (f"the candidate ran out of memory (cap {memory_mb} MiB): {type(exc).__name__}: {exc}. "
                "Allocate less; large temporaries are the usual cause")
    return head + "\n" + _tail(tb)
