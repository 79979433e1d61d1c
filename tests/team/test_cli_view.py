"""The `evoteam supervise` / `evoteam team` command lines and the live view."""

from __future__ import annotations

import io

import click
import pytest
from click.testing import CliRunner
from rich.console import Console

from evoteam.cli import main
from evoteam.config import load_settings
from evoteam.servers.team.core import TeamService
from evoteam.servers.team.models import TeamDesign
from evoteam.servers.team.store import TeamStore
from evoteam.supervisor.cli import describe_target, parse_duration
from evoteam.supervisor.driver import DriverEvent
from evoteam.supervisor.view import LiveView, render_status
from tests.team.conftest import design


@pytest.mark.parametrize("text, seconds", [("30m", 1800), ("90s", 90), ("2h", 7200), ("1h30m", 5400), ("45", 45)])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


def test_bad_duration():
    with pytest.raises(click.BadParameter):
        parse_duration("soon")


def test_targets_are_kits_or_goals():
    settings = load_settings()
    goal = describe_target(settings, "make my sorting routine faster")
    assert goal.goal == "make my sorting routine faster" and goal.kit is None
    try:
        from evoteam.servers.bench.formats.kits import discover
    except ImportError:
        pytest.skip("bench kits not available")
    kits = discover(settings)
    if not kits:
        pytest.skip("no task kits here")
    name, kit = next(iter(sorted(kits.items())))
    spec = describe_target(settings, name)
    assert spec.kit == name and spec.goal == kit.manifest.goal and spec.direction == kit.manifest.direction
    assert describe_target(settings, str(kit.root)).kit == name


async def test_view_renders_roles_and_spend(kb, run, project):
    svc = TeamService(TeamStore(kb), project_dir=project)
    await svc.design_team(TeamDesign(**design(run.id, "Profiler", "Challenger")))
    status = await svc.team_status(run.id)
    events = [DriverEvent(at=__import__("datetime").datetime.now(), kind="design", text="team v1 designed")]
    console = Console(record=True, width=160, file=io.StringIO())
    console.print(render_status(status, events))
    text = console.export_text()
    assert "Profiler" in text and "Challenger" in text and "planned" in text
    assert "$0.00 of $10.00" in text and "team v1 designed" in text

    out = io.StringIO()
    view = LiveView(Console(file=out, width=200), live=False)
    with view:
        view.event(events[0], status)
    assert "design: team v1 designed [v1 best=none spent=$0.00]" in out.getvalue()


def test_team_cli(project, tmp_path):
    import asyncio

    from evoteam.servers.knowledge.local import LocalKnowledgeStore
    from evoteam.servers.knowledge.models import RunCreate
    from evoteam.servers.knowledge.store import Actor

    async def setup():
        async with LocalKnowledgeStore.open(tmp_path / "evoteam.db", Actor(user="t")) as kb:
            run = await kb.start_run(RunCreate(goal="g", budget_usd=3))
            await TeamService(TeamStore(kb), project_dir=project).design_team(TeamDesign(**design(run.id, "Profiler")))
            return run

    run = asyncio.run(setup())
    env = {"EVOTEAM_DB": str(tmp_path / "evoteam.db"), "HOME": str(tmp_path)}
    result = CliRunner().invoke(main, ["team", "status", run.id], env=env)
    assert result.exit_code == 0, result.output
    assert "team v1" in result.output and "Profiler" in result.output and "planned" in result.output
    result = CliRunner().invoke(main, ["team", "versions", run.id], env=env)
    assert "v1  Profiler" in result.output
    result = CliRunner().invoke(main, ["team", "status", "run_missing"], env=env)
    assert result.exit_code == 3 and "evoteam kb runs" in result.output  # a command, not an MCP tool
    result = CliRunner().invoke(main, ["team", "prompt", "--mode", "headless", "--plugin"], env=env)
    assert "mcp__plugin_evoteam_team__design_team" in result.output and "driver" in result.output


def test_supervise_needs_a_target_or_run(tmp_path):
    env = {"EVOTEAM_DB": str(tmp_path / "evoteam.db"), "HOME": str(tmp_path)}
    result = CliRunner().invoke(main, ["supervise", "--no-live"], env=env)
    assert result.exit_code != 0 and "give a kit or a goal" in result.output
    result = CliRunner().invoke(main, ["supervise", "make it fast", "--no-live"], env=env)
    assert result.exit_code != 0 and "--budget-usd" in result.output


def test_supervise_needs_a_git_repository(tmp_path):
    env = {"EVOTEAM_DB": str(tmp_path / "evoteam.db"), "HOME": str(tmp_path)}
    plain = tmp_path / "plain"
    plain.mkdir()
    result = CliRunner().invoke(main, ["supervise", "make it fast", "--budget-usd", "1", "--no-live",
                                       "--project-dir", str(plain)], env=env)
    assert result.exit_code != 0 and "not a git repository" in result.output
