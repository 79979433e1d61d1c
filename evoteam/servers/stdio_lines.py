"""A client's lines on stdio, each bounded in size before it is held in memory.

The MCP SDK's stdio transport reads a whole line, however long, before it looks at it: a 200 MB
request was read, joined, decoded and parsed (and then refused by the argument bounds), and the
server kept about a gigabyte resident afterwards. Here a line is gathered only up to
``MAX_LINE_BYTES``; past that, the rest of it is read and dropped in fixed-size chunks, and in
its place comes one short line, ``oversized_line``, which the server answers with a JSON-RPC
error carrying the request's id (servers/guard.py). Both stdio paths read the client through
this: the fast-start front (servers/front.py) and the plain server (guard's stdin stream).

Standard library only: the front imports this before the MCP SDK.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator

# A tool's string arguments are capped at 8 Mi characters (servers/arguments.py) and artifacts
# at 4 MiB; twice the larger leaves room for JSON escapes. Nothing evoteam takes needs more in
# one message (and the warm hook process takes the same at most).
MAX_LINE_BYTES = 16 * 1024 * 1024
# The head and tail of an oversized line are kept to recover its id: the Python SDK writes it
# second (after "jsonrpc"), the TypeScript SDK (Claude Code) last, other clients anywhere
# before or after the large member.
_KEEP = 64 * 1024
OVERSIZED_KEY = "evoteam_oversized_bytes"

# The id among the last members of the line: `"id": <id>` followed only by scalar members (any
# order a client writes them in) and the object's closing brace. A nested object's "id" is
# followed by at least two closing braces, so it never matches.
_SCALAR = rb'(?:"(?:[^"\\\n]|\\.){0,200}"|-?\d{1,18}(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null)'
_TAIL_ID = re.compile(rb',\s*"id"\s*:\s*(-?\d{1,18}|"(?:[^"\\\n]|\\.){0,200}")\s*'
                      rb'(?:,\s*"(?:[^"\\\n]|\\.){1,64}"\s*:\s*' + _SCALAR + rb'\s*){0,8}\}\s*$')
_MEMBER_KEY = re.compile(r'"((?:[^"\\\n]|\\.){1,64})"\s*:\s*')
_COMMA = re.compile(r'\s*,\s*')


def bounded_lines(fd: int, limit: int = MAX_LINE_BYTES, chunk: int = 1 << 16) -> Iterator[bytearray | bytes]:
    """The lines read from `fd`, each with its newline (a last line without one gets one); a
    line over `limit` bytes is never held whole: `oversized_line` stands in for it.

    A line is gathered in one growing buffer rather than a list of chunks: a large buffer is
    its own mapping, which goes back to the system when the line is done with, where thousands
    of chunk-sized objects would leave the heap fragmented and the process resident."""
    buf = bytearray()
    size = 0
    dropping = False  # inside an oversized line: only its head, tail and length are kept
    head = tail = b""
    while True:
        try:
            data = os.read(fd, chunk)
        except InterruptedError:
            continue
        except OSError:
            data = b""
        if not data:
            if dropping:
                yield oversized_line(head, tail, size)
            elif buf:
                yield buf + b"\n"
            return
        # Walked with an index: cutting the rest off after each line copied it again, so a chunk
        # of blank lines cost the square of its length (a client's 1 MiB of newlines: 0.6 s).
        at = 0
        while at < len(data):
            cut = data.find(b"\n", at)
            piece = data[at:] if cut < 0 else data[at:cut]
            at = len(data) if cut < 0 else cut + 1
            size += len(piece)
            if dropping:
                tail = (tail + piece)[-_KEEP:]
            elif size > limit:
                dropping = True
                head, tail = (bytes(buf[:_KEEP]) + piece)[:_KEEP], (bytes(buf[-_KEEP:]) + piece)[-_KEEP:]
                buf = bytearray()
            else:
                buf += piece
            if cut < 0:
                break
            if dropping:
                yield oversized_line(head, tail, size)
            else:
                buf += b"\n"
                yield buf  # the caller's from here on
            buf, size, dropping, head, tail = bytearray(), 0, False, b"", b""


def oversized_line(head: bytes, tail: bytes, size: int) -> bytes:
    """The short line that stands for a line of `size` bytes: JSON, not a JSON-RPC message,
    with the request's id where the head or tail tells it."""
    return json.dumps({"id": _request_id(head, tail), OVERSIZED_KEY: size}).encode() + b"\n"


def _request_id(head: bytes, tail: bytes) -> int | str | None:
    """The request's id, from the members the head holds whole (in whatever order the client
    wrote them) or from the tail's last members."""
    found = _head_id(head)
    if found is None:
        match = _TAIL_ID.search(tail)
        if match is None:
            return None
        try:
            found = json.loads(match.group(1))
        except ValueError:
            return None
    # JSON true is an int to Python, and the ids a JSON-RPC client sends are strings or integers.
    return found if isinstance(found, int | str) and not isinstance(found, bool) else None


def _head_id(head: bytes) -> int | str | None:
    """The id among the top-level members that lie whole in the head, read one by one until the
    one that runs past the head (the oversized one), or None."""
    text = head.decode("utf-8", "ignore")
    start = re.match(r"\s*\{\s*", text)
    if start is None:
        return None
    decoder, pos = json.JSONDecoder(), start.end()
    for _ in range(64):  # a request has a handful of members; past that it is not one
        key = _MEMBER_KEY.match(text, pos)
        if key is None:
            return None
        try:
            value, pos = decoder.raw_decode(text, key.end())
            name = json.loads(f'"{key.group(1)}"')
        except (ValueError, RecursionError):  # the oversized member, or nesting too deep to read
            return None
        if name == "id":
            return value if isinstance(value, str) or (isinstance(value, int) and abs(value) < 2 ** 63) else None
        comma = _COMMA.match(text, pos)
        if comma is None:
            return None
        pos = comma.end()
    return None


def oversized_message(size: int, limit: int = MAX_LINE_BYTES) -> str:
    """What the client is told about a message over the limit."""
    return (f"Invalid request: the message is {size:,} bytes, over this server's limit of {limit:,}; "
            f"pass large content as a file path or in parts")
