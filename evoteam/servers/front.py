"""The fast-start front of the stdio servers: the client's tools are listed before `mcp` is imported.

Importing the MCP SDK takes most of a server's start (its protocol types are pydantic models
built at import). A client, though, first only asks `initialize` and `tools/list`, whose answers
depend on nothing but the code, its environment and the client's `initialize` parameters. So
`evoteam serve <server>` over stdio runs this front, which imports only the standard library:

- it owns the process's stdin and stdout for the whole session (fd 0 and fd 1 are pointed at
  the null device and at stderr, as the SDK's own transport does, so that children and stray
  prints miss the wire);
- in a background thread it starts the real server (`EvoServer`, unchanged) on a pair of
  in-process pipes;
- when a *manifest* (the answers the real server gave earlier under the same key, see
  `manifest_key`) is cached, it answers `initialize`, `tools/list` and `ping` from it at once;
  every other message waits, in order, for the real server;
- it replays the client's `initialize` into the real server and swallows that reply, sends a
  `tools/list` of its own under an id no client uses, and compares both answers with the
  manifest: a difference rewrites the manifest (one line on stderr); the client already holds
  the list, and a call to a tool that is gone gets the real server's error;
- on a cache miss it answers nothing itself: it forwards, and records the real answers.

Everything else goes through as bytes, both ways, in order: the real server still answers the
lines it cannot read (evoteam/servers/guard.py). `EVOTEAM_FAST_START=0` runs the plain path.
The front never runs anything read from a manifest; it only echoes JSON from it.
"""

from __future__ import annotations

import json
import os
import queue
import sys
import threading
import uuid
from typing import Any

from evoteam.servers.manifest import (
    FIRST_METHODS,
    base_key,
    load_manifest,
    manifest_dir,
    manifest_key,
    save_manifest,
)
from evoteam.servers.stdio_lines import bounded_lines

# A client line longer than this is never one of the few messages the front answers itself;
# it is forwarded without being parsed.
MAX_PARSED_LINE = 64 * 1024
# How long a session whose stdin closed still waits for the real server's answer to the
# front's own tools/list (the answer that records or verifies the manifest).
SETTLE_AT_EXIT_S = 5.0


def _parse(line: bytes, limit: int | None = MAX_PARSED_LINE) -> dict | None:
    """The JSON object on a line, or None (not JSON, too deep, longer than `limit`, not an object)."""
    if limit is not None and len(line) > limit:
        return None
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _request_method(msg: dict | None) -> str | None:
    """The method of a request (a message with a usable id), else None."""
    if msg is None or not isinstance(msg.get("method"), str) or "id" not in msg:
        return None
    request_id = msg["id"]
    return msg["method"] if isinstance(request_id, int | str) and not isinstance(request_id, bool) else None


def _first_page(params: Any) -> bool:
    """tools/list params without a cursor (the only page a manifest holds)."""
    return params is None or (isinstance(params, dict) and "cursor" not in params)


def _answers_first(msg: dict) -> bool:
    result = msg.get("result")
    return "error" in msg or (isinstance(result, dict) and "capabilities" in result)


def _log(text: str) -> None:
    _log_line(f"evoteam {text}")


def _log_line(text: str) -> None:
    """One line on stderr, written at once (threads share it)."""
    try:
        os.write(2, f"{text}\n".encode("utf-8", "replace"))
    except OSError:
        pass


class Front:
    """One stdio session: the client on `wire_in`/`wire_out`, the real server on pipes."""

    def __init__(self, server: str, options: dict[str, Any], wire_in: int, wire_out: int):
        self.server, self.options = server, options
        self.wire_in, self.wire_out = wire_in, wire_out
        self.folder = manifest_dir()
        self.base = base_key(server, options)
        self.key: str | None = None
        self.manifest: dict | None = None
        self.first_method: str | None = None
        self.to_server_r, self.to_server_w = os.pipe()
        self.from_server_r, self.from_server_w = os.pipe()
        self.outbox: queue.Queue[bytes | None] = queue.Queue()
        self.out_lock = threading.Lock()
        self.expect_lock = threading.Lock()
        # reply id -> (what, swallow): the real server's replies the front records ("first",
        # "tools"), and whether the client must not see them (it was answered already)
        self.expected: dict[Any, tuple[str, bool]] = {}
        self.recorded: dict[str, Any] = {}
        self.internal_id = f"evoteam-front-{uuid.uuid4().hex}"
        self.first = True
        self.tools_seen = False
        self.ready = threading.Event()  # the real server has answered the opening request
        self.settled = threading.Event()  # the front's recorded replies are in (or will not come)
        self.exit_code = 0

    # -- client -> server

    def read_client(self) -> None:
        """Read the client's lines until stdin closes, then close the real server's input."""
        try:
            # A client's line is bounded before it is held (stdio_lines.py); the server's are not.
            for line in bounded_lines(self.wire_in):
                try:
                    self.on_client_line(line)
                except Exception as exc:  # the front's own fault: forward the line as is
                    _log(f"fast start: {type(exc).__name__}: {exc}; forwarding")
                    self.outbox.put(line)
        finally:
            # A client that leaves at once (lists, then closes stdin) would take the real
            # server's answer to tools/list with it: wait a little for it, to record or verify.
            if self.tools_seen and self.key is not None:
                self.settled.wait(SETTLE_AT_EXIT_S)
            self.outbox.put(None)

    def on_client_line(self, line: bytes) -> None:
        msg = _parse(line) if self.reading() else None
        method = _request_method(msg)
        if self.first:
            self.first = False
            if method in FIRST_METHODS:
                self.on_first(msg)
            self.outbox.put(line)
            return
        if method == "tools/list" and not self.tools_seen and self.key is not None:
            self.tools_seen = True
            if _first_page(msg.get("params")):
                return self.on_tools_list(msg, line)
        if method == "ping" and self.manifest is not None and self.first_method == "initialize" \
                and not self.ready.is_set():
            return self.reply(msg["id"], {})
        self.outbox.put(line)

    def reading(self) -> bool:
        """Whether the front still looks into the client's lines: for the opening request, the
        first tools/list, and the pings it answers while the real server starts."""
        if self.first:
            return True
        if self.key is None:
            return False  # a session the front does not cache: bytes pass unread
        return not self.tools_seen or (self.manifest is not None and not self.ready.is_set())

    def on_first(self, msg: dict) -> None:
        """The opening request (`initialize`, or `server/discover` of the stateless protocol):
        its method and parameters complete the key; a cached manifest answers it at once."""
        self.first_method = msg["method"]
        try:
            self.key = manifest_key(self.base, [msg["method"], msg.get("params")])
        except (TypeError, ValueError):
            return
        manifest = load_manifest(self.folder, self.server, self.key)
        if manifest is not None and manifest["first"]["method"] == msg["method"]:
            self.manifest = manifest
            self.reply(msg["id"], manifest["first"]["result"])
        with self.expect_lock:
            self.expected[msg["id"]] = ("first", self.manifest is not None)

    def on_tools_list(self, msg: dict, line: bytes) -> None:
        """The client's first tools/list: from the manifest while the real server is starting
        (then the same request, under the front's own id, verifies it), else forwarded and
        its answer recorded."""
        params = msg.get("params")
        if self.manifest is not None and not self.ready.is_set() and self.manifest["tools"]["params"] == params:
            self.reply(msg["id"], self.manifest["tools"]["result"])
            with self.expect_lock:
                self.expected[self.internal_id] = ("tools", True)
            self.recorded["tools_params"] = params
            self.outbox.put(json.dumps({**msg, "id": self.internal_id}).encode() + b"\n")
            return
        with self.expect_lock:
            self.expected[msg["id"]] = ("tools", False)
        self.recorded["tools_params"] = params
        self.outbox.put(line)

    def reply(self, request_id: Any, result: dict) -> None:
        # ASCII escapes: any string read back from a manifest is written, even a lone surrogate.
        self.write_client(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result},
                                     separators=(",", ":")).encode() + b"\n")

    def write_server(self) -> None:
        """Feed the real server in order; the queue keeps the reader from ever blocking."""
        try:
            while (item := self.outbox.get()) is not None:
                _write_all(self.to_server_w, item)
        except OSError:
            pass  # the server is gone; its end of the session is handled by pump_server
        finally:
            os.close(self.to_server_w)

    # -- server -> client

    def pump_server(self) -> None:
        """Forward the server's lines to the client, taking out the replies the front asked for."""
        try:
            self._pump()
        finally:
            self.settled.set()
            os.close(self.from_server_r)

    def _pump(self) -> None:
        for line in _lines(self.from_server_r):
            if self.expected:
                # The server's own output, however long: a tools/list reply can be big.
                msg = _parse(line, limit=None)
                if msg is not None and ("result" in msg or "error" in msg):
                    with self.expect_lock:
                        what, swallow = self.expected.get(msg.get("id"), (None, False))
                        if what == "first" and not _answers_first(msg):
                            what = None  # a reply to a later request that reuses the id
                        if what is not None:
                            del self.expected[msg.get("id")]
                    if what is not None:
                        self.on_recorded_reply(what, msg)
                        if swallow:
                            continue
            self.write_client(line)

    def on_recorded_reply(self, what: str, msg: dict) -> None:
        if what == "first":
            self.ready.set()
        result = msg.get("result")
        if not isinstance(result, dict):
            self.key = None  # an error is nothing to cache
            self.settled.set()
            return
        self.recorded[what] = result
        if "first" in self.recorded and "tools" in self.recorded:
            try:
                if self.key is not None:
                    self.settle()
            finally:
                self.settled.set()

    def settle(self) -> None:
        """Record the real answers, or compare them with the manifest and rewrite it if stale."""
        first = {"method": self.first_method, "result": self.recorded["first"]}
        tools = {"params": self.recorded["tools_params"], "result": self.recorded["tools"]}
        if "nextCursor" in tools["result"]:
            return
        if self.manifest is not None and self.manifest["first"] == first and self.manifest["tools"] == tools:
            return
        try:
            save_manifest(self.folder, self.server, self.key, first, tools)
        except OSError as exc:
            _log(f"fast start: cannot write the manifest in {self.folder}: {exc}")
            return
        if self.manifest is not None:
            _log(f"fast start: the {self.server} server's answers differ from its cached manifest; "
                 f"the cache is rewritten (this session's client got the old list)")

    def write_client(self, data: bytes) -> None:
        with self.out_lock:
            try:
                _write_all(self.wire_out, data)
            except OSError:
                pass  # the client is gone; stdin's end closes the session

    # -- the real server

    def run_server(self) -> None:
        """Import and run the real server on the pipes (in its own thread)."""
        try:
            from evoteam.config import ConfigError, load_settings
            from evoteam.servers import guard

            try:
                settings = load_settings()
            except ConfigError as exc:  # said as the plain path's click error says it
                _log_line(f"Error: {exc}")
                self.exit_code = 1
                return
            if self.options.get("knowledge_url"):
                settings.knowledge_url = self.options["knowledge_url"]
            guard.speak_on(self.to_server_r, self.from_server_w)
            from evoteam.servers.stdio import serve_stdio

            serve_stdio(self.server, settings)
        except BaseException as exc:  # reported in one line: the client sees the session end
            from evoteam.errors import first_leaf

            leaf = first_leaf(exc)  # the cause, not anyio's "unhandled errors in a TaskGroup"
            if type(leaf).__name__ in ("StoreFailure", "Invalid", "Unavailable", "Forbidden", "DomainError"):
                _log_line(f"Error: {leaf}")  # a store that cannot open says what to do, as the CLI does
            else:
                _log(f"serve {self.server} stopped: {type(leaf).__name__}: {leaf}")
            self.exit_code = 1
        finally:
            os.close(self.from_server_w)
            os.close(self.to_server_r)


def _lines(fd: int, chunk: int = 1 << 16):
    """The lines read from `fd`, each with its newline (a last line without one gets one).
    A long line is gathered in parts, joined once."""
    parts: list[bytes] = []
    while True:
        try:
            data = os.read(fd, chunk)
        except InterruptedError:
            continue
        except OSError:
            data = b""
        if not data:
            if parts:
                yield b"".join(parts) + b"\n"
            return
        if b"\n" not in data:
            parts.append(data)
            continue
        head, *middle, tail = data.split(b"\n")
        yield b"".join([*parts, head, b"\n"])
        for line in middle:
            yield line + b"\n"
        parts = [tail] if tail else []


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _take_wire() -> tuple[int, int]:
    """Keep private copies of stdin and stdout for the session and point fd 0 at the null
    device and fd 1 at stderr, as the SDK's stdio transport does: a child process or a stray
    print then never reads the client's messages or corrupts the server's."""
    import fcntl

    wire_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    wire_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    return wire_in, wire_out


def serve(server: str, options: dict[str, Any]) -> int | None:
    """Run `server` over stdio behind the front; the exit status, or None when the front could
    not be set up and the caller should run the plain path (nothing has been read yet then)."""
    try:
        if sys.platform == "win32":
            return None
        wire_in, wire_out = _take_wire()
    except (OSError, ImportError):
        return None
    try:
        front = Front(server, options, wire_in, wire_out)
    except Exception as exc:  # nothing read yet: hand the wire back for the plain path
        _log(f"fast start unavailable ({type(exc).__name__}: {exc}); starting the plain server")
        os.dup2(wire_in, 0)
        os.dup2(wire_out, 1)
        return None
    server = threading.Thread(target=front.run_server, name="evoteam-server", daemon=True)
    pump = threading.Thread(target=front.pump_server, name="evoteam-front-pump", daemon=True)
    writer = threading.Thread(target=front.write_server, name="evoteam-front-writer", daemon=True)
    reader = threading.Thread(target=front.read_client, name="evoteam-front-reader", daemon=True)
    for thread in (reader, writer, server, pump):
        thread.start()
    try:
        server.join()
        pump.join()
        if not reader.is_alive():  # the usual end: stdin closed, so the writer has stopped too
            reader.join()
            writer.join()
    except KeyboardInterrupt:
        return 130
    # Otherwise the server ended while the client still talks: the process exits under the
    # reader and the writer (daemon threads waiting on stdin and on the reader).
    return front.exit_code
