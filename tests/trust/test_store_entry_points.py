"""Issue 23: a store that is full, newer or damaged is one clear line from every entry point
(CLI commands, doctor, stdio and HTTP start-up), and the process exits. The full disk is real:
a small tmpfs in a private mount namespace (tests/support/fulldisk.py), skipped with the reason
where the machine does not allow it."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.models import RunCreate
from evoteam.servers.knowledge.store import Actor
from tests.support.fulldisk import run_on_full_disk

INIT = ('{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
        '"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}')
COMMANDS = ["kb runs", "kb learnings run_x", "kb start goal", "token list", "kb export run_x OUT"]


async def _store(db: Path) -> None:
    async with LocalKnowledgeStore.open(db, Actor(user="a", client="t")) as store:
        await store.start_run(RunCreate(goal="g"))


def _env(tmp_path: Path, db: Path) -> dict[str, str]:
    env = {**os.environ, "HOME": str(tmp_path), "EVOTEAM_DB": str(db)}
    env.pop("EVOTEAM_KNOWLEDGE_URL", None)
    return env


def _sections(stdout: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    current = None
    for line in stdout.splitlines():
        if line.startswith("== "):
            current = line[3:]
            out[current] = []
        elif current is not None:
            out[current].append(line)
    return out


async def test_a_full_disk_is_one_line_and_an_exit_from_every_entry_point(tmp_path: Path):
    src = tmp_path / "src" / "kb.db"
    await _store(src)
    disk = tmp_path / "disk"
    db = disk / "kb.db"
    cli = f"timeout 60 {sys.executable} -m evoteam.cli"
    script = [f"cp {src} {db} && chmod 600 {db} && chmod 700 {disk}",
              f"dd if=/dev/zero of={disk}/fill bs=4k 2>/dev/null"]
    for cmd in COMMANDS:
        script.append(f'echo "== {cmd}"; {cli} {cmd.replace("OUT", str(tmp_path / "out"))} 2>&1; echo "rc=$?"')
    script.append(f'echo "== doctor"; {cli} doctor --server knowledge 2>&1; echo "rc=$?"')
    for server in ("knowledge", "bench"):
        script.append(f"echo '== stdio {server}'; echo '{INIT}' | {cli} serve {server} 2>&1 >/dev/null; "
                      f"echo \"rc=${{PIPESTATUS[1]}}\"")
    script.append(f'echo "== http"; {cli} serve knowledge --http --port 0 2>&1; echo "rc=$?"')
    proc = run_on_full_disk(disk, "1m", "\n".join(script), _env(tmp_path, db), timeout=600)
    sections = _sections(proc.stdout)
    assert set(sections) >= {*COMMANDS, "doctor", "stdio knowledge", "stdio bench", "http"}, proc.stdout + proc.stderr
    for name, lines in sections.items():
        rc = lines[-1]
        assert rc == "rc=1", (name, lines)  # not 124: nothing hangs at exit
        said = [line for line in lines[:-1] if line.strip()]
        if name == "doctor":  # checks print as they finish: the store's line, wherever it comes
            failed = [line for line in said if "FAIL" in line]
            assert len(failed) == 1 and "is full" in failed[0], said
            assert said[-1].startswith("Error: 1 check(s) failed"), said
            continue
        assert len(said) == 1 and "is full" in said[0] and "Traceback" not in said[0], (name, said)


def _bump_schema(db: Path) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE schema_versions SET version = version + 5")


def _run(env: dict[str, str], *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evoteam.cli", *args], env=env, input=stdin, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("damage, words", [("newer", "newer evoteam"), ("garbage", "damaged")])
async def test_a_newer_or_damaged_store_is_one_line_everywhere(tmp_path: Path, damage: str, words: str):
    db = tmp_path / "kb.db"
    await _store(db)
    if damage == "newer":
        _bump_schema(db)
    else:
        db.write_bytes(b"not a database " * 500)
    env = _env(tmp_path, db)
    for args in (["kb", "runs"], ["kb", "start", "g"], ["token", "list"]):
        proc = _run(env, *args)
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, (args, proc.stderr)
        assert proc.stderr.strip().count("\n") == 0 and words in proc.stderr, (args, proc.stderr)
    stdio = _run(env, "serve", "knowledge", stdin=INIT + "\n")
    assert stdio.returncode == 1 and stdio.stderr.strip().count("\n") == 0 and words in stdio.stderr, stdio.stderr
    http = _run(env, "serve", "knowledge", "--http", "--port", "0")
    assert http.returncode == 1 and "Traceback" not in http.stderr and words in http.stderr, http.stderr
    doctor = _run(env, "doctor", "--server", "knowledge")
    assert doctor.returncode == 1 and words in doctor.stdout, doctor.stdout
