"""Where the shipped files live: the task kits, skills, hooks, agents and plugin manifests.

In a source checkout (an editable install) they are the repository's top-level folders. In an
installed wheel (`pip install`, `pipx`, `uvx`) the build copies the same folders into the
package as `evoteam/_shipped/` (see setup.py), so nothing depends on a checkout.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
CHECKOUT_ROOT = PACKAGE_DIR.parent
INSTALLED_ROOT = PACKAGE_DIR / "_shipped"

# The folders and files the build ships inside the package (and the plugin copies hold).
SHIPPED = ("task_kits", "skills", "hooks", "agents", ".claude-plugin", ".codex-plugin", ".mcp.json")
# What a plugin copy contains: everything shipped except the task kits (the package serves those).
PLUGIN_FILES = (".claude-plugin", ".codex-plugin", ".mcp.json", "hooks", "skills", "agents")


def _is_root(folder: Path) -> bool:
    return (folder / "task_kits").is_dir() and (folder / "hooks" / "evoteam-launch").is_file()


def shipped_root() -> Path:
    """The folder that holds task_kits/, skills/, hooks/, ...: the checkout when there is one,
    else the copy inside the installed package."""
    if _is_root(CHECKOUT_ROOT):
        return CHECKOUT_ROOT
    return INSTALLED_ROOT


def shipped(name: str) -> Path:
    return shipped_root() / name


def kits_dir() -> Path:
    return shipped("task_kits")
