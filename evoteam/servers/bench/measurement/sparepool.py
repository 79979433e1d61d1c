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
never given a folder, code or input; each is used once; it is handed out only once it said it is
ready (its first frame), while alive and not stopped, and only with the environment it was started
with (allocator and thread variables, memory cap, interpreter: what a process reads at its start);
an evaluation waits for every spare of its process still starting (``settle``) before its first
timed round, so no spare's imports run beside timed rounds; at most ``MAX_SPARES`` wait, none
longer than ``IDLE_S``; all die with the thread that started them (PR_SET_PDEATHSIG is per thread:
one long-lived thread starts them) and are killed when the process exits or stops keeping them.
None are kept where workers cannot get uids of their own (a spare waits unconfined, as root, until
it is used: out of every candidate's reach only when candidates run under other uids), nor for GPU
kits (as trustedpool.py keeps no GPU worker).
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

from evoteam.servers.bench.measurement.workerproc import PASSED_ENV, WorkerProc

MAX_SPARES = 4  # spares kept per process, all environments together (a comparison uses four workers)
IDLE_S = 300.0  # a spare older than this is killed
STARTUP_S = 60.0  # a spare not ready by then (its own CPU time) is given up

_lock = threading.Lock()
_settled = threading.Condition(_lock)  # notified whenever a pending spare is ready or given up
_spares: dict[str, list[tuple[float, WorkerProc]]] = {}
_pending: dict[str, int] = {}  # asked for, not ready yet
_starting: set[WorkerProc] = set()  # started, not ready yet (keep(False) kills them too)
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
        starting = list(_starting) if not on else []
        if not on:
            _generation += 1
            _pending.clear()
            _settled.notify_all()
    if not on:
        for w in starting:  # its spawner thread then finds it dead and counts it off
            _close(w)
        expire(0.0)


def kept() -> bool:
    return _kept


def _key(env: dict[str, str], memory_mb: int | None) -> str:
    # What a worker's process takes from its start: its environment (workerproc._worker_env gets
    # the rest from this process's, which is the same for every spare), its cap, the interpreter.
    passed = {k: os.environ.get(k) for k in (*PASSED_ENV, "PATH")}
    blob = json.dumps({"python": sys.executable, "env": env, "memory_mb": memory_mb, "passed": passed},
                      sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def _alive(w: WorkerProc) -> bool:
    # Not proc.poll(): it would reap the worker, and its group then has no number of its own.
    if w.closed or w.jail.exited() or w.jail.exit_status is not None or w.reason is not None:
        return False
    try:  # running or asleep on its pipe: not stopped (a stopped one would time out at its start)
        with open(f"/proc/{w.proc.pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] in ("R", "S")
    except (OSError, IndexError):
        return False


def take(env: dict[str, str], memory_mb: int | None) -> WorkerProc | None:
    """A spare started with this environment and cap, removed from the pool; None when there is
    none (the caller starts a worker as before). The caller must ``begin`` it."""
    global taken
    key = _key(env, memory_mb)
    deadline = time.monotonic() + STARTUP_S
    while True:
        with _settled:
            # One still starting is worth waiting for: it is no later than a worker started now.
            while not _spares.get(key) and _pending.get(key, 0) > 0 and time.monotonic() < deadline:
                _settled.wait(deadline - time.monotonic())
            lst = _spares.get(key) or []
            w = lst.pop(0)[1] if lst else None
        if w is None:
            return None
        if _alive(w) and w.in_flight == 0:
            taken += 1
            return w
        w.close()


def refill(env: dict[str, str], memory_mb: int | None, count: int) -> None:
    """Start spares (in the background) until ``count`` with this environment wait, where this
    process keeps spares; called when an evaluation has closed."""
    from evoteam.servers.bench.confinement.jail import can_drop_privileges

    # Without uids of its own for workers, a spare would wait for minutes as an unconfined process
    # of the harness's uid, which every candidate shares then: none are kept.
    if not _kept or count <= 0 or not can_drop_privileges():
        return
    key = _key(env, memory_mb)
    with _lock:
        need = min(count, MAX_SPARES) - len(_spares.get(key) or []) - _pending.get(key, 0)
        generation = _generation
        if need > 0:
            _pending[key] = _pending.get(key, 0) + need
    if need <= 0:
        return
    try:
        _spawner.submit(_start_some, key, dict(env), memory_mb, need, generation)
    except RuntimeError:  # the interpreter is shutting down: no spares then
        with _lock:
            _pending[key] = max(0, _pending.get(key, 0) - need)
            _settled.notify_all()
        return
    _expire_later()


def settle(timeout: float = 30.0) -> bool:
    """Wait until no spare asked for is still starting (its imports take CPU): called by an
    evaluation before it times anything, so that no spare's start ever runs beside timed rounds
    of this process. False if some were still starting after ``timeout``."""
    deadline = time.monotonic() + timeout
    with _settled:
        while any(_pending.values()):
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            _settled.wait(left)
    return True


def _placeholder() -> Path:
    """The folder a spare starts in (HOME, TMPDIR, working folder) until its frame names its own:
    empty, owned by this process, never written by a worker (it is root's; workers drop to uids
    of their own before running any code they are given). Those of processes gone (a slot runner
    is killed, not asked to exit) are removed when the next is made."""
    global _home
    with _lock:
        if _home is None or not _home.is_dir():
            root = Path(tempfile.gettempdir())
            for old in root.glob("evoteam-spares-*-*"):
                pid = old.name.split("-")[2]
                if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                    shutil.rmtree(old, ignore_errors=True)
            _home = Path(tempfile.mkdtemp(prefix=f"evoteam-spares-{os.getpid()}-"))
        return _home


def _close(w: WorkerProc) -> None:
    try:
        w.close()
    except Exception:  # noqa: BLE001 - a spare that will not close is killed with this process
        pass


def _start_some(key: str, env: dict[str, str], memory_mb: int | None, count: int, generation: int) -> None:
    """Start ``count`` spares at once (their imports run side by side), and hand each out as it
    becomes ready; each stays pending until then, and is counted off whatever happens to it."""
    global started
    workers: list[WorkerProc | None] = []
    for _ in range(count):
        w = None
        if _kept and generation == _generation:
            try:
                w = WorkerProc("spare worker", None, _placeholder(), memory_mb, extra_env=env,
                               untrusted_code=True, arena=True)
                started += 1
                with _lock:
                    _starting.add(w)
            except Exception:  # noqa: BLE001 - a spare that cannot start is simply not there
                w = None
        workers.append(w)
    deadline = time.monotonic() + STARTUP_S  # one for the batch
    for w in workers:
        started_one = w
        extra: list[WorkerProc] = []
        try:
            if w is not None:
                # Pending (settle and take wait) until its imports are done.
                w.wait_ready(max(1.0, deadline - time.monotonic()))
        except Exception:  # noqa: BLE001
            extra.append(w)
            w = None
        finally:
            with _lock:
                _starting.discard(started_one)
                if generation == _generation:
                    _pending[key] = max(0, _pending.get(key, 0) - 1)
                if w is not None:
                    if not _kept or generation != _generation:  # keep(False) came while it started
                        extra.append(w)
                    else:
                        _spares.setdefault(key, []).append((time.monotonic(), w))
                    everyone = sorted(((t, id(sw), k, sw) for k, lst in _spares.items() for t, sw in lst),
                                      key=lambda row: row[:2])
                    for _t, _i, k, sw in everyone[:max(0, len(everyone) - MAX_SPARES)]:
                        _spares[k] = [(tt, ww) for tt, ww in _spares[k] if ww is not sw]
                        extra.append(sw)
                _settled.notify_all()
            for sw in extra:
                _close(sw)


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


def starting() -> int:
    """How many spares asked for are not ready yet."""
    with _lock:
        return sum(_pending.values())


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
