"""The hook log: `~/.evoteam/logs/hooks.log` (or `EVOTEAM_HOOK_LOG`), where a hook's own failures go.

Standard library only: the hook entry, the warm process and the hooks themselves all write here,
and the entry must stay cheap to import.
"""

from __future__ import annotations

import os
import time


def log_path():
    from pathlib import Path

    if os.environ.get("EVOTEAM_HOOK_LOG"):
        return Path(os.environ["EVOTEAM_HOOK_LOG"])
    return Path.home() / ".evoteam" / "logs" / "hooks.log"


def log(line: str) -> None:
    try:
        path = log_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as fh:
            fh.write(time.strftime("%Y-%m-%dT%H:%M:%S ") + line.rstrip() + "\n")
    except OSError:
        pass
