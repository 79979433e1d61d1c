"""The exit-code and message policy of evoteam/exitcodes.py, held for every command.

The test walks the command tree as `evoteam` builds it, so a command added later is covered
without touching this file: each command gets an unknown option (2, bad input) and, for each
argument that names a run, kit, candidate, token or file, a value that exists nowhere while the
others are valid (3, not found). Every failure must be one line on stderr that names the command
or the missing thing, with no traceback and no MCP tool name (the shell has commands, not tools).
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from evoteam.cli import main
from evoteam.exitcodes import BAD_INPUT, NOT_FOUND
from evoteam.servers.team.toolnaming import SERVER_TOOLS

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "task_kits" / "rmsnorm_cpu" / "examples" / "better.py"
TOOL_NAMES = {t for tools in SERVER_TOOLS.values() for t in tools if "_" in t} | {
    "start_run", "design_team", "spawn_role", "stop_role", "get_team"}


def _leaves(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    ctx = click.Context(group)
    found = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is None:
            continue
        if isinstance(command, click.Group):
            found += _leaves(command, (*path, name))
        else:
            found.append(((*path, name), command))
    return found


LEAVES = _leaves(main)


def kind_of(param: click.Parameter) -> str | None:
    """What a parameter names, from its type and name (how a new command is understood)."""
    if isinstance(param.type, click.Path) and param.type.exists:
        return "path"
    return {"run_id": "run", "run_ids": "run", "ident": "run", "kit": "kit", "candidate": "candidate",
            "token_id": "token", "target": "kit"}.get(param.name)


@dataclass
class World:
    cwd: Path
    run_id: str
    token_id: str

    def valid(self, param: click.Parameter) -> list[str]:
        kind = kind_of(param)
        if kind == "run":
            value = self.run_id
        elif kind == "kit":
            value = "rmsnorm_cpu"
        elif kind == "candidate":
            value = "candidate.py"
        elif kind == "token":
            value = self.token_id
        elif kind == "path" or isinstance(param.type, click.Path):
            value = str(self.cwd / ("folder" if not getattr(param.type, "file_okay", True) else "candidate.py"))
        elif isinstance(param.type, click.Choice):
            value = str(param.type.choices[0])
        else:
            value = "word"
        return [value, value] if param.nargs == -1 and kind != "run" else [value]

    def missing(self, param: click.Parameter) -> str:
        return {"run": "run_nope", "kit": "./no_such_kit/" if param.name == "target" else "no_such_kit",
                "candidate": "missing_candidate.py", "token": "tok_nope",
                "path": str(self.cwd / "no_such_thing")}[kind_of(param)]


def args_for(world: World, command: click.Command, missing: click.Parameter | None = None) -> list[str]:
    args: list[str] = []
    for param in command.params:
        if isinstance(param, click.Argument):
            if param is missing:
                args.append(world.missing(param))
                if param.nargs == -1:
                    args.append(world.run_id)
            elif param.required or param is missing:
                args += world.valid(param)
        elif isinstance(param, click.Option) and param.required:
            args += [param.opts[0], *world.valid(param)]
    return args


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> World:
    from evoteam.servers.knowledge import auth
    from evoteam.servers.knowledge.local import LocalKnowledgeStore
    from evoteam.servers.knowledge.models import RunCreate

    cwd = tmp_path_factory.mktemp("cli")
    (cwd / "folder").mkdir()
    shutil.copy(EXAMPLE, cwd / "candidate.py")
    subprocess.run(["git", "init", "-q", str(cwd)], check=True)  # supervise works in a repository

    async def seed():
        async with LocalKnowledgeStore.open(cwd / "state" / "kb.db") as store:
            run = await store.start_run(RunCreate(goal="fast rmsnorm", kit="rmsnorm_cpu", budget_usd=1.0))
            token = await auth.add_token(store.db, "alice")
            return run.id, token.id

    run_id, token_id = asyncio.run(seed())
    return World(cwd=cwd, run_id=run_id, token_id=token_id)


@pytest.fixture
def invoke(world, monkeypatch):
    monkeypatch.chdir(world.cwd)
    env = {"EVOTEAM_DB": str(world.cwd / "state" / "kb.db"), "HOME": str(world.cwd), "EVOTEAM_HOME": str(world.cwd / ".evo"),
           "EVOTEAM_KNOWLEDGE_URL": "", "EVOTEAM_TOKEN": "", "XDG_CONFIG_HOME": str(world.cwd / ".config")}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("EVOTEAM_DEBUG", raising=False)

    def run(args: list[str]):
        return CliRunner().invoke(main, args, catch_exceptions=True)

    return run


def assert_one_clear_line(result, *names: str) -> None:
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: ")
    assert any(n in lines[0] for n in names), (names, lines[0])
    assert not [t for t in TOOL_NAMES if t in lines[0]], lines[0]


def test_the_walk_finds_every_command():
    names = {" ".join(p) for p, _ in LEAVES}
    # A sample across the groups: the walk reaches nested commands, not only the top level.
    assert {"kb runs", "token revoke", "bench run", "bench remeasure", "bench export-traces", "report",
            "compare", "doctor", "supervise", "hook activate", "team status", "corpus index"} <= names


@pytest.mark.parametrize("path,command", LEAVES, ids=[" ".join(p) for p, _ in LEAVES])
def test_an_unknown_option_is_bad_input(path, command, world, invoke):
    result = invoke([*path, *args_for(world, command), "--no-such-option"])
    assert result.exit_code == BAD_INPUT, result.output
    assert_one_clear_line(result, "--no-such-option")
    assert f"evoteam {' '.join(path)}" in result.stderr  # it names the command to get help for


CASES = [(path, command, param) for path, command in LEAVES for param in command.params
         if isinstance(param, click.Argument) and kind_of(param)]


@pytest.mark.parametrize("path,command,param", CASES, ids=[f"{' '.join(p)} {a.name}" for p, _, a in CASES])
def test_a_missing_thing_is_not_found(path, command, param, world, invoke):
    result = invoke([*path, *args_for(world, command, missing=param)])
    assert result.exit_code == NOT_FOUND, result.output
    name = world.missing(param)
    assert_one_clear_line(result, name, name.strip("./"))


def test_every_kind_of_missing_thing_is_walked():
    walked = {kind_of(param) for _, _, param in CASES}
    assert walked == {"run", "kit", "candidate", "token", "path"}


def test_no_traceback_from_a_real_process(world):
    """The policy holds in the installed command too (not only under click's test runner)."""
    env = {"EVOTEAM_DB": str(world.cwd / "state" / "kb.db"), "HOME": str(world.cwd), "PATH": "/usr/bin:/bin",
           "EVOTEAM_HOME": str(world.cwd / ".evo")}
    done = subprocess.run([sys.executable, "-m", "evoteam", "bench", "export-traces", "run_nope", "-o",
                           str(world.cwd / "traces")], cwd=world.cwd, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == NOT_FOUND and "Traceback" not in done.stderr
    assert done.stderr.strip().count("\n") == 0 and "run_nope" in done.stderr and "evoteam kb runs" in done.stderr


def test_an_unexpected_error_is_one_line_unless_debugging(world, invoke, monkeypatch):
    """An error no command anticipated still ends as one line and exit 1; EVOTEAM_DEBUG=1 shows
    the traceback to whoever asks for it."""
    (world.cwd / ".config" / "evoteam").mkdir(parents=True, exist_ok=True)
    result = invoke(["kb", "runs"])
    assert result.exit_code == 0
    monkeypatch.setattr("evoteam.servers.knowledge.cli.open_store", lambda *a, **k: 1 / 0)
    # `kb runs` reads a local file on its quick path first (knowledge/quickread.py): fail there too
    monkeypatch.setattr("evoteam.servers.knowledge.quickread.runs", lambda *a, **k: 1 / 0)
    result = invoke(["kb", "runs"])
    assert result.exit_code == 1
    assert_one_clear_line(result, "ZeroDivisionError")
    monkeypatch.setenv("EVOTEAM_DEBUG", "1")
    assert isinstance(invoke(["kb", "runs"]).exception, ZeroDivisionError)


def test_agent_wording_becomes_command_wording():
    """The store and bench word errors for agents (tool names, tool arguments); the shell shows
    the commands instead, for every hint the store knows."""
    from evoteam.exitcodes import TOOL_HINTS, one_line
    from evoteam.servers.knowledge.scope import NOUNS

    for noun, hint in NOUNS.values():  # every "not found" hint the store gives names tools
        assert hint in TOOL_HINTS, f"no command wording for the {noun} hint {hint!r}"
    assert one_line("no run 'x' visible to you: list_runs shows the runs you can use, start_run starts one") == (
        "no run 'x' visible to you: `evoteam kb runs` lists the runs you can use, `evoteam kb start GOAL` starts one")
    assert one_line("kit k has no held-out workloads; use split='dev'\n") == "kit k has no held-out workloads; use --split dev"


GROUPS = [()] + sorted({path[:-1] for path, _ in LEAVES if len(path) > 1})


@pytest.mark.parametrize("path", GROUPS, ids=[" ".join(p) or "evoteam" for p in GROUPS])
def test_a_group_alone_shows_its_help_whole(path, invoke):
    """`evoteam` or `evoteam kb` with no command: the help as written (it lists the commands),
    not squeezed onto one line."""
    result = invoke(list(path))
    assert result.exit_code in (0, BAD_INPUT) and "Traceback" not in result.output
    assert "Commands:" in result.output and len(result.output.splitlines()) > 5
    assert "Error:" not in result.output


def test_a_failed_candidate_is_code_4_with_one_line(world, invoke):
    """The README's "4 candidate failed ... with one line on stderr": the evaluation is printed as
    usual, and stderr says which candidate failed on which kit, and how, in one line."""
    wrong = ROOT / "task_kits" / "rmsnorm_cpu" / "examples" / "wrong.py"
    shutil.copy(wrong, world.cwd / "wrong.py")
    result = invoke(["bench", "run", "rmsnorm_cpu", "wrong.py", "--no-record"])
    assert result.exit_code == 4, result.output
    assert "Traceback" not in result.output
    # stderr also carries the progress lines (tests/test_cli_output.py); the error is one line, the last
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
    assert errors == [result.stderr.strip().splitlines()[-1]], result.stderr
    assert errors[0] == ("Error: wrong.py failed on rmsnorm_cpu (dev): INCORRECT_NUMERICAL on 3 of 3 workloads; "
                         "the evaluation above says why")
    assert "INCORRECT_NUMERICAL" in result.stdout  # the evaluation itself, on stdout as before
