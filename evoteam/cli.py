"""The `evoteam` command line.

Commands live next to the part they drive (`evoteam/servers/<server>/cli.py`, the supervisor,
the plugin hooks) and are imported only when used: a hook or a stdio server started by an
agent must not pay for the imports of every other part.
"""

from __future__ import annotations

import importlib
import sys

import click

from evoteam import __version__
from evoteam.config import ConfigError, load_settings

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
    "report": "evoteam.report.cli:report",
    "compare": "evoteam.report.cli:compare",
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
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in COMMANDS:
            return _load(COMMANDS[name])
        return super().get_command(ctx, name)


@click.group(cls=LazyGroup)
@click.version_option(__version__, prog_name="evoteam")
@click.pass_context
def main(ctx: click.Context) -> None:
    """evoteam: evolving agent teams for open-ended optimisation."""
    try:
        ctx.obj = load_settings()
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from exc


@main.command()
@click.argument("server", type=click.Choice(SERVERS))
@click.option("--http", "use_http", is_flag=True, help="Serve streamable HTTP instead of stdio (knowledge only).")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8765, show_default=True, type=int)
@click.option("--allowed-host", "allowed_hosts", multiple=True,
              help="Extra Host header values to accept (e.g. kb.example.org:8765).")
@click.option("--allowed-origin", "allowed_origins", multiple=True, help="Extra Origin values to accept.")
@click.option("--knowledge-url", default=None, help="Use a shared knowledge server instead of the local file.")
@click.pass_obj
def serve(settings, server, use_http, host, port, allowed_hosts, allowed_origins, knowledge_url):
    """Run one of the MCP servers (stdio by default)."""
    if knowledge_url:
        settings.knowledge_url = knowledge_url
    module = importlib.import_module(f"evoteam.servers.{server}.server")
    if use_http:
        if server != "knowledge":
            raise click.UsageError("only the knowledge server is served over HTTP; the others run over stdio")
        if settings.remote:
            raise click.UsageError("a shared knowledge server keeps its own store file: unset EVOTEAM_KNOWLEDGE_URL")
        module.serve_http(settings, host=host, port=port, allowed_hosts=list(allowed_hosts),
                          allowed_origins=list(allowed_origins))
    else:
        module.serve_stdio(settings)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
