"""rich's Console, Table and escape, imported on first call: rich costs ~0.1 s to import, and
`evoteam bench --help` or a listing from the kit index should not wait for more than it needs."""

from __future__ import annotations


def Console(*args, **kwargs):  # noqa: N802 - stands in for rich's class
    from rich.console import Console as RichConsole

    return RichConsole(*args, **kwargs)


def Table(*args, **kwargs):  # noqa: N802
    from rich.table import Table as RichTable

    return RichTable(*args, **kwargs)


def escape(text: str) -> str:
    from rich.markup import escape as rich_escape

    return rich_escape(text)
