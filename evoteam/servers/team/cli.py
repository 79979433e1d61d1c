"""`evoteam team ...`: look at a run's teams from the shell; print the supervisor prompt."""

from __future__ import annotations

import json

from typing import TYPE_CHECKING

import click

from evoteam.errors import DomainError
from evoteam.exitcodes import cli_error
from evoteam.servers.knowledge.errors import StoreError

if TYPE_CHECKING:
    from evoteam.config import Settings


def open_store(settings, actor=None):
    # Imported when a command runs: `evoteam team --help` answers without the store.
    from evoteam.servers.knowledge.connect import open_store as open_it

    return open_it(settings, actor)


def _run(coro):
    import asyncio  # here: `evoteam team --help` starts no event loop

    try:
        return asyncio.run(coro)
    except (StoreError, DomainError) as exc:
        raise cli_error(exc) from exc


def _service(store):
    from evoteam.servers.team.core import TeamService
    from evoteam.servers.team.cost import load_price_table
    from evoteam.servers.knowledge.connect import component_store

    return TeamService(component_store("team", store), kb=store, prices=load_price_table(), write_agent_files=False)


async def _current_run(store, run_id: str | None) -> str:
    if run_id:
        return run_id
    page = await store.list_runs(status="active", limit=1)
    if not page.items:
        raise DomainError("no active run: pass a run id")
    return page.items[0].id


@click.group()
def team() -> None:
    """Team versions, role sessions and budget of a run; the supervisor prompt."""


def status_word(status) -> str:
    """One word for a version: finished, working (a role is queued or runs), not started
    (every role only planned), waiting (some ended, the rest not started), or no team."""
    if status.version is None:
        return "no team yet"
    if status.finished:
        return "finished"
    states = {r.status for r in status.roles}
    if states & {"running", "queued"}:
        return "working"
    if states <= {"planned"}:
        return "not started"
    return "waiting"


@team.command("status")
@click.argument("run_id", required=False)
@click.option("--version", type=int, default=None)
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def status_cmd(settings: Settings, run_id, version, as_json) -> None:
    """The current team of a run (default: the newest active run): roles, states, cost, spend."""
    status = None
    if not as_json:  # a local file is read without the store's machinery (quickstatus.py), same output
        from evoteam.clisettings import setting_values
        from evoteam.servers.team.quickstatus import team_status

        status = team_status(setting_values(settings), run_id, version)
    if status is None:
        async def go():
            async with open_store(settings) as store:
                return await _service(store).team_status(await _current_run(store, run_id), version)

        status = _run(go())
        if as_json:
            click.echo(status.model_dump_json(indent=2))
            return
    from evoteam.servers.team.sentences import describe_spend, describe_team_best

    best = describe_team_best(status)
    click.echo(f"run {status.run_id} ({status.run_status})  team v{status.version}  best {best}  "
               f"spent {describe_spend(status)}  {status_word(status)}")
    for r in status.roles:
        note = r.error or r.last_message.replace("\n", " ")[:80]
        click.echo(f"  {r.role:<28} {r.status:<12} {r.runner:<8} {r.turns:>4} turns  ${r.cost_usd:.2f}  {note}")


@team.command("versions")
@click.argument("run_id", required=False)
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def versions_cmd(settings: Settings, run_id, as_json) -> None:
    """Every team version of a run with its roles and diagnosis."""

    async def go():
        async with open_store(settings) as store:
            return await _service(store).list_versions(await _current_run(store, run_id))

    versions = _run(go())
    if as_json:
        click.echo(json.dumps([v.model_dump(mode="json") for v in versions], indent=2))
        return
    for v in versions:
        click.echo(f"v{v.version}  {', '.join(v.roles)}\n    {v.diagnosis[:200]}")


@team.command("budget")
@click.argument("run_id", required=False)
@click.option("--json", "as_json", is_flag=True, help="JSON (the default output is already JSON; kept for symmetry).")
@click.pass_obj
def budget_cmd(settings: Settings, run_id, as_json) -> None:
    """Spend per role and per version."""

    async def go():
        async with open_store(settings) as store:
            return await _service(store).budget(await _current_run(store, run_id))

    click.echo(_run(go()).model_dump_json(indent=2))


@team.command("prompt")
@click.option("--mode", type=click.Choice(["session", "headless"]), default="session", show_default=True)
@click.option("--run", "run_id", default=None)
@click.option("--plugin", is_flag=True, help="Tool names as installed through the plugin.")
def prompt_cmd(mode, run_id, plugin) -> None:
    """Print the supervisor prompt (the /evolve-team skill and the headless driver share it)."""
    from evoteam.servers.team.toolnaming import ToolNaming
    from evoteam.supervisor.prompts import supervisor_prompt

    naming = ToolNaming(prefix="mcp__plugin_evoteam_") if plugin else ToolNaming.from_env()
    click.echo(supervisor_prompt(mode, run_id, naming))


COMMANDS = [team]
