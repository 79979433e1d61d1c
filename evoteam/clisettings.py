"""The settings of a command-line call, built on first use.

Building the `Settings` model imports pydantic (a third of a quick read's time), and the quick
local reads (evoteam/servers/knowledge/quickread.py) need only the store's location, which
`values()` gives from the files and the environment alone. Every other use reads the model.
"""

from __future__ import annotations

import click


def load():
    """The `Settings` model; a bad configuration file is one line and exit 1."""
    from evoteam.config import ConfigError, load_settings  # pydantic: not needed for --help

    try:
        return load_settings()
    except ConfigError as exc:  # exit 1, as the fast-start front says it for `serve`
        raise click.ClickException(str(exc)) from exc


class LazySettings:
    """Stands in for the `Settings` model: attributes are read from it, built on first use."""

    def __init__(self):
        object.__setattr__(self, "_built", None)
        object.__setattr__(self, "_values", None)

    def values(self) -> dict:
        """The raw values (evoteam/configsource.py): no model, no pydantic."""
        if self._values is None:
            from evoteam.configsource import ConfigError, setting_values

            try:
                object.__setattr__(self, "_values", setting_values())
            except ConfigError as exc:
                raise click.ClickException(str(exc)) from exc
        return self._values

    def built(self):
        """The `Settings` model."""
        if self._built is None:
            object.__setattr__(self, "_built", load())
        return self._built

    def __getattr__(self, name: str):
        if name.startswith("_"):  # copy/pickle probe dunders before __dict__ is set: never recurse
            raise AttributeError(name)
        return getattr(self.built(), name)

    def __setattr__(self, name: str, value) -> None:
        setattr(self.built(), name, value)


def setting_values(settings) -> dict:
    """The raw setting values behind `settings` (a LazySettings or a built model) that a quick
    read needs: the store's location and the shared server."""
    if isinstance(settings, LazySettings):
        return settings.values()
    return {"db": settings.db, "knowledge_url": settings.knowledge_url}
