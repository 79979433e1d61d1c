"""evoteam: evolving agent teams for open-ended optimisation, as MCP servers for coding agents."""

# Only modules the interpreter has loaded before it runs anything (os with site, sys), and no
# `from __future__` (a module too): `python -m evoteam` runs this file while the working folder
# is still first on sys.path (forget_working_folder), where a project's json.py or re.py would
# be imported in place of the standard library's. Annotations are strings for the same reason.
import os
import sys

__version__ = "0.1.0"


def evoteam_home(env: "os._Environ[str] | dict[str, str] | None" = None) -> "os.PathLike[str]":
    """evoteam's own folder: `$EVOTEAM_HOME`, else `~/.evoteam` (the `HOME` of `env`)."""
    from pathlib import Path

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


def forget_working_folder() -> None:
    """Take the working folder off ``sys.path`` where Python put it there (``python -m evoteam``
    without ``-P``): started in a project folder, a candidate named ``copy.py`` or ``json.py``
    there was imported in place of the standard library's and stopped the server. evoteam itself
    is imported by then, so its own modules are still found."""
    if sys.flags.safe_path or not sys.path:
        return
    try:
        if os.path.realpath(sys.path[0] or os.curdir) == os.path.realpath(os.getcwd()):
            del sys.path[0]
    except OSError:  # a working folder that is gone
        pass


def python_module_command(module: str, *args: str) -> list[str]:
    """The whole command: this interpreter, then `python_module_args`."""
    return [sys.executable, *python_module_args(module, *args)]
