"""`evoteam kb history RUN_ID` and `evoteam kb candidates RUN_ID`: a run's evolution history and
its candidates on the command line, with who recorded each (role, team version); `--json` for
scripts. Registered on the `kb` group by evoteam.servers.knowledge.cli."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from evoteam.servers.knowledge import quickread
from evoteam.servers.knowledge.cli_support import open_store, quick
from evoteam.servers.knowledge.cli_support import run_store_call as _run
from evoteam.stats import describe_listed

if TYPE_CHECKING:
    from evoteam.config import Settings
    from evoteam.servers.knowledge.models import Page


async def _all(list_page, run_id: str) -> Page:
    from evoteam.servers.knowledge.models import Page
    items, cursor = [], None
    while True:
        page = await list_page(run_id, limit=200, cursor=cursor)
        items += page.items
        cursor = page.next_cursor
        if not cursor:
            return Page(items=items, total=page.total)


def _listing(settings: Settings, run_id: str, method: str, as_json: bool, quick_read) -> list | None:
    """Every item of one of the store's run listings (read quickly when the store is a local file:
    quickread.py); printed as JSON (and None returned) with --json."""
    if not as_json:
        items = quick(settings, lambda values: quick_read(values, run_id))
        if items is not None:
            return items

    async def go():
        async with open_store(settings) as store:
            return await _all(getattr(store, method), run_id)

    page = _run(go())
    if as_json:
        click.echo(page.model_dump_json(indent=2))
        return None
    return page.items


def _who(provenance) -> str:
    version = "" if provenance.team_version is None else f" v{provenance.team_version}"
    return f"{provenance.role or provenance.user}{version}"


@click.command("history")
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True, help="The entries as JSON.")
@click.pass_obj
def history_cmd(settings: Settings, run_id, as_json) -> None:
    """The evolution history of a run: one entry per reflection, oldest first."""
    items = _listing(settings, run_id, "list_history", as_json, quickread.history)
    if items is None:
        return
    if not items:
        click.echo(f"run {run_id} has no history yet (the supervisor records one entry per team version)")
    for entry in items:
        click.echo(f"team v{entry.team_version if entry.team_version is not None else '-'}  ({_who(entry.provenance)}, "
                   f"{entry.provenance.created_at:%Y-%m-%d %H:%M})")
        for label, text in (("observed", entry.observed_behaviour), ("diagnosis", entry.diagnosis),
                            ("change", entry.design_change), ("outcome", entry.outcome)):
            if text.strip():
                click.echo(f"  {label}: {text.strip()}")


@click.command("candidates")
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True, help="The candidates as JSON.")
@click.pass_obj
def candidates_cmd(settings: Settings, run_id, as_json) -> None:
    """The candidates of a run with status, score and who recorded them, in recording order."""
    items = _listing(settings, run_id, "list_candidates", as_json, quickread.candidates)
    if items is None:
        return
    if not items:
        click.echo(f"run {run_id} has no candidates yet")
    for c in items:
        # The quick read has no count of runs, only whether they are too few: both print alike.
        unknown = c.spread_unknown if hasattr(c, "spread_unknown") else c.runs is not None
        score = describe_listed(c.score, c.score_interval, None, spread_unknown=unknown) if c.score is not None \
            else "-"
        flag = "  FLAGGED" if c.flagged else ""
        # Only what the bench measured ranks: a recorded claim is said to be one.
        claim = "" if c.verified else "  unverified"
        times = f"  x{c.n_measurements}" if c.n_measurements > 1 else ""
        parent = f"  parent {c.parent_id}" if c.parent_id else ""
        click.echo(f"{c.id}  {c.status:<20} score {score:<22} {c.split:<8} {_who(c.provenance)}{times}{parent}"
                   f"{claim}{flag}")


COMMANDS = [history_cmd, candidates_cmd]
