"""Issue 23: a 200 MB request on stdio is refused without being held, and the server does not
grow. A real `evoteam serve knowledge` process (behind the fast-start front, and plain), driven
with raw JSON-RPC lines; its memory is read from /proc before and after, with a wide margin."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from evoteam.servers.stdio_lines import MAX_LINE_BYTES
from tests.servers.test_fast_start import Raw

BIG = 200 * 1024 * 1024
# Far above the noise of a Python process (allocator, caches, a thread stack), far below what
# holding the request once would cost.
MARGIN = 64 * 1024 * 1024


def _memory(pid: int) -> dict[str, int]:
    """Resident (VmRSS) and peak resident (VmHWM) bytes of a process."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            out[name] = int(value.split()[0]) * 1024
    return out


def _send_bytes(raw: Raw, data: bytes) -> None:
    view = memoryview(data)
    for start in range(0, len(view), 1 << 20):
        raw.process.stdin.write(view[start:start + (1 << 20)])
    raw.process.stdin.flush()


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads memory from /proc (Linux)")
@pytest.mark.parametrize("fast", ["1", "0"])
def test_a_200_mb_request_is_refused_without_being_held(tmp_path: Path, fast: str):
    raw = Raw("knowledge", tmp_path, EVOTEAM_FAST_START=fast)
    try:
        raw.handshake()
        raw.send({"jsonrpc": "2.0", "id": "warm-up", "method": "tools/call",
                  "params": {"name": "list_runs", "arguments": {}}})
        assert "result" in raw.receive()  # the real server is up and has served a call
        before = _memory(raw.process.pid)

        # The Python SDK's order (id first), then the TypeScript SDK's (id last).
        head = b'{"jsonrpc":"2.0","id":"big-1","method":"tools/call","params":{"name":"start_run","arguments":{"goal":"'
        _send_bytes(raw, head + b"x" * BIG + b'"}}}\n')
        first = raw.receive()
        tail = b'"}}},"jsonrpc":"2.0","id":"big-2"}\n'
        _send_bytes(raw, b'{"method":"tools/call","params":{"name":"start_run","arguments":{"goal":"'
                    + b"y" * (MAX_LINE_BYTES + 1) + tail)
        second = raw.receive()
        after = _memory(raw.process.pid)

        assert after["VmRSS"] - before["VmRSS"] < MARGIN, (before, after)
        assert after["VmHWM"] - before["VmRSS"] < MARGIN, (before, after)  # it never held the request
        for answer, request_id in ((first, "big-1"), (second, "big-2")):
            assert answer["id"] == request_id, answer
            assert "over this server's limit" in answer["error"]["message"], answer
        # Nothing was stored, and the session goes on.
        raw.send({"jsonrpc": "2.0", "id": "after", "method": "tools/call",
                  "params": {"name": "list_runs", "arguments": {}}})
        listed = raw.receive()
        assert listed["id"] == "after" and listed["result"]["structuredContent"]["total"] == 0, listed
    finally:
        raw.close(30)
    assert os.path.exists(tmp_path / "kb.db")


def _read_all(data: bytes, limit: int, chunk: int) -> list[bytes]:
    import json
    import threading

    from evoteam.servers.stdio_lines import bounded_lines

    r, w = os.pipe()

    def write() -> None:
        with os.fdopen(w, "wb") as out:
            out.write(data)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        lines = [bytes(line) for line in bounded_lines(r, limit=limit, chunk=chunk)]
    finally:
        writer.join()
        os.close(r)
    return [json.loads(line) if b"evoteam_oversized" in line else line for line in lines]


@pytest.mark.parametrize("chunk", [1, 7, 64, 1 << 16])
def test_lines_over_the_limit_are_replaced_and_the_others_pass_whole(chunk: int):
    small = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
    first_id = b'{"jsonrpc":"2.0","id":"a","params":{"x":"' + b"z" * 300 + b'"}}'
    last_id = b'{"params":{"x":"' + b"z" * 300 + b'","id":9}},"jsonrpc":"2.0","id":42}'
    nested_last = b'{"params":{"x":"' + b"z" * 300 + b'","id":9}}}'
    data = b"\n".join([small, first_id, small, last_id, nested_last, small]) + b"\n" + b"q" * 500
    got = _read_all(data, limit=200, chunk=chunk)
    assert got[0] == got[2] == got[5] == small + b"\n"
    assert got[1] == {"id": "a", "evoteam_oversized_bytes": len(first_id)}
    assert got[3] == {"id": 42, "evoteam_oversized_bytes": len(last_id)}
    assert got[4] == {"id": None, "evoteam_oversized_bytes": len(nested_last)}  # 9 is not the request's id
    assert got[6] == {"id": None, "evoteam_oversized_bytes": 500}  # a last line without a newline
    assert len(got) == 7
