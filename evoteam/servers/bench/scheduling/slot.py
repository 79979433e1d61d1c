"""The slot runner: one evaluation, measured without the store, in a process of its own.

``python -m evoteam.servers.bench.scheduling.slot`` reads an EvalJob (and, from a local pool, the
slot's settings) on stdin, pins itself to the job's cores before any thread exists (children and
the harness's workers inherit the mask), dies with its parent, checks the kit's content hash,
runs ``core.evaluate_candidate(..., store=None)`` — the same jail, clock and checks as a local
evaluation — and prints one SlotReply line. The pool and the Ray task both start it, so a
remote evaluation is measured exactly as a local one.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from evoteam.config import Settings, load_settings
from evoteam.errors import DomainError
from evoteam.servers.bench.scheduling.jobs import EvalJob, KitMismatch, SlotReply, SlotSettings, device_fingerprint

REPLY_MARK = "EVOTEAM-SLOT-REPLY "
RUNNER_JOBS = 100  # evaluations one kept runner serves before it is replaced
# A slot measures and records nothing: it gets no token, store address or provider key, so a
# runner that a candidate somehow reached would find no credential either.
_NOT_FOR_SLOTS = ("EVOTEAM_TOKEN", "EVOTEAM_KNOWLEDGE_URL", "EVOTEAM_BENCH_URL", "ANTHROPIC_API_KEY",
                  "TAVILY_API_KEY", "OPENAI_API_KEY")
_PR_SET_PDEATHSIG = 1


async def evaluate_job(settings: Settings, job: EvalJob, how: str = "fresh") -> SlotReply:
    """Evaluate ``job`` here (in this process) and say where; refuse a kit whose hash differs."""
    from evoteam.servers.bench.evaluation import core
    from evoteam.servers.bench.formats.kit import Kit
    from evoteam.servers.bench.formats.kits import find_kit, state_dir
    from evoteam.servers.bench.scheduling.kitship import cache_root

    try:
        if job.kit_dir:  # a kit the node unpacked from the caller's shipment; only from its own cache
            folder = Path(job.kit_dir).resolve()
            if not folder.is_relative_to(cache_root(state_dir(settings)).resolve()):
                raise DomainError(f"refused kit folder {job.kit_dir[:200]!r}: not in this node's kit cache")
            kit = Kit.load(folder)
        else:
            kit = find_kit(settings, job.kit)
    except DomainError as exc:
        return SlotReply(ok=False, error=f"{socket.gethostname()}: {exc}", refused=True)
    kit.heldout_given = job.heldout  # the caller's held-out set, when it sent one
    if kit.content_hash != job.kit_hash:
        err = KitMismatch(f"{socket.gethostname()} refuses kit {job.kit}: its copy has content hash "
                          f"{kit.content_hash[:16]}…, the caller's is {job.kit_hash[:16]}…; "
                          "install the same kit on every node")
        return SlotReply(ok=False, error=str(err), refused=True)
    started = time.time()
    try:
        result = await core.evaluate_candidate(settings, kit, code=job.code, split=job.split, store=None,
                                               device=job.device, repeats=job.repeats)
    except DomainError as exc:
        return SlotReply(ok=False, error=str(exc), refused=True)
    # Wall-clock start and end (not a measurement): which evaluations overlapped, in a report.
    result.metrics["placement"] = {"device": job.device or kit.manifest.device, "started_at": started,
                                   "finished_at": time.time(),
                                   "fingerprint": device_fingerprint(job.device, job.gpu_id),
                                   # fresh: started for this job; standby: warmed up before
                                   # it; reused: kept from an earlier job on the slot
                                   "runner": how}
    return SlotReply(ok=True, evaluation=result, samples=result.samples, sample_ranges=result.sample_ranges)


def _die_with_parent() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _serve(payload: dict, pinned: bool, how: str) -> SlotReply:
    job = EvalJob.model_validate(payload["job"])
    if job.cores and not pinned:
        # Before asyncio or the harness start a thread: every later thread and child inherits it.
        os.sched_setaffinity(0, job.cores)
    if payload.get("settings"):
        given = SlotSettings.model_validate(payload["settings"])
        settings = Settings(db=Path(given.db), kits_dirs=[Path(p) for p in given.kits_dirs],
                            project_kits_dirs=[Path(p) for p in given.project_kits_dirs])
    else:  # a Ray node: its own configuration, never the caller's
        settings = load_settings()
    try:
        return asyncio.run(evaluate_job(settings, job, how=how))
    except Exception as exc:  # noqa: BLE001 - one line back to the caller, never a traceback
        return SlotReply(ok=False, error=f"the slot runner failed: {type(exc).__name__}: {exc}")


def main() -> int:
    _die_with_parent()
    pinned = warm = False
    args = sys.argv[1:]
    if args[:1] == ["--cores"] and len(args) > 1:
        # Pinned at birth, before any thread exists: every later thread and child inherits it.
        os.sched_setaffinity(0, [int(c) for c in args[1].split(",")])
        pinned, args = True, args[2:]
    if args[:1] == ["--warm"]:
        # A standby runner: warmed up (the harness imported) while it waits for its job.
        warm = True
        import evoteam.servers.bench.evaluation.core  # noqa: F401 - the import is the warm-up
    # One job a line, one reply a line, until stdin closes: a pool keeps its slot's runner for the
    # next evaluation, so only the first ever pays for the start. Candidates never run in here
    # (the harness's jailed workers do), so what one evaluation leaves in this process is the
    # harness's own state, as in a bench server that evaluates one candidate after another.
    served = 0
    from evoteam.servers.bench.measurement import sparepool

    while line := sys.stdin.readline():
        if not line.strip():
            continue
        how = "reused" if served else ("standby" if warm else "fresh")
        payload = json.loads(line)
        # A runner its caller keeps for the next job leaves spare workers for it (sparepool.py);
        # one that exits after this job would start them only to kill them.
        sparepool.keep(payload.get("kept") is True)
        reply = _serve(payload, pinned, how)
        sys.stdout.write(REPLY_MARK + reply.model_dump_json() + "\n")
        sys.stdout.flush()
        served += 1
    return 0


def start_runner(cores: list[int] | None = None, gpu_id: str | None = None, warm: bool = False) -> subprocess.Popen:
    """Start a slot runner; given ``cores`` it pins itself to them; ``warm``: it imports the
    harness before its first job comes (a standby); given ``gpu_id`` it (and every worker it
    starts) sees that GPU only. Call it from the thread that outlives the runner (the event
    loop's): the runner dies with it. Its stderr goes to a file of its own (``errors``), so a
    long-lived runner never blocks on a full pipe."""
    args = (["--cores", ",".join(map(str, cores))] if cores else []) + (["--warm"] if warm else [])
    env = {k: v for k, v in os.environ.items() if k not in _NOT_FOR_SLOTS}
    if gpu_id is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu_id
    errors = tempfile.TemporaryFile()
    proc = subprocess.Popen([sys.executable, "-m", "evoteam.servers.bench.scheduling.slot", *args], env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors)
    proc.errors = errors  # type: ignore[attr-defined]
    return proc


def stop_runner(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired, ValueError, OSError):
        proc.communicate(timeout=10)
    _close_errors(proc)


def _close_errors(proc: subprocess.Popen) -> None:
    errors = getattr(proc, "errors", None)
    if errors is not None:
        with contextlib.suppress(OSError):
            errors.close()


def _error_tail(proc: subprocess.Popen) -> str:
    errors = getattr(proc, "errors", None)
    try:
        errors.seek(0)
        lines = errors.read().decode(errors="replace").strip().splitlines()
    except (AttributeError, OSError, ValueError):
        lines = []
    return (lines[-1:] or ["no output"])[0][:300]


def _reap(proc: subprocess.Popen) -> None:
    """Let a runner that has answered its last job exit on its own (its stdin is closed), off
    the caller's path: its interpreter's shutdown is not the caller's wait."""
    def wait() -> None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=60)
        if proc.poll() is None:
            stop_runner(proc)
        _close_errors(proc)

    threading.Thread(target=wait, daemon=True).start()


async def run_slot(job: EvalJob, settings: SlotSettings | None = None, timeout_s: float = 7200.0,
                   runner: subprocess.Popen | None = None, keep: bool = False) -> SlotReply:
    """Run ``job`` on ``runner`` (a standby, or a runner kept from an earlier job) or on a fresh
    slot runner, and return its reply as soon as it comes. ``keep``: the runner stays up for the
    caller's next job (the caller holds ``runner``); else its stdin is closed and it exits on
    its own. A runner that outlives ``timeout_s`` (a wedged device) or whose caller is cancelled
    is killed, freeing the slot."""
    proc = runner if runner is not None and runner.poll() is None else start_runner(gpu_id=job.gpu_id)
    data = json.dumps({"job": job.model_dump(mode="json"), "kept": keep,
                       "settings": settings.model_dump(mode="json") if settings else None}).encode() + b"\n"
    deadline = time.monotonic() + timeout_s
    try:
        try:
            await asyncio.to_thread(_send, proc, data)
        except OSError:  # the runner died while it waited for this job: a fresh one takes it
            stop_runner(proc)
            proc = start_runner(gpu_id=job.gpu_id)
            await asyncio.to_thread(_send, proc, data)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), left)
            if not line:
                break
            text = line.decode(errors="replace")
            if text.startswith(REPLY_MARK):
                proc.jobs = getattr(proc, "jobs", 0) + 1  # type: ignore[attr-defined]
                if not keep:
                    with contextlib.suppress(OSError):
                        proc.stdin.close()
                    _reap(proc)
                return SlotReply.model_validate_json(text[len(REPLY_MARK):])
    except TimeoutError:
        stop_runner(proc)  # the thread's readline returns once the runner is gone
        return SlotReply(ok=False, error=f"the evaluation ran past {timeout_s:g} s on its slot and was killed; "
                                         "the slot is free again")
    except BaseException:  # cancelled: kill it, which ends the thread's read
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        raise
    code = await asyncio.to_thread(proc.wait)
    tail = _error_tail(proc)
    _close_errors(proc)
    return SlotReply(ok=False, error=f"the slot runner died (exit {code}): {tail}")


def reusable(proc: subprocess.Popen) -> bool:
    """Whether a kept runner may take another job: alive, and not yet at RUNNER_JOBS (a runner
    is replaced now and then, so whatever a long life accumulates in it stays bounded)."""
    return proc.poll() is None and getattr(proc, "jobs", 0) < RUNNER_JOBS


def _send(proc: subprocess.Popen, data: bytes) -> None:
    proc.stdin.write(data)
    proc.stdin.flush()


if __name__ == "__main__":
    raise SystemExit(main())
