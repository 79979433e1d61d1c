"""The exit codes and error messages of every `evoteam` command, so scripts can tell failures
apart and people read one line that says what to do.

0 success; 1 any other error; 2 bad input (a usage error or a value the store refuses);
3 not found (a run, kit, version, candidate or file that does not exist); 4 candidate failed
(`evoteam bench run`: an evaluation that did not pass).

The policy is applied once, by the root command (evoteam/cli.py): whatever a command raises
becomes one line on stderr and one of these codes, never a traceback (`EVOTEAM_DEBUG=1` shows
it). tests/test_cli_exit_codes.py walks every command to hold that.
"""

from __future__ import annotations

import os

import click

OK, ERROR, BAD_INPUT, NOT_FOUND, CANDIDATE_FAILED = 0, 1, 2, 3, 4

HELP = ("Exit codes: 0 ok; 1 error; 2 bad input; 3 not found (run, kit, version, candidate, file); "
        "4 candidate failed (bench run). Every read command takes --json. Shell completion: "
        'eval "$(_EVOTEAM_COMPLETE=bash_source evoteam)" in ~/.bashrc (zsh_source for zsh, fish_source for fish).')

# The store and the bench word their errors for agents, naming MCP tools; on the command line
# the same hint names the command that does it.
TOOL_HINTS = {
    "list_runs shows the runs you can use, start_run starts one":
        "`evoteam kb runs` lists the runs you can use, `evoteam kb start GOAL` starts one",
    "list_kits shows them": "`evoteam bench list` shows them",
    "learnings(view=list) shows a run's learnings": "`evoteam kb learnings RUN` shows a run's learnings",
    "history(view=list) shows a run's entries": "`evoteam kb history RUN` shows a run's entries",
    "best_candidates or trajectory list a run's candidates": "`evoteam kb candidates RUN` lists a run's candidates",
    "team_status lists the sessions of a run": "`evoteam team status RUN` lists the sessions of a run",
    "spend shows a run's costs": "`evoteam team budget RUN` shows a run's costs",
    "list_artifacts shows a run's artifacts": "`evoteam kb export RUN FOLDER` writes a run's artifacts",
    "ids look like doc_..., as search and lookup list them":
        "ids look like doc_..., as the retrieval server lists them (`evoteam report RUN --json` shows a run's)",
    "call gate first and pass the gate_id it returns": "gates are opened by the retrieval server, not the shell",
    "pass the search_id that search returned": "searches are run by the retrieval server, not the shell",
    "list_wakes lists a run's wakes": "`evoteam team status RUN` shows a run's supervisor",
    "pass an existing .py path or the code itself": "pass an existing .py file",
    "pass a .py file or the code itself": "pass a .py file",
    ", or pass its code instead": "",
    "use split='dev'": "use --split dev",
}


class BadInput(click.ClickException):
    exit_code = BAD_INPUT


class NotFoundError(click.ClickException):
    exit_code = NOT_FOUND


def one_line(text: str) -> str:
    """A message as the shell shows it: MCP tool names replaced by commands, on one line."""
    for tool_words, command_words in TOOL_HINTS.items():
        text = text.replace(tool_words, command_words)
    return " ".join(text.split()) or "failed (no message)"


def cli_error(exc: BaseException) -> click.ClickException:
    """Any error a command let through, as the command-line error with its exit code."""
    from evoteam.errors import DomainError, Missing, first_leaf

    exc = first_leaf(exc)
    if isinstance(exc, click.ClickException):
        return exc
    text = str(exc)
    if isinstance(exc, Missing):
        return NotFoundError(text)
    if isinstance(exc, FileNotFoundError):
        if exc.filename and exc.strerror:
            return NotFoundError(f"{exc.filename}: {exc.strerror}")
        return NotFoundError(text)
    if isinstance(exc, OSError):
        name = f"{exc.filename}: " if exc.filename else ""
        return click.ClickException(f"{name}{exc.strerror or text}")
    if isinstance(exc, DomainError):
        if text.startswith(("no kit named", "no run", "unknown run", "no such")):
            return NotFoundError(text)
        return click.ClickException(text)
    store_error = _store_error_class(exc)
    if store_error == "NotFound":
        return NotFoundError(text)
    if store_error in ("Invalid", "TooLarge"):
        return BadInput(text)
    if store_error is not None:
        return click.ClickException(text)
    if type(exc).__name__ == "ValidationError":  # pydantic: a value the models refuse
        errors = getattr(exc, "errors", lambda: [])()
        if errors:
            first = errors[0]
            where = ".".join(str(p) for p in first.get("loc", ())) or "input"
            return BadInput(f"{where}: {first.get('msg', text)}")
        return BadInput(text)
    return click.ClickException(f"unexpected {type(exc).__name__}: {text} (EVOTEAM_DEBUG=1 shows where)")


def _store_error_class(exc: BaseException) -> str | None:
    # Store errors live with the store; importing them here would load it for every command.
    for cls in type(exc).__mro__:
        if cls.__module__ == "evoteam.servers.knowledge.errors":
            return cls.__name__
    return None


def debugging() -> bool:
    return os.environ.get("EVOTEAM_DEBUG", "").strip() not in ("", "0")


def exit_code_of(exc: click.ClickException) -> int:
    # A path that must exist and does not is "not found", not a usage error.
    if isinstance(exc, click.BadParameter) and isinstance(getattr(exc.param, "type", None), click.Path) \
            and "does not exist" in exc.format_message():
        return NOT_FOUND
    return exc.exit_code


def show(exc: click.ClickException) -> int:
    """Print `exc` as one line on stderr and return its exit code."""
    if type(exc).__name__ == "NoArgsIsHelpError":  # `evoteam` or `evoteam kb` alone: the help, as is
        exc.show()
        return exc.exit_code
    message = one_line(exc.format_message())
    ctx = getattr(exc, "ctx", None)
    if isinstance(exc, click.UsageError) and ctx is not None:
        path = ctx.command_path
        message = f"{path}: {message} (see `{path} --help`)"
    click.echo(f"Error: {message}", err=True)
    return exit_code_of(exc)
