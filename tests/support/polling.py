"""Waiting for something another process does, without a fixed sleep."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(predicate: Callable[[], object], seconds: float = 15.0) -> bool:
    """Poll `predicate` every 50 ms until it is true or `seconds` have passed; its last value."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return bool(predicate())
