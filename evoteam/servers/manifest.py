"""The fast-start front's cache: a *manifest* holds the answers a real server gave to a client's
`initialize` and `tools/list`, under a key made of everything those answers depend on (the code,
its environment, the server's options and the client's `initialize` parameters). Standard
library only, like the front (front.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from evoteam import evoteam_home
from evoteam.reuse_key import PACKAGE_DIR, code_fingerprint, environment_items, installed_fingerprint

FAST_START_ENV = "EVOTEAM_FAST_START"
MANIFEST_FORMAT = 1
MAX_MANIFEST_BYTES = 4 * 1024 * 1024
KEEP_PER_SERVER = 32
# The requests that open a session: `initialize` (the stateful protocol) and `server/discover`
# (the stateless one, 2026-07-28, whose requests each carry the client's version in `_meta`).
FIRST_METHODS = ("initialize", "server/discover")


def enabled(env: dict[str, str] | None = None) -> bool:
    """Whether `evoteam serve` over stdio should run behind the front (the default)."""
    return (os.environ if env is None else env).get(FAST_START_ENV, "1").strip() != "0"


def manifest_dir(env: dict[str, str] | None = None) -> Path:
    """Where manifests are cached: `$EVOTEAM_HOME/fast-start` (default `~/.evoteam/fast-start`)."""
    return evoteam_home(env) / "fast-start"


# ---------------------------------------------------------------- the key


def _config_files(env: dict[str, str], cwd: Path) -> list[tuple[str, str]]:
    """The files evoteam/config.py would read, with a hash of their bytes (mirrors its search)."""
    home = Path(env.get("HOME") or Path.home())
    candidates = [home / ".config" / "evoteam" / "evoteam.toml"]
    for folder in [cwd, *cwd.parents]:
        if (folder / "evoteam.toml").is_file():
            candidates.append(folder / "evoteam.toml")
            break
    out = []
    for path in candidates:
        try:
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            digest = "absent"
        out.append((str(path), digest))
    return out


def base_key(server: str, options: dict[str, Any], env: dict[str, str] | None = None,
             cwd: Path | None = None) -> dict[str, Any]:
    """Everything but the client's own parameters that can change the answers to
    `initialize` and `tools/list`: the server and its options, the interpreter, the installed
    packages, evoteam's files, the environment, the working directory and the config files."""
    from evoteam import __version__

    env = dict(os.environ if env is None else env)
    cwd = cwd or Path.cwd()
    return {
        "format": MANIFEST_FORMAT,
        "server": server,
        "options": options,
        "python": [sys.executable, sys.version, sys.prefix],
        "evoteam": [__version__, str(PACKAGE_DIR), code_fingerprint()],
        "installed": installed_fingerprint(),
        "env": environment_items(env),
        "cwd": str(cwd),
        "config": _config_files(env, cwd),
    }


def manifest_key(base: dict[str, Any], initialize_params: Any) -> str:
    """The cache key: the base key plus the client's `initialize` parameters (its protocol
    version, capabilities and name)."""
    text = json.dumps([base, initialize_params], sort_keys=True, ensure_ascii=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


# ---------------------------------------------------------------- the manifest file


def _manifest_path(folder: Path, server: str, key: str) -> Path:
    return folder / f"{server}-{key[:40]}.json"


def _valid(data: Any, key: str) -> bool:
    """A manifest of the right shape for this key; anything else is a cache miss."""
    if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT or data.get("key") != key:
        return False
    first, tools = data.get("first"), data.get("tools")
    if not (isinstance(first, dict) and first.get("method") in FIRST_METHODS
            and isinstance(first.get("result"), dict) and isinstance(first["result"].get("capabilities"), dict)):
        return False
    if not (isinstance(tools, dict) and "params" in tools and isinstance(tools.get("result"), dict)):
        return False
    listed = tools["result"].get("tools")
    return (isinstance(listed, list) and "nextCursor" not in tools["result"]
            and all(isinstance(t, dict) and isinstance(t.get("name"), str) for t in listed))


def load_manifest(folder: Path, server: str, key: str) -> dict[str, Any] | None:
    """The cached manifest for `key`, or None (absent, unreadable, too big, a link, wrong shape)."""
    try:
        fd = os.open(_manifest_path(folder, server, key), os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as fh:
            raw = fh.read(MAX_MANIFEST_BYTES + 1)
        if len(raw) > MAX_MANIFEST_BYTES:
            return None
        data = json.loads(raw)
    except (OSError, ValueError, RecursionError):
        return None
    return data if _valid(data, key) else None


def save_manifest(folder: Path, server: str, key: str, first: dict, tools: dict) -> Path:
    """Write the manifest atomically, 0600 in a 0700 folder. `first`: the opening request's
    method and result; `tools`: the client's tools/list params and the result."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(folder, 0o700)
    path = _manifest_path(folder, server, key)
    data = {"format": MANIFEST_FORMAT, "key": key, "server": server, "written": time.time(),
            "first": first, "tools": tools}
    tmp = folder / f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, ensure_ascii=False)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _prune(folder, server)
    return path


def _prune(folder: Path, server: str, keep: int = KEEP_PER_SERVER) -> None:
    """Drop all but the newest `keep` manifests of `server`: every source edit or new project
    folder makes a new key, and old ones are never asked for again."""
    def mtime(path: Path) -> float:
        try:
            return path.stat().st_mtime
        except OSError:
            return 0.0

    for old in sorted(folder.glob(f"{server}-*.json"), key=mtime, reverse=True)[keep:]:
        old.unlink(missing_ok=True)


# ---------------------------------------------------------------- the session
