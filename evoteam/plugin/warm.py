"""The warm hook process: hooks after the first skip the imports that make a hook slow.

A hook is a fresh Python process. With an active run, most of its time (about 0.2 s on two
cores) goes on importing pydantic, asyncio and the store; the hook's own work takes 10–30 ms.
So the first hook of an environment starts one *warm process* in the background, which has
those imports done and listens on a Unix socket, and runs its own event in-process as before.
Every later hook of the same environment sends its event and input to the warm process and
prints the answer; its own process imports only the standard library.

What keeps this equivalent to running the hook in its own process:

- The socket's name is a hash of everything the hook can see: the interpreter, the evoteam
  code and the installed packages (evoteam/reuse_key.py), the working folder, uid, gid and
  umask, and the environment but for variables no hook reads. A different environment, an
  edited or upgraded evoteam or another project gets another warm process; the warm process
  takes only requests signed with that hash (the key).
- The warm process was started with that same environment and folder, and serves the same
  user only (the socket lives in `~/.evoteam/run/`, or, for a home whose path is too long for
  a socket, `$XDG_RUNTIME_DIR/evoteam` or `/tmp/evoteam-<uid>`; each a real folder, 0700 and
  the user's own, and the peer's uid is checked on both sides where the OS tells it).
- The key is the secret the two sides share, and it never travels where another process can
  read it: the hook hands it (with the socket's path) to the warm process through a pipe on
  its stdin, not in its arguments (which `ps` shows to every user), and a request carries an
  HMAC of its bytes under the key, not the key itself. Each connection starts with a fresh
  random nonce from the warm process that the request must sign, so a request is good for the
  one connection it was made on: recorded and sent again, it is refused. The key is secret from
  other users only: a process of the same uid can read the warm process's environment and folder
  from /proc and compute it. The uid is the boundary (the folder, the socket's mode, the peer check).
- It exits after `EVOTEAM_HOOK_WARM_IDLE` seconds without a request (default 600), or when its
  socket file is removed or taken by a newer warm process.

`EVOTEAM_HOOK_WARM=0` turns it off (every hook runs in its own process). A hook that could not
reach the warm process runs in-process; once a request has been sent, it is never re-run
in-process, so a hook's writes never happen twice.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import socket
import stat
import sys
import time
from typing import Any

from evoteam import evoteam_home
from evoteam.reuse_key import VOLATILE_ENV, code_fingerprint, environment_items, installed_fingerprint

DEFAULT_IDLE_S = 600.0
# A warm process nobody came back to leaves sooner: should a client start setting a variable
# per hook, each would start its own warm process, and those must not pile up.
FIRST_REQUEST_S = 300.0
MAX_REQUEST_BYTES = 16 * 1024 * 1024  # a hook input carries a tool's input or response
REPLY_TIMEOUT_S = 120.0  # Claude Code kills the hook at its own timeout first
# sockaddr_un holds 104–108 bytes depending on the OS; the warm process first binds under the
# socket's name plus ".<pid>" (up to 8 more bytes), so the name itself must leave room for that.
_SOCKET_PATH_MAX = 103 - len(".4194304")
TAKEN = b"taken\n"  # the warm process's answer to a good request: from here on the hook is its job
# The warm process's greeting on every connection: this prefix, a fresh nonce in hex, a newline.
CHALLENGE = b"evoteam-warm 1 "
_NONCE_BYTES = 16
_HANDOVER_MAX = 4096  # the pipe that hands the warm process its path and key


def enabled(env: dict[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    return hasattr(socket, "AF_UNIX") and env.get("EVOTEAM_HOOK_WARM", "").strip().lower() not in (
        "0", "off", "false", "no")


def run_dirs(env: dict[str, str] | None = None) -> list[str]:
    """Where warm processes' sockets may live, best first: evoteam's own folder, then the
    user's runtime folder, then a short folder of the user's own in the temporary folder (for
    a home whose path is too long for a socket where `XDG_RUNTIME_DIR` is unset). Each is made
    0700 and must belong to the user (socket_path checks)."""
    env = os.environ if env is None else env
    folders = [str(evoteam_home(env) / "run")]
    if env.get("XDG_RUNTIME_DIR"):
        folders.append(os.path.join(env["XDG_RUNTIME_DIR"], "evoteam"))
    folders.append(f"/tmp/evoteam-{os.getuid()}")
    return folders


def environment_key(env: dict[str, str] | None = None, cwd: str | None = None) -> str:
    """The hash that names a warm process: interpreter, code, packages, folder, environment."""
    env = os.environ if env is None else env
    umask = os.umask(0o077)
    os.umask(umask)  # files the hooks write get the caller's umask: part of what it sees
    parts = [sys.executable, code_fingerprint(), *installed_fingerprint(), cwd or os.getcwd(),
             f"{os.getuid()}:{os.getgid()}:{umask:o}", *(f"{k}={v}" for k, v in environment_items(env))]
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogateescape")).hexdigest()


def socket_path(key: str, env: dict[str, str] | None = None) -> str | None:
    """Where the warm process of `key` listens, or None if no safe place exists here."""
    return _place(key, env)[0]


def _place(key: str, env: dict[str, str] | None) -> tuple[str | None, str]:
    """(socket path or None, why): the first folder of run_dirs that is short enough and safe."""
    tried = []
    for folder in run_dirs(env):
        path = os.path.join(folder, f"hooks-{key[:24]}.sock")
        if len(path.encode()) > _SOCKET_PATH_MAX:
            tried.append(f"{folder} is too long for a socket path ({len(path.encode())} > {_SOCKET_PATH_MAX} bytes)")
            continue
        try:
            os.makedirs(folder, mode=0o700, exist_ok=True)
            st = os.lstat(folder)
        except OSError as exc:
            tried.append(f"{folder}: {exc.strerror or exc}")
            continue
        # Another user's folder, or one others can write into, could hold their socket under our
        # name; so could a link (in /tmp, another user's), which its owner may re-point at will.
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
            return None, "; ".join([*tried, f"{folder} is a link, belongs to another user or others can write into it "
                                              f"(mode {st.st_mode & 0o777:o}): remove it, or set XDG_RUNTIME_DIR "
                                              f"to a private folder"])
        return path, f"sockets in {folder}"
    return None, "; ".join(tried) + ": set XDG_RUNTIME_DIR or EVOTEAM_HOME to a shorter private folder"


def explain(env: dict[str, str] | None = None) -> tuple[bool, str]:
    """For `evoteam doctor`: whether later hooks can reach a warm process here, and why not."""
    env = os.environ if env is None else env
    if not enabled(env):
        return False, "off (EVOTEAM_HOOK_WARM=0, or no Unix sockets here): every hook starts its own Python"
    path, why = _place(environment_key(env), env)
    if path is None:
        return False, f"off: {why}; every hook then starts its own Python (~0.2 s more per hook)"
    return True, why


# ---------------------------------------------------------------- the hook's side


def ask(event: str, raw_input: str, *, env: dict[str, str] | None = None) -> tuple[bool, dict | None]:
    """Run `event` in the warm process. Returns (handled, output or None).

    Not handled (False) when the warm process did not take the request (none is running, it
    was leaving, or it refused): the caller then runs the hook itself, and a warm process is
    started for the next hooks. Once taken, the request is never run a second time."""
    env = os.environ if env is None else env
    cwd = os.getcwd()
    key = environment_key(env, cwd)
    path = socket_path(key, env)
    if path is None:
        return False, None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    taken = False
    try:
        conn.settimeout(0.5)
        try:
            conn.connect(path)
        except OSError:
            start(path, key, env, cwd)
            return False, None
        conn.settimeout(REPLY_TIMEOUT_S)
        # The folder's check happened before the connect: whoever answers must be this user too,
        # or it would read the hook's input and could answer in the hook's name.
        if not _peer_is_us(conn):
            return False, None
        nonce = _read_challenge(conn)
        if nonce is None:  # not a warm process we know (or an older one): nothing was sent
            return False, None
        conn.sendall(sign(key, nonce, event, raw_input))
        conn.shutdown(socket.SHUT_WR)
        received = b""
        while chunk := conn.recv(65536):
            received += chunk
            if not taken and len(received) >= len(TAKEN):
                if not received.startswith(TAKEN):
                    return False, None
                taken = True
        if not taken:
            return False, None
    except OSError as exc:
        if not taken:
            return False, None
        _log(f"{event}: the warm hook process did not finish ({type(exc).__name__}: {exc}); "
             f"the hook was not run again in-process")
        return True, None
    finally:
        conn.close()
    try:
        reply = json.loads(received[len(TAKEN):] or b"{}")
    except ValueError:
        _log(f"{event}: the warm hook process answered something unreadable")
        return True, None
    return True, reply.get("output") if isinstance(reply, dict) else None


def _read_challenge(conn: socket.socket) -> bytes | None:
    """The nonce of the warm process's greeting, or None if the greeting is not one."""
    line = b""
    while not line.endswith(b"\n") and len(line) <= len(CHALLENGE) + 2 * _NONCE_BYTES:
        chunk = conn.recv(1)
        if not chunk:
            return None
        line += chunk
    if not line.startswith(CHALLENGE) or not line.endswith(b"\n"):
        return None
    nonce = line[len(CHALLENGE):-1]
    return nonce if len(nonce) == 2 * _NONCE_BYTES else None


def _mac(key: str, body: bytes) -> bytes:
    return hmac.new(key.encode(), body, hashlib.sha256).hexdigest().encode()


def sign(key: str, nonce: bytes, event: str, raw_input: str) -> bytes:
    """A request for one connection: the HMAC of its body under the key, a newline, the body
    (which names the connection's nonce). The key itself is never sent."""
    body = json.dumps({"nonce": nonce.decode(), "event": event, "input": raw_input}).encode("utf-8", "surrogatepass")
    return _mac(key, body) + b"\n" + body


def start(path: str, key: str, env: dict[str, str], cwd: str) -> None:
    """Start the warm process for `key` in the background (it outlives this hook). The path
    and key go through a pipe: a process's arguments are readable by every user (`ps`)."""
    import subprocess

    child_env = {name: value for name, value in env.items() if name not in VOLATILE_ENV}
    try:
        from evoteam import python_module_command

        child = subprocess.Popen(python_module_command("evoteam.plugin.warm"), cwd=cwd, env=child_env,
                                 stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                 start_new_session=True, close_fds=True)
        # Far below a pipe's buffer: this write never waits for the child.
        child.stdin.write(json.dumps({"path": path, "key": key}).encode())
        child.stdin.close()
    except OSError as exc:
        _log(f"could not start the warm hook process: {exc}")


def _log(line: str) -> None:
    from evoteam.plugin.hooklog import log

    log(line)


# ---------------------------------------------------------------- the warm process


def _peer_is_us(conn: socket.socket) -> bool:
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:  # no peer credentials here: the 0700 folder is the boundary
        return True
    import struct

    creds = conn.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return uid == os.getuid()


def _read_request(conn: socket.socket, key: str, nonce: bytes) -> dict[str, Any] | None:
    """The request of this connection, if signed with the key for this connection's nonce."""
    chunks, size = [], 0
    while chunk := conn.recv(65536):
        size += len(chunk)
        if size > MAX_REQUEST_BYTES:
            return None
        chunks.append(chunk)
    mac, _, body = b"".join(chunks).partition(b"\n")
    if not hmac.compare_digest(mac, _mac(key, body)):
        return None
    try:
        request = json.loads(body.decode("utf-8", "surrogatepass"))
    except ValueError:
        return None
    # Signed, but for another connection's nonce: a recorded request sent again.
    if not isinstance(request, dict) or request.get("nonce") != nonce.decode():
        return None
    return request


def _serve_one(conn: socket.socket, key: str, hooks: dict) -> None:
    from evoteam.plugin.hookrun import run_hook

    with conn:
        try:
            conn.settimeout(10)
            if not _peer_is_us(conn):
                return
            nonce = os.urandom(_NONCE_BYTES).hex().encode()
            conn.sendall(CHALLENGE + nonce + b"\n")
            request = _read_request(conn, key, nonce)
            if request is None or not isinstance(request.get("input"), str):
                return  # the client sees an empty answer and logs it
            conn.sendall(TAKEN)
            conn.settimeout(None)
            output = run_hook(str(request.get("event") or ""), request["input"], hooks)
            conn.sendall(json.dumps({"output": output}).encode())
        except OSError:
            pass  # the hook went away (Claude Code's timeout): nothing to tell


def _still_ours(path: str, inode: int) -> bool:
    try:
        return os.stat(path).st_ino == inode
    except OSError:
        return False


def serve(path: str, key: str) -> int:
    """Listen on `path` for the hooks of `key` until idle, replaced or removed."""
    import threading

    if environment_key() != key:
        return 2  # started with another environment than the hook's: serve nothing
    # What a hook with an active run imports, once.
    from evoteam.plugin.hooks import HOOKS
    from evoteam.plugin.hookrun import preload

    preload()
    try:
        idle = float(os.environ.get("EVOTEAM_HOOK_WARM_IDLE", DEFAULT_IDLE_S))
    except ValueError:
        idle = DEFAULT_IDLE_S
    # Bind under a private name, then rename over the public one: a concurrent start or a stale
    # file from a dead process is replaced atomically, and the loser notices and leaves.
    tmp = f"{path}.{os.getpid()}"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o077)
    try:
        server.bind(tmp)
        server.listen(64)
        os.replace(tmp, path)
    except OSError:  # nowhere to listen: the hooks go on running in their own processes
        server.close()
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return 2
    finally:
        os.umask(old_umask)
    inode = os.stat(path).st_ino
    server.settimeout(1.0)
    last, served = time.monotonic(), False
    busy: list[threading.Thread] = []

    def take(conn: socket.socket) -> None:
        # Hooks of parallel subagents arrive together, and some wait for a transcript flush.
        thread = threading.Thread(target=_serve_one, args=(conn, key, HOOKS), daemon=True)
        thread.start()
        busy.append(thread)

    try:
        while _still_ours(path, inode):
            busy[:] = [t for t in busy if t.is_alive()]
            if not busy and time.monotonic() - last > (idle if served else min(idle, FIRST_REQUEST_S)):
                break
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            last, served = time.monotonic(), True
            take(conn)
        # Leaving: new hooks must find no socket (they run in-process), and hooks that
        # connected just before are still served.
        if _still_ours(path, inode):
            os.unlink(path)
        server.settimeout(0.2)
        while True:
            try:
                conn, _ = server.accept()
            except (TimeoutError, OSError):
                break
            take(conn)
    finally:
        server.close()
        for thread in busy:
            thread.join(timeout=60)
    return 0


def _handed_over() -> tuple[str, str] | None:
    """The socket path and key that `start` wrote to our stdin, or None."""
    try:
        given = json.loads(sys.stdin.buffer.read(_HANDOVER_MAX))
        return str(given["path"]), str(given["key"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


if __name__ == "__main__":
    handover = _handed_over()
    sys.exit(2 if handover is None else serve(*handover))
