"""The shared area of a timed worker: one call's inputs written in, its outputs read out.

The harness writes a call's inputs (and NaN-filled output slots) into the worker's shared
memory while the worker is stopped, and after the call reads the outputs out of the stopped
process's memory, checking every count, size and type first, and checks that the inputs are
byte-for-byte what it wrote. Nothing here trusts the worker beyond the addresses and sizes it
reports, which are checked.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np

from evoteam.servers.bench.measurement import replies
from evoteam.servers.bench.measurement.workerproc import WorkerFailure, WorkerProc

LABELS = {"float64": np.float64, "float32": np.float32, "float16": np.float16, "bfloat16": np.uint16,
           "int64": np.int64, "int32": np.int32, "int16": np.int16, "int8": np.int8, "uint8": np.uint8,
           "bool": np.bool_}
MAX_OUTPUT_BYTES = 1 << 31


def from_raw(label: str, data: bytes | np.ndarray, shape: list[int]) -> np.ndarray:
    """An array of the given dtype label and shape over raw bytes (bfloat16 widened to float32)."""
    arr = np.frombuffer(data, dtype=LABELS[label]).reshape(shape)
    if label == "bfloat16":  # the top half of a float32
        arr = (arr.astype(np.uint32) << 16).view(np.float32)
    return arr


def _libc_memcmp():
    try:
        fn = ctypes.CDLL(None).memcmp
    except (OSError, AttributeError):
        return None
    fn.argtypes, fn.restype = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t), ctypes.c_int
    return fn


_MEMCMP = _libc_memcmp()


def _same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    """Byte-for-byte equality of two flat, contiguous uint8 arrays: libc's memcmp where there is
    one (one pass, no temporary; a fifth of numpy's time on an 8 MB input), numpy otherwise."""
    if a.nbytes != b.nbytes:
        return False
    if not a.nbytes:
        return True
    if _MEMCMP is not None and a.flags.c_contiguous and b.flags.c_contiguous:
        return _MEMCMP(a.ctypes.data, b.ctypes.data, a.nbytes) == 0
    if a.nbytes % 8 == 0:
        return np.array_equal(a.view(np.uint64), b.view(np.uint64))
    return np.array_equal(a, b)


def align(n: int) -> int:
    return (n + 63) // 64 * 64


@dataclass
class Payload:
    """One call's inputs, made by the trusted worker: raw bytes per array input, scalars."""

    specs: list[dict]
    blobs: dict[str, np.ndarray]  # uint8


def fill(w: WorkerProc, layout: dict, payload: Payload, outputs: bool = True) -> None:
    """Write one call's inputs while the worker is stopped, and with ``outputs`` (a solution in
    destination passing style, which writes into them) NaN-fill the output slots. A solution
    that returns its outputs has no use for the slots: what it returns, wherever it lies, is
    checked against the baseline's for these very inputs, so stale bytes there cannot pass."""
    mm = w.arena_map
    for spec in layout["inputs"]:
        if "offset" in spec:
            mm[spec["offset"]:spec["offset"] + spec["nbytes"]] = payload.blobs[spec["name"]]
    if not outputs:
        return
    for spec in layout["outputs"]:
        fill = w.nan_fill.get(spec["name"])
        if fill is None:
            kind = np.dtype(LABELS.get(spec["dtype"], np.uint8)).kind
            arr = np.full(spec["shape"], np.nan if kind == "f" else 0, dtype=LABELS.get(spec["dtype"], np.uint8))
            if spec["dtype"] == "bfloat16":
                arr = np.full(spec["shape"], 0x7FC0, dtype=np.uint16)
            fill = w.nan_fill[spec["name"]] = arr.tobytes()
        mm[spec["offset"]:spec["offset"] + spec["nbytes"]] = fill


def inputs_unchanged(w: WorkerProc, layout: dict, payload: Payload) -> str | None:
    for spec in layout["inputs"]:
        if "offset" in spec:
            now = np.frombuffer(w.arena_map, np.uint8, spec["nbytes"], spec["offset"])
            if not _same_bytes(now, payload.blobs[spec["name"]]):
                return spec["name"]
    return None


def _read_into(w: WorkerProc, slot, i: int, addr: int, nbytes: int) -> np.ndarray | None:
    """``nbytes`` of the stopped worker's memory at ``addr``, read into the buffer this worker's
    output ``i`` of ``slot`` had last time (made when the size changes). A fresh buffer per call
    would cost page faults on every read of a large output; the caller keeps what it needs of a
    slot only until the slot is read again."""
    if w.jail.mem_fd is None:
        return None
    buf = w.capture_bufs.get((slot, i))
    if buf is None or buf.nbytes != nbytes:
        buf = w.capture_bufs[(slot, i)] = np.empty(nbytes, dtype=np.uint8)
    return buf if w.jail.read_into(buf, addr) else None


def capture(w: WorkerProc, out_names: list[str], read_by_pipe: bool, header: dict, arrays: dict,
            expected: dict | None = None, slot=None) -> tuple[list[dict], dict[str, np.ndarray]]:
    """The outputs the stopped worker reported, read from its memory (or from the reply where
    the harness cannot read memory). Every count, size and type is checked first. With ``slot``
    the outputs are read into buffers kept for that slot (see _read_into): they stay valid
    until the next capture of the same slot on this worker."""
    try:  # every field bounded and typed before any is used (replies.py)
        outs = [o.model_dump() for o in replies.outputs(header.get("outputs"), len(out_names))]
    except replies.BadReply as exc:
        raise w._malformed(str(exc)) from None
    meta, got = [], {}
    for i, (name, o) in enumerate(zip(out_names, outs)):
        if not isinstance(o, dict):
            raise w._malformed(f"output {i} is not described")
        label, shape = o.get("dtype"), o.get("shape")
        if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape) or len(shape) > 16:
            raise w._malformed(f"output {name!r} has no valid shape")
        if label == "python_scalar":
            value = o.get("value")
            if not isinstance(value, (int, float)) or isinstance(value, bool) or shape:
                raise w._malformed(f"output {name!r} is a scalar without a number")
            meta.append({"name": name, "dtype": label, "shape": []})
            got[name] = np.asarray(float(value))
            continue
        if label not in LABELS:
            raise WorkerFailure("INCORRECT_DTYPE", f"output {name!r} has dtype {str(label)[:40]}, which the "
                                "harness does not accept")
        want = (expected or {}).get(name, (None, None))[0]
        if want is not None and tuple(shape) != tuple(want):  # before reading anything
            raise WorkerFailure("INCORRECT_SHAPE", f"output {name!r} has shape {tuple(shape)}, expected "
                                f"{tuple(want)}")
        nbytes, addr = o.get("nbytes"), o.get("addr")
        size = int(np.prod(shape, dtype=np.int64)) * np.dtype(LABELS[label]).itemsize
        if not isinstance(nbytes, int) or nbytes != size or nbytes > MAX_OUTPUT_BYTES:
            raise w._malformed(f"output {name!r} claims {nbytes!r} bytes for shape {shape} of {label}")
        if read_by_pipe:
            blob = arrays.get(f"o{i}")
            data = bytes(blob) if blob is not None else None
        else:
            if not isinstance(addr, int) or addr < 0:
                raise w._malformed(f"output {name!r} has no valid address")
            if not nbytes:
                data = b""
            elif slot is not None:
                data = _read_into(w, slot, i, addr, nbytes)
            else:
                data = w.jail.read_memory(addr, nbytes)
        if data is None or len(data) != nbytes:
            raise w._malformed(f"output {name!r} could not be read ({nbytes} bytes)")
        meta.append({"name": name, "dtype": label, "shape": shape})
        got[name] = from_raw(label, data, shape)
    return meta, got
