"""What every `evoteam kb` command module shares: opening the configured store and running one
call on it with store errors turned into one CLI line. Kept apart from cli.py so the command
modules import it without importing the group that collects them."""

from __future__ import annotations

from evoteam.exitcodes import cli_error


def run_store_call(coro):
    """Run `coro`; a StoreError becomes the CLI's one-line error with its exit code."""
    import asyncio  # here: the quick reads never start an event loop

    from evoteam.servers.knowledge.errors import StoreError

    try:
        return asyncio.run(coro)
    except StoreError as exc:
        raise cli_error(exc) from exc


def open_store(settings, actor=None):
    """The configured store (a file, a database URL, or a shared server)."""
    from evoteam.servers.knowledge.connect import open_store as open_it

    return open_it(settings, actor)


def quick(settings, read):
    """`read(values)` of evoteam/servers/knowledge/quickread.py on the settings' raw values: the
    answer of a quick local read, or None when the store must answer (a shared server, a
    PostgreSQL URL, no file yet, another schema)."""
    from evoteam.clisettings import setting_values

    return read(setting_values(settings))
