"""The active run of a project, as the hooks see it.

Mechanism (documented in docs/plugin.md): a small JSON file `<project>/.evoteam/active_run.json`.
It is written

- automatically, by the PostToolUse hook, when the session calls the knowledge server's
  `start_run` or the team server's `design_team` (the run id and version are read from the
  tool's result / input), and
- by hand with `evoteam hook activate RUN_ID` (e.g. to resume an older run), and removed with
  `evoteam hook deactivate`.

`EVOTEAM_RUN` in the environment overrides the file. The project directory is
`CLAUDE_PROJECT_DIR` when set, else the hook input's `cwd`, else the working directory.

Off switch for the Stop hook's "keep going": `EVOTEAM_AUTOCONTINUE=0` in the environment, or
a file `<project>/.evoteam/no-continue` (`evoteam hook pause` / `evoteam hook resume`).

This module imports only the standard library: hooks must start fast.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

STATE_DIR = ".evoteam"
STATE_FILE = "active_run.json"
NO_CONTINUE_FILE = "no-continue"


def project_dir(hook_input: dict[str, Any] | None = None, env: dict[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    for var in ("EVOTEAM_PROJECT_DIR", "CLAUDE_PROJECT_DIR"):
        if env.get(var):
            return Path(env[var])
    if hook_input and hook_input.get("cwd"):
        return Path(hook_input["cwd"])
    return Path.cwd()


ORIGIN_VAR = "EVOTEAM_SESSION_ORIGIN"  # set by evoteam.servers.team.launch.session_env
_OWN_MARKERS = ("[evoteam role=", "[evoteam supervisor wake")


def started_by_evoteam(hook_input: dict[str, Any] | None, env: dict[str, str] | None = None) -> str | None:
    """Why this session is one evoteam started itself (a headless role or supervisor wake), or
    None. Such sessions are driven by `evoteam supervise` / the team server; the hooks never
    steer them. Known by the environment the runner sets, or by the marker that opens the
    session's first prompt (the first lines of its transcript)."""
    env = os.environ if env is None else env
    if env.get(ORIGIN_VAR):
        return f"{ORIGIN_VAR}={env[ORIGIN_VAR]}"
    path = (hook_input or {}).get("transcript_path")
    if not path:
        return None
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for number, line in enumerate(fh):
                if number >= 8:
                    break
                if '"type":"user"' not in line.replace(" ", ""):
                    continue
                # the first user entry decides: its prompt opens with the marker or it does not
                return "marker" if any(m in line for m in _OWN_MARKERS) else None
    except OSError:
        return None
    return None


def state_path(project: Path) -> Path:
    return Path(project) / STATE_DIR / STATE_FILE


def read_state(project: Path, env: dict[str, str] | None = None) -> dict[str, Any] | None:
    """The active-run record of a project, or None. `EVOTEAM_RUN` overrides the file's run."""
    env = os.environ if env is None else env
    state: dict[str, Any] | None = None
    try:
        data = json.loads(state_path(project).read_text(encoding="utf-8"))
        if isinstance(data, dict) and isinstance(data.get("run_id"), str):
            state = data
    except (OSError, ValueError):
        state = None
    if env.get("EVOTEAM_RUN"):
        if state is None or state.get("run_id") != env["EVOTEAM_RUN"]:
            state = {"run_id": env["EVOTEAM_RUN"]}
    return state


def write_state(project: Path, state: dict[str, Any]) -> Path:
    """Write the record atomically (a temp file, then rename)."""
    path = state_path(project)
    if not path.parent.is_dir():
        from evoteam.plugin.gitexclude import keep_out_of_git

        keep_out_of_git(Path(project), [f"{STATE_DIR}/"])
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {**state, "updated_at": time.time()}
    import tempfile  # only writers need it; hooks that only read start faster

    fd, tmp = tempfile.mkstemp(prefix=".active_run.", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(state, fh, indent=2, sort_keys=True)
    os.replace(tmp, path)
    return path


def update_state(project: Path, **changes: Any) -> dict[str, Any] | None:
    state = read_state(project, env={})
    if state is None:
        return None
    state.update(changes)
    write_state(project, state)
    return state


def activate(project: Path, run_id: str, *, version: int | None = None, session_id: str | None = None) -> dict:
    """Make `run_id` the project's active run (keeps the loop-guard counters of the same run)."""
    old = read_state(project, env={}) or {}
    state: dict[str, Any] = {"run_id": run_id}
    if old.get("run_id") == run_id:
        state.update(old)
    else:
        state["activated_at"] = time.time()
    if version is not None:
        state["version"] = version
    if session_id:
        state["session_id"] = session_id
    write_state(project, state)
    return state


def deactivate(project: Path) -> bool:
    try:
        state_path(project).unlink()
        return True
    except FileNotFoundError:
        return False


def autocontinue_off(project: Path, env: dict[str, str] | None = None) -> str | None:
    """Why the Stop hook must not keep the session going, or None."""
    env = os.environ if env is None else env
    if env.get("EVOTEAM_AUTOCONTINUE", "").strip().lower() in ("0", "false", "no", "off"):
        return "EVOTEAM_AUTOCONTINUE is off"
    if (Path(project) / STATE_DIR / NO_CONTINUE_FILE).exists():
        return f"{STATE_DIR}/{NO_CONTINUE_FILE} exists"
    return None


def set_autocontinue(project: Path, on: bool) -> Path:
    path = Path(project) / STATE_DIR / NO_CONTINUE_FILE
    if on:
        path.unlink(missing_ok=True)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("evoteam: the Stop hook will not keep this project's supervisor going\n")
    return path
