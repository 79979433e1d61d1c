"""What every `evoteam kb` command module shares: opening the configured store and running one
call on it with store errors turned into one CLI line. Kept apart from cli.py so the command
modules import it without importing the group that collects them."""

from __future__ import annotations

import asyncio

from evoteam.exitcodes import cli_error


def run_store_call(coro):
    """Run `coro`; a StoreError becomes the CLI's one-line error with its exit code."""
    from evoteam.servers.knowledge.errors import StoreError

    try:
        return asyncio.run(coro)
    except StoreError as exc:
        raise cli_error(exc) from exc


def open_store(settings, actor=None):
    """The configured store (a file, a database URL, or a shared server)."""
    from evoteam.servers.knowledge.connect import open_store as open_it

    return open_it(settings, actor)
