"""`evoteam hook ...`: run a hook by hand (reads the hook input on stdin) and manage the
project's active run (activate, deactivate, show, pause, resume)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from evoteam.plugin import state as st

EVENTS = ("session-start", "post-tool-use", "subagent-stop", "stop", "pre-compact")


@click.group()
def hook() -> None:
    """evoteam's Claude Code / Codex hooks and the project's active run."""


def _project(project: str | None) -> Path:
    return Path(project) if project else st.project_dir()


_project_opt = click.option("--project", default=None, help="project directory (default: CLAUDE_PROJECT_DIR or cwd)")


@hook.command("run")
@click.argument("event", type=click.Choice(EVENTS))
def run_hook(event: str) -> None:
    """Run one hook: the hook input (JSON) on stdin, its output (JSON) on stdout. Never fails."""
    from evoteam.plugin.run import main as run_main

    sys.exit(run_main([event]))


@hook.command()
@click.argument("run_id")
@click.option("--version", type=int, default=None, help="current team version")
@_project_opt
@click.pass_obj
def activate(settings, run_id: str, version: int | None, project: str | None) -> None:
    """Make RUN_ID the project's active run (what the hooks report and keep going)."""
    import asyncio

    from evoteam.servers.knowledge.connect import open_store

    async def exists():  # a mistyped id would leave the hooks reporting a run that is not there
        async with open_store(settings) as store:
            await store.get_run(run_id)

    asyncio.run(exists())
    path = st.state_path(_project(project))
    st.activate(_project(project), run_id, version=version)
    click.echo(f"active run: {run_id} ({path})")


@hook.command()
@_project_opt
def deactivate(project: str | None) -> None:
    """Forget the project's active run (the hooks go quiet)."""
    click.echo("deactivated" if st.deactivate(_project(project)) else "no active run")


@hook.command()
@_project_opt
def show(project: str | None) -> None:
    """Print the project's active-run record and the state of the off switch."""
    p = _project(project)
    click.echo(json.dumps({"state": st.read_state(p), "state_file": str(st.state_path(p)),
                           "autocontinue_off": st.autocontinue_off(p)}, indent=2))


@hook.command()
@_project_opt
def pause(project: str | None) -> None:
    """Off switch: the Stop hook no longer keeps the supervisor going in this project."""
    click.echo(f"paused: {st.set_autocontinue(_project(project), False)}")


@hook.command()
@_project_opt
def resume(project: str | None) -> None:
    """Undo `pause`."""
    st.set_autocontinue(_project(project), True)
    click.echo("the Stop hook keeps an active supervisor going again")


COMMANDS = [hook]
