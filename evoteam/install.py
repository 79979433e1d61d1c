"""`evoteam install-plugin`: register evoteam with Claude Code and Codex from wherever it is
installed (a checkout, a wheel, pipx, uvx). It copies the plugin's files (no virtualenv, no
build output) to `$EVOTEAM_HOME/plugin`, records this Python in `~/.evoteam/python` for the
launcher, then registers with each agent CLI found on PATH. `./install.sh` does the same for a
checkout."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import click

from evoteam import evoteam_home
from evoteam.plugin import codex
from evoteam.resources import PLUGIN_FILES, shipped_root

SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", ".venv", "build", "dist", "*.egg-info")


def stage_plugin(target: Path) -> Path:
    """Copy the plugin's files from the checkout or the installed package into `target`."""
    source = shipped_root()
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    for name in PLUGIN_FILES:
        path = source / name
        if path.is_dir():
            shutil.copytree(path, target / name, ignore=SKIP)
        elif path.is_file():
            shutil.copy2(path, target / name)
    launcher = target / "hooks" / "evoteam-launch"
    launcher.chmod(0o755)
    return target


def _claude(stage: Path) -> str:
    run = lambda *a: subprocess.run(["claude", *a], capture_output=True, text=True, timeout=300)  # noqa: E731
    run("plugin", "uninstall", "evoteam@evoteam")
    run("plugin", "marketplace", "remove", "evoteam")
    for args in (("plugin", "marketplace", "add", str(stage)), ("plugin", "install", "evoteam@evoteam", "--scope", "user")):
        proc = run(*args)
        if proc.returncode != 0:
            raise click.ClickException(f"`claude {' '.join(args)}` failed: {proc.stderr.strip()[-300:]}")
    return f"Claude Code: the evoteam plugin (servers, /evolve-team, hooks) from {stage}"


@click.command("install-plugin")
@click.option("--claude/--no-claude", "want_claude", default=None, help="Register with Claude Code (default: if on PATH).")
@click.option("--codex/--no-codex", "want_codex", default=None, help="Register with Codex (default: if on PATH).")
@click.option("--uninstall", is_flag=True, help="Remove the registrations instead (data in ~/.evoteam is kept).")
def install_plugin(want_claude: bool | None, want_codex: bool | None, uninstall: bool) -> None:
    """Register evoteam's servers, skills and hooks with Claude Code and Codex."""
    home = evoteam_home()
    use_claude = shutil.which("claude") is not None if want_claude is None else want_claude
    use_codex = shutil.which("codex") is not None if want_codex is None else want_codex
    if uninstall:
        if use_codex:
            codex.unregister(codex.codex_home())
            click.echo("removed evoteam's servers, hooks and skills from Codex")
        if use_claude:
            subprocess.run(["claude", "plugin", "uninstall", "evoteam@evoteam"], capture_output=True, timeout=300)
            click.echo("removed the evoteam plugin from Claude Code")
        return
    stage = stage_plugin(home / "plugin")
    (home / "python").write_text(sys.executable + "\n")
    click.echo(f"plugin files staged in {stage}; the launcher uses {sys.executable}")
    if use_claude:
        click.echo(_claude(stage))
    if use_codex:
        for line in codex.register(codex.codex_home(), stage):
            click.echo(f"Codex: {line}")
    if not (use_claude or use_codex):
        click.echo("neither `claude` nor `codex` is on PATH: nothing registered (see docs/plugin.md)")
