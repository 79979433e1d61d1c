"""The `evoteam` command line.

Commands live next to the part they drive (`evoteam/servers/<server>/cli.py`, the supervisor,
the plugin hooks) and are imported only when used: a hook or a stdio server started by an
agent must not pay for the imports of every other part.
"""

from __future__ import annotations

import importlib
import os
import sys

if __name__ == "__main__":  # `python -m evoteam.cli` without -P: see forget_working_folder
    from evoteam import forget_working_folder

    forget_working_folder()

import click  # noqa: E402

from evoteam import __version__
from evoteam import exitcodes
from evoteam.clisettings import LazySettings, load as _settings
from evoteam.exitcodes import HELP

SERVERS = ("knowledge", "team", "retrieval", "bench")

# command name -> "module:attribute" of its click command
COMMANDS = {
    "kb": "evoteam.servers.knowledge.cli:kb",
    "token": "evoteam.servers.knowledge.cli:token",
    "bench": "evoteam.servers.bench.cli:bench",
    "corpus": "evoteam.servers.retrieval.cli:corpus",
    "team": "evoteam.servers.team.cli:team",
    "supervise": "evoteam.supervisor.cli:supervise",
    "hook": "evoteam.plugin.cli:hook",
    "doctor": "evoteam.doctor:doctor",
    "install-plugin": "evoteam.install:install_plugin",
    "report": "evoteam.report.cli:report",
    "compare": "evoteam.report.cli:compare",
}


# command name -> its one-line summary, so that `evoteam --help` lists the commands without
# importing them (tests/test_cli_help.py keeps these equal to the commands' own help). A command
# missing here is still listed: it is imported to read its help.
SUMMARIES = {
    "kb": "The knowledge store: runs, learnings, history, artifacts, candidates.",
    "token": "Bearer tokens for the shared knowledge server (stored as hashes in the store file).",
    "bench": "Task kits and honest candidate evaluation.",
    "corpus": "Clean-room corpus for the retrieval server's `local` search backend.",
    "team": "Team versions, role sessions and budget of a run; the supervisor prompt.",
    "supervise": "Drive an evolving agent team headless on KIT_OR_GOAL until the budget is spent.",
    "hook": "evoteam's Claude Code / Codex hooks and the project's active run.",
    "doctor": "Check that every server starts, the store round-trips and a CPU kit evaluates.",
    "install-plugin": "Register evoteam's servers, skills and hooks with Claude Code and Codex.",
    "report": "Draw one run: score vs spend with team redesigns, versions, per-workload speedups, cost, retrieval.",
    "compare": "Compare runs of the same kit (e.g. evolving vs solo) at matched spend.",
}


def _load(target: str) -> click.Command | None:
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:  # that part is not installed in this build
            return None
        raise
    return getattr(module, attr, None)


class LazyGroup(click.Group):
    _listing = False  # True while the help lists the commands: summaries only, nothing imported

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in COMMANDS:
            if self._listing and name in SUMMARIES:
                return click.Command(name, help=SUMMARIES[name])
            return _load(COMMANDS[name])
        return super().get_command(ctx, name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        self._listing = True
        try:
            super().format_commands(ctx, formatter)
        finally:
            self._listing = False

    def invoke(self, ctx: click.Context):
        # Help for a subcommand needs no settings: reading them imports pydantic (slow start).
        # click 8.2+ keeps them in _protected_args (the public name warns); 8.1 in protected_args
        protected = ctx._protected_args if hasattr(ctx, "_protected_args") else ctx.protected_args
        rest = (*protected, *ctx.args)
        ctx.meta["evoteam.help"] = "--help" in rest
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except Exception as exc:  # the exit-code policy: one line and a code, never a traceback
            if exitcodes.debugging():
                raise
            raise exitcodes.cli_error(exc) from exc

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        """Every error ends as one line on stderr and an exit code of evoteam/exitcodes.py."""
        prog_name = prog_name or "evoteam"  # messages name the command people type, also under `python -m`
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            result = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.ClickException as exc:
            sys.exit(exitcodes.show(exc))
        except click.Abort:
            click.echo("Error: interrupted", err=True)
            sys.exit(exitcodes.ERROR)
        sys.exit(result if type(result) is int else exitcodes.OK)


@click.group("evoteam", cls=LazyGroup, epilog=HELP)
@click.version_option(__version__, prog_name="evoteam")
@click.pass_context
def main(ctx: click.Context) -> None:
    """evoteam: evolving agent teams for open-ended optimisation."""
    if not ctx.meta.get("evoteam.help"):
        _private_home()
    if ctx.invoked_subcommand == "serve" or ctx.meta.get("evoteam.help"):
        # serve reads its settings itself (behind the fast-start front, in the background), and
        # a subcommand's --help needs none
        return
    ctx.obj = LazySettings()


def _private_home() -> None:
    """Make evoteam's folder (0700) if it is missing. install.sh makes it so, but a pipx or
    wheel install never runs install.sh, and the first command to write there (the kit index,
    the bench's locks) made it with the umask's 0755 (issue 24). A folder that exists is left
    as its owner chose; a home that cannot be written is the commands' own error to report."""
    from evoteam import evoteam_home

    home = evoteam_home().expanduser()
    try:
        os.mkdir(home, 0o700)
    except OSError:
        return
    os.chmod(home, 0o700)  # the umask can take bits from mkdir's mode: say it exactly


@main.command()
@click.argument("server", type=click.Choice(SERVERS))
@click.option("--http", "use_http", is_flag=True, help="Serve streamable HTTP instead of stdio (knowledge only).")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8765, show_default=True, type=int)
@click.option("--allowed-host", "allowed_hosts", multiple=True,
              help="Extra Host header values to accept (e.g. kb.example.org:8765).")
@click.option("--allowed-origin", "allowed_origins", multiple=True, help="Extra Origin values to accept.")
@click.option("--knowledge-url", default=None, help="Use a shared knowledge server instead of the local file.")
@click.option("--db", default=None, metavar="PATH|URL",
              help="The store: a SQLite file, or postgresql://... for a store several servers share "
                   "(overrides EVOTEAM_DB and evoteam.toml).")
@click.option("--tls-cert", default=None, type=click.Path(exists=True, dir_okay=False),
              help="Serve HTTPS with this certificate (PEM); with --tls-key.")
@click.option("--tls-key", default=None, type=click.Path(exists=True, dir_okay=False),
              help="The private key (PEM) of --tls-cert.")
def serve(server, use_http, host, port, allowed_hosts, allowed_origins, knowledge_url, db, tls_cert, tls_key):
    """Run one of the MCP servers (stdio by default)."""
    if db:  # through the environment, so every part of this process (and its children) sees it
        os.environ["EVOTEAM_DB"] = db
    if not use_http:
        from evoteam.servers import front, manifest  # standard library only: no mcp, no pydantic

        if manifest.enabled():
            code = front.serve(server, {"knowledge_url": knowledge_url})
            if code is not None:
                sys.exit(code)
    settings = _settings()
    if knowledge_url:
        settings.knowledge_url = knowledge_url
    if use_http:
        if server != "knowledge":
            raise click.UsageError("only the knowledge server is served over HTTP; the others run over stdio")
        if settings.remote:
            raise click.UsageError("a shared knowledge server keeps its own store file: unset EVOTEAM_KNOWLEDGE_URL")
        from evoteam.servers.knowledge.http import run_http

        _one_line_on_failure(lambda: run_http(
            settings, host=host, port=port, allowed_hosts=list(allowed_hosts), allowed_origins=list(allowed_origins),
            tls_cert=tls_cert, tls_key=tls_key))
    else:
        from evoteam.servers.stdio import serve_stdio

        _one_line_on_failure(lambda: serve_stdio(server, settings))


def _one_line_on_failure(start) -> None:
    """Run a server; a store that cannot open, a port in use or a bad setting is one line and
    exit 1, never a traceback (the cause is found inside anyio's exception groups)."""
    from evoteam.errors import DomainError, first_leaf
    from evoteam.servers.knowledge.errors import StoreError

    try:
        start()
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:
        leaf = first_leaf(exc)
        if isinstance(leaf, (StoreError, DomainError, OSError)):
            raise click.ClickException(str(leaf).splitlines()[0] if str(leaf) else type(leaf).__name__) from None
        raise


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
