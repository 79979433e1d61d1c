"""``run_program``: a program kit's evaluator runs the candidate program in a confined worker.

Kit evaluators import this module (``from evoteam.servers.bench.measurement.program import
ProgramFailure, run_program``). Outside the bench it starts a program worker through the harness;
inside a kit evaluator, which the harness already confined, it asks the harness over two pipes
(``protocol.SERVICE_VAR``) to run the program in a worker of the same kind as a candidate's.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import Any

from evoteam.servers.bench.measurement import protocol
from evoteam.servers.bench.measurement.protocol import SERVICE_VAR


class ProgramFailure(Exception):
    """A program kit's candidate failed; ``status`` is one of the harness statuses."""

    def __init__(self, status: str, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


def run_program(program_path: str | os.PathLike, function: str = "run", kwargs: dict | None = None,
                timeout_s: float | None = None, memory_mb: int | None = None) -> Any:
    """Run ``function(**kwargs)`` from the candidate program at ``program_path`` in a confined
    worker process and return its result (numbers, strings, lists, dicts and numpy arrays).

    Raises ProgramFailure with status COMPILE_ERROR (the program does not import or lacks the
    function), RUNTIME_ERROR (it raised, crashed or broke the sandbox) or TIMEOUT.
    Limits default to the kit's, which the harness passes to the evaluator's process.
    """
    from evoteam.servers.bench.measurement.harness import WorkerFailure, run_program_worker

    timeout_s = timeout_s or float(os.environ.get("EVOTEAM_BENCH_PROGRAM_TIMEOUT", "120"))
    memory_mb = memory_mb or int(os.environ.get("EVOTEAM_BENCH_MEMORY_MB", "4096"))
    sys.audit("evoteam.program_ran")  # from here on, what the evaluator compiles may be the program's output
    if os.environ.get(SERVICE_VAR):
        return _run_program_by_the_harness(program_path, function, kwargs or {}, timeout_s, memory_mb)
    deny = [p for p in os.environ.get("EVOTEAM_BENCH_DENY", "").split(os.pathsep) if p]
    try:
        return run_program_worker(Path(program_path), function, kwargs or {}, timeout_s, memory_mb, deny)
    except WorkerFailure as exc:
        raise ProgramFailure(exc.status, exc.message) from None


# ---------------------------------------------------------------- inside a kit evaluator

# A kit's evaluator runs confined itself, so it cannot start and jail a program worker of its
# own (namespaces, identities and cgroups are the harness's). Inside an evaluator, run_program
# reads the program (as the evaluator, under its confinement) and asks the harness, over two
# pipes the harness passed, to run that source in a worker of the same kind as a candidate's.
_service_lock = threading.Lock()
_service_reader: dict[int, Any] = {}


def _run_program_by_the_harness(program_path: str | os.PathLike, function: str, kwargs: dict,
                                timeout_s: float, memory_mb: int) -> Any:
    import numpy as np

    from evoteam.servers.bench.measurement.harness import decode_value

    request_fd, reply_fd = (int(x) for x in os.environ[SERVICE_VAR].split(","))
    try:
        with open(program_path, "rb") as fh:  # as the evaluator: its confinement decides
            source = fh.read(32 << 20)
    except OSError as exc:
        raise ProgramFailure("RUNTIME_ERROR", f"cannot read the program {os.fspath(program_path)!r}: {exc}") from None
    with _service_lock:
        protocol.write_frame(request_fd, {"cmd": "run_program", "function": function, "kwargs": kwargs,
                                          "timeout_s": timeout_s, "memory_mb": memory_mb},
                             {"source": np.frombuffer(source, dtype=np.uint8)})
        reader = _service_reader.get(reply_fd)
        if reader is None:  # one reader per pipe: it may hold bytes read ahead
            reader = _service_reader[reply_fd] = protocol.FrameReader(reply_fd)
        header, arrays = reader.read()
    if header.get("ok") is not True:
        raise ProgramFailure(str(header.get("status") or "RUNTIME_ERROR"), str(header.get("message") or "failed"))
    return decode_value(header.get("result"), arrays)
