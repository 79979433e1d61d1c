"""The exit codes of every `evoteam` command, so scripts can tell failures apart.

0 success; 1 any other error; 2 bad input (a usage error or a value the store refuses);
3 not found (a run, kit, version or candidate that does not exist); 4 candidate failed
(`evoteam bench run`: an evaluation that did not pass)."""

from __future__ import annotations

import click

OK, ERROR, BAD_INPUT, NOT_FOUND, CANDIDATE_FAILED = 0, 1, 2, 3, 4

HELP = ("Exit codes: 0 ok; 1 error; 2 bad input; 3 not found (run, kit, version, candidate); "
        "4 candidate failed (bench run). Every read command takes --json. Shell completion: "
        'eval "$(_EVOTEAM_COMPLETE=bash_source evoteam)" in ~/.bashrc (zsh_source for zsh, fish_source for fish).')


class BadInput(click.ClickException):
    exit_code = BAD_INPUT


class NotFoundError(click.ClickException):
    exit_code = NOT_FOUND


def cli_error(exc: Exception) -> click.ClickException:
    """A store or domain error as the command-line error with its exit code."""
    from evoteam.servers.knowledge.errors import Invalid, NotFound

    text = str(exc)
    if isinstance(exc, NotFound) or text.startswith(("no kit named", "no run", "unknown run", "no such")):
        return NotFoundError(text)
    if isinstance(exc, Invalid):
        return BadInput(text)
    return click.ClickException(text)
