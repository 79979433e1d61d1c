"""evoteam: evolving agent teams for open-ended optimisation, as MCP servers for coding agents."""

import sys

__version__ = "0.1.0"


def python_module_args(module: str, *args: str) -> list[str]:
    """Arguments for this Python to run `module`: `-P -m module args`. `-P` keeps the working
    folder off `sys.path`: evoteam's processes start in a project or a role's worktree, where
    a file named like a module (`json.py`, a candidate called `random.py`) would otherwise be
    imported in their place, outside any sandbox."""
    return ["-P", "-m", module, *args]


def python_module_command(module: str, *args: str) -> list[str]:
    """The whole command: this interpreter, then `python_module_args`."""
    return [sys.executable, *python_module_args(module, *args)]
