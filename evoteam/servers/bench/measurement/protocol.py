"""Messages between the harness and its worker processes.

A frame is a JSON header plus raw array blobs. Nothing is pickled: the harness reads frames from
processes running untrusted code, and unpickling their bytes would run their code in the harness.
Array blobs carry only plain numeric dtypes; the reader checks sizes before it allocates.

Layout: ``u32 header_len | header JSON | for each blob: u64 len | bytes``. The header's
``"blobs"`` list names each blob: ``{"key": str, "dtype": str, "shape": [int, ...]}``.
"""

from __future__ import annotations

import json
import math
import os
import select
import struct
import time
from collections.abc import Callable
from typing import Any

import numpy as np

MAX_HEADER = 4 * 1024 * 1024
ALLOWED_DTYPES = {"float64", "float32", "float16", "int64", "int32", "int16", "int8", "uint8", "bool"}
# The environment variable that hands a confined kit evaluator the two pipe ends ("request,reply")
# over which it asks the harness to run a program (measurement/program.py); set by the harness.
SERVICE_VAR = "EVOTEAM_BENCH_SERVICE"


class ProtocolError(Exception):
    """The other side sent something that is not a valid frame."""


# A deadline on time.monotonic(): a fixed one, none, or one that may move (owntime.py)
Deadline = float | Callable[[], float] | None


class PeerTimeout(Exception):
    """The other side did not answer in time."""


class PeerClosed(Exception):
    """The other side closed its end (usually: it died)."""


def encode(header: dict[str, Any], arrays: dict[str, np.ndarray] | None = None) -> bytes:
    blobs = []
    chunks = []
    for key, arr in (arrays or {}).items():
        arr = np.ascontiguousarray(arr)
        if arr.dtype.name not in ALLOWED_DTYPES:
            raise ProtocolError(f"dtype {arr.dtype.name} cannot be sent")
        blobs.append({"key": key, "dtype": arr.dtype.name, "shape": list(arr.shape)})
        data = arr.tobytes()
        chunks.append(struct.pack("<Q", len(data)) + data)
    header = dict(header, blobs=blobs)
    raw = json.dumps(header, allow_nan=True).encode()
    return struct.pack("<I", len(raw)) + raw + b"".join(chunks)


def write_frame(fd: int, header: dict[str, Any], arrays: dict[str, np.ndarray] | None = None,
                deadline: Deadline = None) -> None:
    write_all(fd, encode(header, arrays), deadline)


def _time_left(deadline: Deadline) -> float | None:
    """Seconds to the deadline now (None: no deadline)."""
    limit = deadline() if callable(deadline) else deadline
    return None if limit is None else max(0.0, limit - time.monotonic())


def _moved_on(deadline: Deadline) -> bool:
    """Whether a deadline just reached has moved further out (owntime.py): wait on, then."""
    return callable(deadline) and deadline() > time.monotonic()


def wait_ready(fd: int, writable: bool, timeout: float | None) -> bool:
    """Whether ``fd`` became readable (or writable, or hung up) within ``timeout`` seconds (None:
    no limit). poll, not select: select refuses descriptors past 1,023, which a busy server
    reaches."""
    poller = select.poll()
    poller.register(fd, (select.POLLOUT if writable else select.POLLIN) | select.POLLERR | select.POLLHUP)
    ms = -1 if timeout is None else math.ceil(max(0.0, timeout) * 1000)
    return bool(poller.poll(ms))


def write_all(fd: int, data: bytes | memoryview, deadline: Deadline = None) -> None:
    """All of ``data`` to ``fd`` by ``deadline`` (as FrameReader.read takes it). On a
    non-blocking descriptor a reader that stops reading costs PeerTimeout, never a writer blocked
    for good (a stopped or hostile worker leaves its pipe full)."""
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except BlockingIOError:
            n = 0
        view = view[n:]
        if not view or n:
            continue
        if not wait_ready(fd, True, _time_left(deadline)) and not _moved_on(deadline):
            raise PeerTimeout()


def _blobs(value: Any) -> list:
    """The header's blob descriptors, checked (replies.py). Imported here, when a frame carries
    arrays: a worker, which only ever gets frames without, then starts without pydantic."""
    from evoteam.servers.bench.measurement import replies

    try:
        return replies.blobs(value)
    except replies.BadReply as exc:
        raise ProtocolError(str(exc)) from None


class FrameReader:
    """Reads frames from a file descriptor with a deadline, never trusting sizes blindly."""

    def __init__(self, fd: int, max_bytes: int = 1 << 31):
        self.fd = fd
        self.max_bytes = max_bytes
        self.buf = bytearray()
        self.spin_until = 0.0

    def _fill(self, n: int, deadline: Deadline) -> None:
        while len(self.buf) < n:
            timeout = _time_left(deadline)
            ready = self._spin() if self.spin_until else None
            if not ready:
                ready = wait_ready(self.fd, False, timeout)
            if not ready:
                if _moved_on(deadline):
                    continue
                raise PeerTimeout()
            try:
                chunk = os.read(self.fd, max(1 << 16, min(n - len(self.buf), 1 << 24)))
            except BlockingIOError:  # readable a moment ago, not now: wait again, by the deadline
                continue
            if not chunk:
                raise PeerClosed()
            self.buf += chunk

    def _spin(self) -> bool:
        """Poll without sleeping until data comes or ``spin_until`` (perf_counter) passes. A
        thread asleep for a millisecond wakes up tens of microseconds later than one that waited
        a few (its CPU has gone idle; in a VM, halted), which a timed call would pay and an empty
        call would not."""
        poller = select.poll()
        poller.register(self.fd, select.POLLIN | select.POLLERR | select.POLLHUP)
        while time.perf_counter() < self.spin_until:
            if poller.poll(0):
                return True
        return False

    def _take(self, n: int, deadline: Deadline) -> bytes:
        self._fill(n, deadline)
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def read(self, deadline: Deadline = None,
             spin_s: float = 0.0) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The next frame, by ``deadline`` (time.monotonic; a callable is asked again when
        reached, and waiting goes on while it has moved). With ``spin_s`` the first that many
        seconds of the wait poll instead of sleeping (see _spin)."""
        self.spin_until = time.perf_counter() + spin_s if spin_s > 0 else 0.0
        try:
            return self._read(deadline)
        finally:
            self.spin_until = 0.0

    def _read(self, deadline: Deadline) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        (hlen,) = struct.unpack("<I", self._take(4, deadline))
        if hlen > MAX_HEADER:
            raise ProtocolError(f"header of {hlen} bytes is too large")
        try:
            header = json.loads(self._take(hlen, deadline))
        except (ValueError, RecursionError) as exc:  # RecursionError: JSON nested too deeply
            raise ProtocolError(f"bad header: {str(exc)[:200]}") from None
        if not isinstance(header, dict):
            raise ProtocolError("header is not an object")
        raw = header.get("blobs")
        descriptors = [] if raw is None or (isinstance(raw, list) and not raw) else _blobs(raw)
        arrays: dict[str, np.ndarray] = {}
        total = 0
        for blob in descriptors:
            key, dtype, shape = blob.key, blob.dtype, blob.shape
            (blen,) = struct.unpack("<Q", self._take(8, deadline))
            expected = blob.elements() * np.dtype(dtype).itemsize
            total += blen
            if blen != expected or total > self.max_bytes:
                raise ProtocolError(f"blob {key!r} has {blen} bytes, expected {expected} (limit {self.max_bytes})")
            arrays[key] = np.frombuffer(self._take(blen, deadline), dtype=dtype).reshape(shape)
        return header, arrays
