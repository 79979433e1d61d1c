"""The trusted worker kept between the evaluations of one process.

Every kernel evaluation needs a trusted worker (the kit's input generator and reference; never
confined, never timed, never given candidate code). Starting one is an interpreter start and a
numpy import: a third of an evaluation's start on the CPU kits. It runs only kit code, so one
evaluation's trusted worker can serve the next evaluation of the same kit in the same process:
``lease`` hands out an idle one whose kit code, environment and memory cap are identical (the
key is all of them), or starts a new one; ``Lease.release`` gives it back when it served its
evaluation without a failure, and kills it otherwise.

What keeps this sound: a lease is exclusive (two evaluations never share a worker); a worker is
idle only while stopped and frozen, like every worker between requests; an idle worker is
answered once (an empty staging request) before it is handed out, so a worker that died while
idle is replaced, not used; at most ``MAX_IDLE`` wait, none longer than ``IDLE_S``; all are killed
when the process exits. Only CPU kits pool: an idle GPU worker would hold device memory that
other evaluations on that GPU need.

Workers are started from one long-lived thread of this module: a worker dies with the thread
that started it (PR_SET_PDEATHSIG is per thread), and an evaluation's own thread may end before
the next evaluation comes.
"""

from __future__ import annotations

import atexit
import fcntl
import hashlib
import json
import os
import sys
import termios
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from evoteam.servers.bench.confinement import scratch
from evoteam.servers.bench.measurement.workerproc import WorkerFailure, WorkerProc

MAX_IDLE = 2  # idle trusted workers kept per process (the most recent kits)
IDLE_S = 300.0  # an idle worker older than this is killed
MAX_USES = 100  # evaluations one worker serves before it is replaced (its output cap is per worker)

_lock = threading.Lock()
_idle: dict[str, list[tuple[float, Lease]]] = {}
_spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="evoteam-trusted-start")
_timer: threading.Timer | None = None
started = 0  # trusted workers started by this process (tests count them)


@dataclass
class Lease:
    """One trusted worker, its staging area (a memfd only it and the harness map) and folder."""

    key: str
    worker: WorkerProc
    staging_fd: int
    folder: Path
    poolable: bool
    reused: bool = False
    healthy: bool = True  # cleared by the session when a request to it failed
    uses: int = 1
    closed: bool = field(default=False, repr=False)

    def release(self) -> None:
        """Back to the pool if it served without a failure, is still alive and idle; else
        killed. A request still in flight (an evaluation cancelled while its thread waits on the
        worker) means the worker is not idle: pooled, the next evaluation's requests would cross
        that thread's."""
        if self.closed:
            return
        w = self.worker
        # Not proc.poll(): it would reap the worker, and its group then has no number of its own.
        alive = not w.jail.exited() and w.jail.exit_status is None and w.reason is None
        if not (self.poolable and self.healthy and alive and w.in_flight == 0 and self.uses < MAX_USES):
            self.close()
            return
        expired: list[Lease] = []
        with _lock:
            now = time.monotonic()
            mine = _idle.setdefault(self.key, [])
            expired.extend(lease for _, lease in mine)  # one idle worker per kit: the latest
            mine[:] = [(now, self)]
            everyone = sorted((t, k, lease) for k, lst in _idle.items() for t, lease in lst)
            for t, k, lease in everyone[:-MAX_IDLE] if len(everyone) > MAX_IDLE else []:
                _idle[k] = [(tt, ll) for tt, ll in _idle[k] if ll is not lease]
                expired.append(lease)
        for lease in expired:
            lease.close()
        _expire_later()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self.worker.close()
        finally:
            scratch.remove_folder(self.folder)
            try:
                os.close(self.staging_fd)
            except OSError:
                pass


def _expire_later() -> None:
    """One timer at a time kills what has been idle too long (an idle worker holds memory); it
    fires when the oldest idle worker reaches ``IDLE_S`` (later releases are younger)."""
    global _timer
    with _lock:
        if _timer is not None and _timer.is_alive():
            return
        idle_since = [t for lst in _idle.values() for t, _ in lst]
        if not idle_since:
            return
        delay = max(0.5, min(idle_since) + IDLE_S - time.monotonic() + 0.5)
        _timer = threading.Timer(delay, _expire_and_rearm)
        _timer.daemon = True
        _timer.start()


def _expire_and_rearm() -> None:
    global _timer
    expire_idle()
    with _lock:
        _timer = None
    _expire_later()


def _key(init: dict, env: dict[str, str], memory_mb: int | None, kit_hash: str | None) -> str:
    # What else reaches a worker's environment from this process's (workerproc._worker_env); and
    # the kit's content hash, for what its code reads from disk (a FIB kit's blobs, once).
    passed = {k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "CUDA_HOME",
                                             "NVIDIA_VISIBLE_DEVICES", "PATH")}
    blob = json.dumps({"python": sys.executable, "init": init, "env": env, "memory_mb": memory_mb,
                       "passed": passed, "kit": kit_hash}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def _forget_output(worker: WorkerProc, within_s: float = 0.5) -> None:
    """A new output record for a kept worker (one evaluation's cap, the tail its messages quote),
    once what it printed so far is drained: written unbuffered before its last reply, that may
    still sit in the pipe, and counted after the reset it would carry into the next evaluation."""
    deadline, quiet = time.monotonic() + within_s, 0
    while worker.proc.stdout and quiet < 2 and time.monotonic() < deadline:
        try:
            left = fcntl.ioctl(worker.proc.stdout.fileno(), termios.FIONREAD, b"\0" * 4)
        except (OSError, ValueError):
            break
        quiet = quiet + 1 if left == b"\0" * 4 else 0
        time.sleep(0.005)  # twice empty, 5 ms apart: a chunk the drain thread just read is counted
    worker.printed = 0
    worker.tail.clear()


def _answers(lease: Lease) -> bool:
    """Whether an idle worker still answers: an empty staging request (no kit code runs)."""
    try:
        h, _ = lease.worker.request({"cmd": "stage", "axes": {}, "scalars": {}, "seeds": []}, 10.0,
                                    "checking the idle reference worker")
    except (WorkerFailure, OSError):
        return False
    return h.get("batches") == []


def lease(init: dict, env: dict[str, str], memory_mb: int | None, poolable: bool,
          kit_hash: str | None = None) -> Lease:
    """A trusted worker for one evaluation: an idle one with the same kit (content hash and
    code), environment and memory cap (``reused``), or a new one whose start-up frame the caller
    still has to read."""
    key = _key(init, env, memory_mb, kit_hash)
    if poolable:
        while True:
            with _lock:
                lst = _idle.get(key) or []
                taken = lst.pop()[1] if lst else None
            if taken is None:
                break
            if _answers(taken):
                taken.reused, taken.healthy = True, True
                taken.uses += 1
                # What it printed counts toward one evaluation's cap, and its output's tail (in
                # "kit broken" messages) must not carry an earlier, perhaps held-out, evaluation's.
                _forget_output(taken.worker)
                return taken
            taken.close()
    folder = scratch.new_folder("trusted")
    # Close-on-exec: only the trusted worker gets it (pass_fds); no confined worker ever does.
    staging_fd = os.memfd_create("evoteam-staging")

    def start() -> WorkerProc:
        global started
        started += 1
        return WorkerProc("reference worker", dict(init, staging_fd=staging_fd), folder, memory_mb,
                          extra_env=env, extra_fds=(staging_fd,))

    try:
        try:
            worker = _spawner.submit(start).result() if poolable else start()
        except RuntimeError as exc:  # the interpreter is shutting down: no new threads' work
            if "shutdown" not in str(exc):
                raise
            worker, poolable = start(), False
    except BaseException:
        scratch.remove_folder(folder)
        os.close(staging_fd)
        raise
    return Lease(key, worker, staging_fd, folder, poolable)


def idle_pids() -> list[int]:
    """The pids of the idle trusted workers (for tests and diagnostics)."""
    with _lock:
        return [lease.worker.proc.pid for lst in _idle.values() for _, lease in lst]


def expire_idle(max_age_s: float = IDLE_S) -> None:
    """Kill the idle workers older than ``max_age_s`` (0: all of them)."""
    now = time.monotonic()
    gone: list[Lease] = []
    with _lock:
        for k in list(_idle):
            keep = [(t, lease) for t, lease in _idle[k] if now - t < max_age_s]
            gone.extend(lease for t, lease in _idle[k] if now - t >= max_age_s)
            if keep:
                _idle[k] = keep
            else:
                del _idle[k]
    for lease in gone:
        lease.close()


atexit.register(expire_idle, 0.0)
