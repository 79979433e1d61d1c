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


def _loaded_after(*args: str) -> set[str]:
    """The top-level modules imported by `evoteam ARGS` (run in its own interpreter)."""
    probe = ("import sys; from evoteam.cli import main\n"
             "try:\n    main(sys.argv[1:])\n"
             "except SystemExit:\n    pass\n"
             "finally:\n    print('LOADED', ' '.join(sorted({m.split('.')[0] for m in sys.modules})))")
    done = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, timeout=60)
    assert "Usage: " in done.stdout, done.stdout + done.stderr
    return set(done.stdout.split("LOADED", 1)[1].split())


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_commands_help_never_imports_the_mcp_sdk(name):
    # mcp 2.x takes ~1 s to import (5-8 s on a busy machine): help must not wait for it.
    assert "mcp" not in _loaded_after(name, "--help")


@pytest.mark.parametrize("args", [("kb", "--help"), ("token", "--help"), ("kb", "runs", "--help"),
                                  ("bench", "--help"), ("bench", "run", "--help"), ("report", "--help")])
def test_store_and_bench_help_skip_pydantic_and_rich(args):
    loaded = _loaded_after(*args)
    assert not loaded & {"mcp", "pydantic", "rich", "aiosqlite"}, sorted(loaded & {"mcp", "pydantic", "rich"})


def test_local_reads_never_import_the_mcp_sdk(tmp_path):
    """`kb runs` and `token list` read the embedded store file directly."""
    probe = ("import sys; from evoteam.cli import main\n"
             "for args in (['kb', 'runs'], ['token', 'list'], ['bench', 'list']):\n"
             "    try:\n        main(args)\n    except SystemExit as e:\n        assert not e.code, (args, e.code)\n"
             "print('MCP' if 'mcp' in sys.modules else 'NO-MCP')")
    env = {"EVOTEAM_DB": str(tmp_path / "kb.db"), "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, env=env)
    assert done.stdout.strip().endswith("NO-MCP"), done.stdout + done.stderr
