"""Timed workers started before an evaluation needs them (spares).

Every kernel evaluation on a CPU kit starts at least three confined workers (the baseline, the
empty-call worker, each candidate); each is an interpreter start and a numpy import, about 0.1 s
of CPU, and together they were the largest step of an evaluation's own time on the CPU kits
(benchmarks/bench_harness.py, "start"). A process that evaluates again and again (the bench
server, a kept slot runner) calls ``keep``; from then on, each evaluation that closes starts as
many spares as it used: workers jailed at once (cgroup, memory cap) that import what every worker
imports (worker._preload) and then wait for their start-up frame. The next evaluation with the
same worker environment takes them (``take``) and sends each its frame (WorkerProc.begin): mode,
code, folder, uid and confinement, all applied inside the worker exactly as in a worker started
then, before any of its code is imported.

What keeps this sound: a spare has run nothing but the interpreter and those imports and was
never given a folder, code or input; each is used once; it is taken only while alive and only
with the environment it was started with (allocator and thread variables, memory cap,
interpreter: what the process reads at start); spares are started when an evaluation has closed,
so their imports never run beside that evaluation's timed rounds, and an evaluation that takes one
still importing waits at its start, not while timing; at most ``MAX_SPARES`` wait, none longer
than ``IDLE_S``; all die with the thread that started them (PR_SET_PDEATHSIG is per thread: one
long-lived thread starts them) and are killed when the process exits. GPU kits keep none (as
trustedpool.py keeps no GPU worker).
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from evoteam.servers.bench.measurement.workerproc import WorkerProc

MAX_SPARES = 4  # spares kept per process, all environments together (a comparison uses four workers)
IDLE_S = 300.0  # a spare older than this is killed

_lock = threading.Lock()
_spares: dict[str, list[tuple[float, WorkerProc]]] = {}
_pending: dict[str, int] = {}  # asked for, not started yet
_spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="evoteam-spare-start")
_home: Path | None = None
_kept = False
_generation = 0  # bumped by keep(False): spares asked for before it are not started
_timer: threading.Timer | None = None
started = 0  # spares started by this process (tests and benchmarks count them)
taken = 0  # spares handed to an evaluation


def keep(on: bool = True) -> None:
    """Keep spares in this process from now on (``on``), or stop: kill those waiting, and start
    none of those asked for before (a later ``keep()`` does not revive them)."""
    global _kept, _generation
    with _lock:
        _kept = on
        if not on:
            _generation += 1
            _pending.clear()
    if not on:
        expire(0.0)


def kept() -> bool:
    return _kept


def _key(env: dict[str, str], memory_mb: int | None) -> str:
    # What a worker's process takes from its start: its environment (workerproc._worker_env gets
    # the rest from this process's, which is the same for every spare), its cap, the interpreter.
    passed = {k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "CUDA_HOME",
                                             "NVIDIA_VISIBLE_DEVICES", "PATH", "EVOTEAM_BENCH_NO_LANDLOCK")}
    blob = json.dumps({"python": sys.executable, "env": env, "memory_mb": memory_mb, "passed": passed},
                      sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def _alive(w: WorkerProc) -> bool:
    # Not proc.poll(): it would reap the worker, and its group then has no number of its own.
    return not w.closed and not w.jail.exited() and w.jail.exit_status is None and w.reason is None


def take(env: dict[str, str], memory_mb: int | None) -> WorkerProc | None:
    """A spare started with this environment and cap, removed from the pool; None when there is
    none (the caller starts a worker as before). The caller must ``begin`` it."""
    global taken
    key = _key(env, memory_mb)
    while True:
        with _lock:
            lst = _spares.get(key) or []
            w = lst.pop(0)[1] if lst else None  # the oldest: the most likely to have finished importing
        if w is None:
            return None
        if _alive(w) and w.in_flight == 0:
            taken += 1
            return w
        w.close()


def refill(env: dict[str, str], memory_mb: int | None, count: int) -> None:
    """Start spares (in the background) until ``count`` with this environment wait, where this
    process keeps spares; called when an evaluation has closed."""
    if not _kept or count <= 0:
        return
    key = _key(env, memory_mb)
    with _lock:
        need = min(count, MAX_SPARES) - len(_spares.get(key) or []) - _pending.get(key, 0)
        if need > 0:
            _pending[key] = _pending.get(key, 0) + need
    for _ in range(need):
        try:
            _spawner.submit(_start_one, key, dict(env), memory_mb, _generation)
        except RuntimeError:  # the interpreter is shutting down: no spares then
            return
    _expire_later()


def _placeholder() -> Path:
    """The folder a spare starts in (HOME, TMPDIR, working folder) until its frame names its own:
    empty, owned by this process, never written by a worker (it is root's; workers drop to uids
    of their own before running any code they are given)."""
    global _home
    with _lock:
        if _home is None or not _home.is_dir():
            _home = Path(tempfile.mkdtemp(prefix="evoteam-spares-"))
        return _home


def _start_one(key: str, env: dict[str, str], memory_mb: int | None, generation: int) -> None:
    global started
    if not _kept or generation != _generation:
        return
    try:
        w = WorkerProc("spare worker", None, _placeholder(), memory_mb, extra_env=env, untrusted_code=True,
                       arena=True)
    finally:
        with _lock:
            if generation == _generation:
                _pending[key] = max(0, _pending.get(key, 0) - 1)
    started += 1
    extra: list[WorkerProc] = []
    with _lock:
        if not _kept or generation != _generation:  # keep(False) came while it started
            extra.append(w)
        else:
            _spares.setdefault(key, []).append((time.monotonic(), w))
        everyone = sorted((t, k, sw) for k, lst in _spares.items() for t, sw in lst)
        for _t, k, sw in everyone[:max(0, len(everyone) - MAX_SPARES)]:
            _spares[k] = [(tt, ww) for tt, ww in _spares[k] if ww is not sw]
            extra.append(sw)
    for sw in extra:
        sw.close()


def expire(max_age_s: float = IDLE_S) -> None:
    """Kill the spares older than ``max_age_s`` (0: all of them)."""
    now = time.monotonic()
    gone: list[WorkerProc] = []
    with _lock:
        for k in list(_spares):
            gone.extend(w for t, w in _spares[k] if now - t >= max_age_s)
            keep_ = [(t, w) for t, w in _spares[k] if now - t < max_age_s]
            if keep_:
                _spares[k] = keep_
            else:
                del _spares[k]
    for w in gone:
        w.close()


def waiting() -> int:
    """How many spares wait now (tests, benchmarks)."""
    with _lock:
        return sum(len(lst) for lst in _spares.values())


def pids() -> list[int]:
    with _lock:
        return [w.proc.pid for lst in _spares.values() for _, w in lst]


def _expire_later() -> None:
    global _timer
    with _lock:
        if _timer is not None and _timer.is_alive():
            return
        _timer = threading.Timer(IDLE_S + 1.0, _expire_and_rearm)
        _timer.daemon = True
        _timer.start()


def _expire_and_rearm() -> None:
    global _timer
    expire()
    with _lock:
        _timer = None
        rearm = bool(_spares)
    if rearm:
        _expire_later()


def _at_exit() -> None:
    expire(0.0)
    if _home is not None:
        shutil.rmtree(_home, ignore_errors=True)


atexit.register(_at_exit)
