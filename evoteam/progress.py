"""Progress of a long command on stderr, with an estimate of the time left, piped or not.

A terminal gets one line rewritten in place; a pipe or a log file gets a plain line for every
step done (and, within a step, a new message at most every `every_s` seconds; with more than
MANY steps, at most one line every `every_s` seconds), because a person reading `evoteam bench
remeasure RUN 2>&1 | tee log` needs to see it is still working too.
The estimate is the mean time per finished step times the steps left: honest enough for steps
of one kind (evaluations), and printed only once a step has finished.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

MANY = 100  # more steps than this (files of a corpus) are paced too, not one line each


def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 90:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 90:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def estimate(done: float, total: float, elapsed: float) -> str:
    """'about 2 min 10 s left', or '' before any step has finished."""
    if done <= 0 or total <= 0 or done >= total:
        return ""
    return f"about {_duration(elapsed / done * (total - done))} left"


class Lines:
    """Reports `step(done, total, message)` calls as lines (or one live line on a terminal)."""

    def __init__(self, title: str, stream: TextIO | None = None, every_s: float = 2.0, clock=time.monotonic):
        self.title, self.stream, self.every_s, self.clock = title, stream or sys.stderr, every_s, clock
        self.started = clock()
        self.live = bool(getattr(self.stream, "isatty", lambda: False)())
        self._last_print = None
        self._last_key: tuple = (None, None, None)
        self._open_line = False

    def step(self, done: float, total: float, message: str) -> None:
        now = self.clock()
        elapsed = now - self.started
        left = estimate(done, total, elapsed)
        count = f"{done:g}/{total:g}" if total else ""
        text = f"{self.title}: {count} {message}".rstrip() + f" ({_duration(elapsed)}" + (f", {left})" if left else ")")
        final = total > 0 and done >= total
        if self.live:
            self.stream.write("\r\033[K" + text[:200])
            self._open_line = True
        elif (final or self._last_print is None
              or ((done, total) != self._last_key[:2] and (total <= MANY or now - self._last_print >= self.every_s))
              or (now - self._last_print >= self.every_s and message != self._last_key[2])):
            self.stream.write(text + "\n")
            self._last_print = now
            self._last_key = (done, total, message)
        self.stream.flush()

    def close(self) -> None:
        """End the live line (a terminal keeps the last state as a line of its own)."""
        if self._open_line:
            self.stream.write("\n")
            self.stream.flush()
            self._open_line = False

    def __enter__(self) -> Lines:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
