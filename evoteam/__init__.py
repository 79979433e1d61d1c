"""evoteam: evolving agent teams for open-ended optimisation, as MCP servers for coding agents."""

import os
import sys
from collections.abc import Mapping
from pathlib import Path

__version__ = "0.1.0"


def evoteam_home(env: Mapping[str, str] | None = None) -> Path:
    """evoteam's own folder: `$EVOTEAM_HOME`, else `~/.evoteam` (the `HOME` of `env`)."""
    env = os.environ if env is None else env
    if env.get("EVOTEAM_HOME"):
        return Path(env["EVOTEAM_HOME"])
    return (Path(env["HOME"]) if env.get("HOME") else Path.home()) / ".evoteam"


def python_module_args(module: str, *args: str) -> list[str]:
    """Arguments for this Python to run `module`: `-P -m module args`. `-P` keeps the working
    folder off `sys.path`: evoteam's processes start in a project or a role's worktree, where
    a file named like a module (`json.py`, a candidate called `random.py`) would otherwise be
    imported in their place, outside any sandbox."""
    return ["-P", "-m", module, *args]


def python_module_command(module: str, *args: str) -> list[str]:
    """The whole command: this interpreter, then `python_module_args`."""
    return [sys.executable, *python_module_args(module, *args)]
