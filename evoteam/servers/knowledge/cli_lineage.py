"""`evoteam kb finish RUN_ID`, `evoteam kb resume RUN_ID` and `evoteam kb prior KIT`: runs end
(with a reason), resume, and the next one starts from what the earlier ones found.
Registered on the `kb` group by evoteam.servers.knowledge.cli."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from evoteam.errors import Missing
from evoteam.servers.knowledge.cli_support import open_store
from evoteam.servers.knowledge.cli_support import run_store_call as _run

if TYPE_CHECKING:  # `evoteam kb --help` must not import pydantic (tests/test_cli_help.py)
    from evoteam.config import Settings


def _set_status(settings: Settings, run_id: str, status: str, reason: str | None):
    async def go():
        from evoteam.servers.knowledge.pairedbest import with_paired_best

        async with open_store(settings) as store:
            return await with_paired_best(store, await store.update_run(run_id, status=status, reason=reason))

    return _run(go())


@click.command("finish")
@click.argument("run_id")
@click.option("--reason", required=True, help="Why the run ends: its result, or why it stops.")
@click.option("--pause", "status", flag_value="paused", help="Pause it instead (resume with `kb resume`).")
@click.option("--failed", "status", flag_value="failed", help="Mark it failed instead.")
@click.option("--json", "as_json", is_flag=True, help="Print the run as JSON.")
@click.pass_obj
def finish_cmd(settings: Settings, run_id, reason, status, as_json) -> None:
    """End RUN_ID (finished, or paused/failed) with a reason. It is no longer the kit's active run;
    its work stays readable and is the next run's prior work."""
    run = _set_status(settings, run_id, status or "finished", reason)
    if as_json:
        click.echo(run.model_dump_json(indent=2))
        return
    from evoteam.servers.knowledge.bestline import named_best, run_interval

    best = named_best(run.best_score, run_interval(run), run.best_candidate_id, run.paired_best,
                      run.best_within_noise_of)
    click.echo(f"{run.id} {run.status}: {run.status_reason} (best {best})")


@click.command("resume")
@click.argument("run_id")
@click.pass_obj
def resume_cmd(settings: Settings, run_id) -> None:
    """Make a paused (or finished) run active again."""
    run = _set_status(settings, run_id, "active", None)
    click.echo(f"{run.id} is active again")


def _known_kit(settings: Settings, kit: str) -> bool:
    """A kit the bench can find (so an empty answer means "no runs yet", not a typo)."""
    from evoteam.errors import DomainError
    from evoteam.servers.bench.formats.kits import find_kit

    try:
        find_kit(settings, kit)
    except DomainError:
        return False
    return True


@click.command("prior")
@click.argument("kit")
@click.option("--json", "as_json", is_flag=True, help="Print the prior work as JSON.")
@click.pass_obj
def prior_cmd(settings: Settings, kit, as_json) -> None:
    """What earlier runs of KIT in this project found: runs with owner, status and best, the best
    candidates, top learnings and dead ends (what `start_run` hands a new run)."""
    from evoteam.servers.knowledge.prior import gather_prior_work, render_prior

    async def go():
        async with open_store(settings) as store:
            return await gather_prior_work(store, kit)

    prior = _run(go())
    if not prior.runs and not _known_kit(settings, kit):
        raise Missing(f"no kit {kit!r} and no run of it in this project: `evoteam bench list` shows the kits")
    if as_json:
        click.echo(prior.model_dump_json(indent=2))
        return
    click.echo(render_prior(prior) or f"no earlier runs of {kit} in this project")


COMMANDS = [finish_cmd, resume_cmd, prior_cmd]
