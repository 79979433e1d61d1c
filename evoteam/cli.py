"""The `evoteam` command line. Each server contributes its own command group from
`evoteam/servers/<server>/cli.py`; this module only assembles them."""

from __future__ import annotations

import importlib
import sys

import click

from evoteam import __version__
from evoteam.config import ConfigError, load_settings

SERVERS = ("knowledge", "team", "retrieval", "bench")


@click.group()
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
        module.serve_http(settings, host=host, port=port, allowed_hosts=list(allowed_hosts),
                          allowed_origins=list(allowed_origins))
    else:
        module.serve_stdio(settings)


def _add_server_commands() -> None:
    for name in SERVERS:
        try:
            module = importlib.import_module(f"evoteam.servers.{name}.cli")
        except ModuleNotFoundError as exc:
            if exc.name == f"evoteam.servers.{name}.cli":
                continue
            raise
        for command in getattr(module, "COMMANDS", []):
            main.add_command(command)
    try:
        supervisor_cli = importlib.import_module("evoteam.supervisor.cli")
    except ModuleNotFoundError as exc:
        if exc.name != "evoteam.supervisor.cli":
            raise
    else:
        for command in getattr(supervisor_cli, "COMMANDS", []):
            main.add_command(command)


_add_server_commands()


def _add_doctor() -> None:
    from evoteam.doctor import doctor

    main.add_command(doctor)


_add_doctor()

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
