"""`evoteam supervise KIT_OR_GOAL --budget-usd N`: the headless supervisor on the command line."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from typing import TYPE_CHECKING

import click

from evoteam.errors import DomainError
from evoteam.exitcodes import BadInput, NotFoundError, cli_error
from evoteam.servers.knowledge.errors import StoreError

if TYPE_CHECKING:  # the store and pydantic load when the command runs, not for --help
    from evoteam.config import Settings
    from evoteam.servers.knowledge.models import Run, RunCreate
    from evoteam.servers.knowledge.store import KnowledgeStore


def component_store(name, store):
    from evoteam.servers.knowledge.connect import component_store as component

    return component(name, store)


def parse_duration(text: str) -> float:
    """'30m', '90s', '2h', '1h30m' or plain seconds -> seconds."""
    text = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text)
    parts = re.findall(r"(\d+(?:\.\d+)?)([smhd])", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise click.BadParameter(f"{text!r} is not a duration: use e.g. 30m, 90s, 2h or 1h30m")
    return sum(float(n) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[u] for n, u in parts)


def describe_target(settings: Settings, target: str) -> RunCreate:
    """A kit name or folder -> the run's goal, kit, direction, x0 and best-known score; any
    other text is a free-form goal."""
    from evoteam.servers.knowledge.models import RunCreate
    kit = None
    try:
        from evoteam.servers.bench.formats.kits import find_kit

        kit = find_kit(settings, target)
    except ImportError:
        kit = None
    except DomainError:
        if Path(target).expanduser().is_dir():
            raise
        kit = None
    if kit is None:
        if Path(target).expanduser().is_dir():
            raise BadInput(f"{target} is a folder but not a task kit (no kit.json / definition.json)")
        kit = _kit_by_path_name(settings, target)
    if kit is None:
        return RunCreate(goal=target)
    m = kit.manifest
    # The bench finds kits by name in the kit folders; a kit elsewhere is kept by its path.
    where = m.name
    try:
        if find_kit(settings, m.name).root != kit.root:
            where = str(kit.root)
    except DomainError:
        where = str(kit.root)
    return RunCreate(goal=m.goal, kit=where, direction=m.direction, x0=m.x0, best_known=m.best_known)


def _looks_like_path(target: str) -> bool:
    return " " not in target.strip() and ("/" in target or target.startswith((".", "~")))


def _kit_by_path_name(settings: Settings, target: str):
    """`task_kits/<kit>` (the README's form) given from another folder: the shipped kit of that
    name. Any other path-like text that names no kit is an error, never a free-form goal."""
    if not _looks_like_path(target):
        return None
    from evoteam.servers.bench.formats.kits import discover, find_kit

    name = Path(target.rstrip("/")).name
    try:
        return find_kit(settings, name)
    except DomainError:
        kits = ", ".join(sorted(discover(settings))) or "none"
        raise NotFoundError(f"{target} is not a task kit here (no such folder, and no kit named {name!r}); "
                                   f"kits: {kits}. Give a kit name, a kit folder, or a goal in words.") from None


async def _run_mode(store: KnowledgeStore, run_id: str) -> str:
    from evoteam.supervisor.modes import mode_of

    versions = await component_store("team", store).list_versions(run_id)
    return mode_of([v.diagnosis for v in versions])


async def resolve_run(store: KnowledgeStore, settings: Settings, target: str | None, budget_usd: float | None,
                      run_id: str | None, new: bool, mode: str = "evolving") -> tuple[Run, str]:
    """The run to drive, and how it was found (continued or started). A run is continued only in
    the mode it was driven in: a solo run never turns into an evolving one, or back."""
    if run_id:
        run = await store.get_run(run_id)
        if (was := await _run_mode(store, run.id)) != mode:
            raise click.UsageError(f"run {run.id} was driven in {was} mode; continue it with --mode {was}")
        return run, "continuing"
    if not target:
        raise click.UsageError("give a kit or a goal, or --run RUN_ID to continue a run")
    spec = describe_target(settings, target)
    if not new:
        page = await store.list_runs(status="active", limit=200)
        for run in page.items:
            # Of a kit: only a run that ranks the kit's way (the bench refuses to record in another).
            if (spec.kit and run.kit == spec.kit and run.direction == spec.direction) or (
                    not spec.kit and run.goal == spec.goal and not run.kit):
                if await _run_mode(store, run.id) == mode:
                    return run, "continuing"
    if budget_usd is None:
        raise click.UsageError("a new run needs --budget-usd")
    return await store.start_run(spec.model_copy(update={"budget_usd": budget_usd})), "started"


async def supervise_async(settings: Settings, target: str | None, *, budget_usd: float | None, interval_s: float,
                          runner: str, max_parallel: int | None, run_id: str | None, new: bool,
                          project_dir: Path, supervisor_cap: float | None, role_cap: float | None,
                          max_versions: int | None, model: str | None, live: bool | None,
                          waker=None, runner_factory=None, poll_s: float = 5.0, mode: str = "evolving",
                          team_file: Path | None = None, stall_versions: int | None = 3) -> int:
    from evoteam.servers.team.core import TeamService, new_owner, role_env
    from evoteam.servers.team.cost import load_price_table
    from evoteam.servers.team.toolnaming import ToolNaming
    from evoteam.servers.team.runners import default_runner_factory
    from evoteam.supervisor.driver import DriverConfig, SupervisorDriver
    from evoteam.supervisor.view import LiveView
    from evoteam.supervisor.waker import ClaudeWaker

    from evoteam.servers.knowledge.connect import open_store
    from evoteam.servers.knowledge.store import Actor
    from evoteam.servers.team.worktrees import repo_root

    try:
        await repo_root(project_dir)
    except DomainError as exc:
        raise click.ClickException(f"{exc} (roles work in their own git worktrees; use --project-dir to point "
                                   f"at a repository)") from exc
    actor = Actor.local(client="supervise", default_project=settings.project)
    async with open_store(settings, actor) as store:
        run, how = await resolve_run(store, settings, target, budget_usd, run_id, new, mode)
        if budget_usd is not None and run.budget_usd != budget_usd and how == "continuing":
            click.echo(f"note: run {run.id} keeps its budget of ${run.budget_usd}; --budget-usd applies to new runs",
                       err=True)
        click.echo(f"{how} run {run.id}: {run.goal.splitlines()[0][:100]}", err=True)
        service = TeamService(component_store("team", store), kb=store, project_dir=project_dir, naming=ToolNaming.from_env(),
                              runner_factory=runner_factory or default_runner_factory(),
                              prices=load_price_table(settings), default_runner=runner, env=role_env(settings),
                              owner=new_owner("supervise"))
        from evoteam.supervisor.modes import load_team_file

        config = DriverConfig(interval_s=interval_s, poll_s=poll_s, max_parallel=max_parallel, runner=runner,
                              supervisor_cap_usd=supervisor_cap, role_cap_usd=role_cap, max_versions=max_versions,
                              stall_versions=stall_versions, mode=mode, team_roles=load_team_file(team_file) if team_file else None)
        with LiveView(live=live) as view:
            driver = SupervisorDriver(service, run.id, waker=waker or ClaudeWaker(model=model), config=config,
                                      settings=settings, on_event=view.event,
                                      lock_path=None if settings.knowledge_url else settings.db)
            result = await driver.run()
        budget = "no budget" if result.budget_usd is None else f"${result.budget_usd:.2f}"
        click.echo(f"run {result.run_id}: {result.reason}; team versions: {result.versions}; best score: "
                   f"{result.best_score}; spent ${result.spent_usd:.2f} of {budget}", err=True)
        click.echo(f"report: evoteam report {result.run_id}   (compare runs of this kit: evoteam compare RUN RUN)",
                   err=True)
        return 0


@click.command()
@click.argument("target", required=False)
@click.option("--budget-usd", type=float, default=None, help="USD budget of a new run (the run stops when spent).")
@click.option("--interval", "interval", default="30m", show_default=True,
              help="Wake the supervisor at least this often while a team works (30m, 90s, 2h).")
@click.option("--runner", type=click.Choice(["claude", "codex"]), default="claude", show_default=True,
              help="Headless runner for the roles.")
@click.option("--max-parallel", type=click.IntRange(min=1), default=None, help="At most K roles at once.")
@click.option("--run", "run_id", default=None, help="Continue this run (default: the active run of the same kit).")
@click.option("--new", is_flag=True, help="Start a new run even if one for this kit is active.")
@click.option("--project-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="The git repository the roles work in (default: the current directory).")
@click.option("--supervisor-cap-usd", type=float, default=None, help="USD cap of one supervisor wake.")
@click.option("--role-cap-usd", type=float, default=None, help="USD cap of one role session.")
@click.option("--max-versions", type=click.IntRange(min=1), default=None, help="Stop after this many team versions.")
@click.option("--stall-versions", type=click.IntRange(min=0), default=3, show_default=True,
              help="Stop after this many team versions in a row without a significant gain (0: never).")
@click.option("--model", default=None, help="Model of the supervisor sessions.")
@click.option("--live/--no-live", default=None, help="Live terminal view (default: when stderr is a terminal).")
@click.option("--mode", type=click.Choice(["evolving", "fixed", "solo"]), default="evolving", show_default=True,
              help="evolving: the supervisor redesigns the team; fixed: one static team, never redesigned; "
                   "solo: one agent. For matched-budget comparisons (evoteam compare).")
@click.option("--team", "team_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="With --mode fixed: a JSON list of roles (name, mandate, ...) instead of the default four.")
@click.pass_obj
def supervise(settings: Settings, target, budget_usd, interval, runner, max_parallel, run_id, new, project_dir,
              supervisor_cap_usd, role_cap_usd, max_versions, stall_versions, model, live, mode, team_file):
    """Drive an evolving agent team headless on KIT_OR_GOAL until the budget is spent.

    The supervisor wakes when a team finishes or the interval passes, reflects, and designs the
    next team; roles run as headless sessions in their own git worktrees. Stop it any time
    (Ctrl-C, kill): run the same command again and it continues the run from the store."""
    if team_file and mode != "fixed":
        raise click.UsageError("--team goes with --mode fixed")
    try:
        asyncio.run(supervise_async(
            settings, target, budget_usd=budget_usd, interval_s=parse_duration(interval), runner=runner,
            max_parallel=max_parallel, run_id=run_id, new=new, project_dir=(project_dir or Path.cwd()).resolve(),
            supervisor_cap=supervisor_cap_usd, role_cap=role_cap_usd, max_versions=max_versions, model=model,
            live=live, mode=mode, team_file=team_file, stall_versions=stall_versions or None))
    except (DomainError, StoreError) as exc:
        raise cli_error(exc) from exc
    except KeyboardInterrupt:
        click.echo("interrupted: run the same command again to continue the run", err=True)


COMMANDS = [supervise]
