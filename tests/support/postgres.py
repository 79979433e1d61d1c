"""A real PostgreSQL server for the tests, started once per test run in a temporary folder.

PostgreSQL refuses to run as root and CI runs as root, so under root the server runs as the
unprivileged `nobody` (its data folder is handed to that user); otherwise as the current user.
It listens on 127.0.0.1 on a free port and on a Unix socket in its own folder, trusts local
connections (nothing else can reach it) and is stopped, `-m immediate`, when the run ends.

Each test gets a database of its own, copied from a template that already holds every
component's schema (`CREATE DATABASE ... TEMPLATE`), so a fresh store costs a file copy, not a
migration.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path

TEMPLATE = "evoteam_template"


class PostgresUnavailable(Exception):
    """No PostgreSQL server binaries or no psycopg here: the PostgreSQL tests skip with this reason."""


def bin_dir() -> Path:
    """The folder of initdb/pg_ctl/postgres (Debian keeps them under /usr/lib/postgresql/N/bin)."""
    found = shutil.which("pg_config")
    candidates = []
    if found:
        out = subprocess.run([found, "--bindir"], capture_output=True, text=True)
        if out.returncode == 0:
            candidates.append(Path(out.stdout.strip()))
    candidates += [Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)]
    for folder in candidates:
        if (folder / "initdb").exists() and (folder / "pg_ctl").exists() and (folder / "postgres").exists():
            return folder
    raise PostgresUnavailable("PostgreSQL server binaries not found (Debian: apt-get install postgresql)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class PostgresServer:
    """A running server; `url(name)` is a connection URL for one of its databases."""

    root: Path
    port: int
    bindir: Path
    as_user: str | None
    _dbs: list[str] = field(default_factory=list)
    watchdog: subprocess.Popen | None = None

    @property
    def data(self) -> Path:
        return self.root / "data"

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://evoteam@127.0.0.1:{self.port}/{dbname}"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        cmd = list(args)
        if self.as_user:
            cmd = ["runuser", "-u", self.as_user, "--", *cmd]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if check and out.returncode != 0:
            raise PostgresUnavailable(f"{' '.join(args[:2])} failed: {(out.stderr or out.stdout).strip()[-500:]}")
        return out

    def start(self) -> None:
        self._run(str(self.bindir / "initdb"), "-D", str(self.data), "-U", "evoteam", "--auth=trust",
                  "-E", "UTF8", "--locale=C.UTF-8", "--no-sync")
        # No fsync (these databases are thrown away, and CI's two cores are better spent on tests),
        # but every acknowledged commit is in the WAL: a server killed mid-load loses none of them.
        opts = self._options()
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-l", str(self.root / "log" / "server.log"),
                  "-o", opts, "-w", "-t", "60", "start")

    def _options(self) -> str:
        return f"-h 127.0.0.1 -p {self.port} -k {self.root / 'sock'} -F -c max_connections=300"

    def stop(self) -> None:
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop", check=False)

    def restart(self) -> None:
        """Stop at once (as a crash would) and start again on the same port and data."""
        self.stop()
        self.resume()

    def resume(self) -> None:
        """Start again after `stop`, on the same port and data."""
        opts = self._options()
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-l", str(self.root / "log" / "server.log"),
                  "-o", opts, "-w", "-t", "60", "start")

    def admin(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(sql)

    def make_template(self) -> None:
        """One database holding every component's schema, to copy for each test."""
        from evoteam.servers.knowledge.pg import migrate_url

        self.admin(f"CREATE DATABASE {TEMPLATE}")
        migrate_url(self.url(TEMPLATE))

    def new_database(self) -> str:
        """A fresh, migrated, empty database; its URL."""
        name = f"t_{uuid.uuid4().hex[:12]}"
        self.admin(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE}")
        self._dbs.append(name)
        return self.url(name)

    def empty_database(self) -> str:
        """A fresh database with no schema at all (for migration tests); its URL."""
        name = f"e_{uuid.uuid4().hex[:12]}"
        self.admin(f"CREATE DATABASE {name}")
        self._dbs.append(name)
        return self.url(name)


# Stops the server and removes its folder if the test process dies without its teardown (a
# run killed by a timeout): otherwise every such run would leave a postmaster behind.
_WATCHDOG = """
import os, shutil, subprocess, sys, time
pid, pg_ctl, data, root, user = sys.argv[1:6]
while True:
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        break
    time.sleep(1)
cmd = [pg_ctl, "-D", data, "-m", "immediate", "-w", "stop"]
subprocess.run((["runuser", "-u", user, "--"] if user else []) + cmd, capture_output=True)
shutil.rmtree(root, ignore_errors=True)
"""


def start_server() -> PostgresServer:
    """Start a throwaway PostgreSQL; PostgresUnavailable (a skip reason) when it cannot be."""
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError:
        raise PostgresUnavailable("psycopg is not installed (pip install 'psycopg[binary,pool]')") from None
    bindir = bin_dir()
    as_user = None
    root = Path(tempfile.mkdtemp(prefix="evoteam-pg-"))
    if os.geteuid() == 0:
        as_user = "nobody"
        os.chmod(root, 0o755)  # nobody must reach its own folders inside
    for sub in ("data", "sock", "log"):
        (root / sub).mkdir()
        if as_user:
            entry = pwd.getpwnam(as_user)
            os.chown(root / sub, entry.pw_uid, entry.pw_gid)
    os.chmod(root / "data", 0o700)
    server = PostgresServer(root=root, port=_free_port(), bindir=bindir, as_user=as_user)
    try:
        server.start()
        server.watchdog = subprocess.Popen(
            [sys.executable, "-c", _WATCHDOG, str(os.getpid()), str(bindir / "pg_ctl"), str(server.data), str(root),
             as_user or ""], start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        server.make_template()
    except BaseException:
        stop_server(server)
        raise
    return server


def stop_server(server: PostgresServer) -> None:
    server.stop()
    shutil.rmtree(server.root, ignore_errors=True)
    if server.watchdog is not None:
        server.watchdog.kill()
        server.watchdog.wait()
