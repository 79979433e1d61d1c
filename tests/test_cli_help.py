"""`evoteam --help` lists every command from summaries, without importing the commands."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest

from evoteam.cli import COMMANDS, SUMMARIES, _load


@pytest.mark.parametrize("name", sorted(SUMMARIES))
def test_each_summary_is_the_commands_own_help(name):
    command = _load(COMMANDS[name])
    listed = click.Command(name, help=SUMMARIES[name])
    for width in (30, 45, 80):
        assert listed.get_short_help_str(width) == command.get_short_help_str(width)


def test_help_lists_every_command_without_importing_any():
    probe = ("import sys; from evoteam.cli import main\n"
             "try:\n    main(['--help'], standalone_mode=False)\n"
             "finally:\n    print('LOADED', sorted(m for m in sys.modules if m.startswith('evoteam.')))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60).stdout
    for name in COMMANDS:
        assert f"\n  {name} " in out
    loaded = out.split("LOADED", 1)[1]
    assert "evoteam.servers" not in loaded and "evoteam.config" not in loaded and "evoteam.doctor" not in loaded
