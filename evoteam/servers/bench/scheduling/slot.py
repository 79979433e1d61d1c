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
import time
from pathlib import Path

from evoteam.config import Settings, load_settings
from evoteam.errors import DomainError
from evoteam.servers.bench.scheduling.jobs import EvalJob, KitMismatch, SlotReply, SlotSettings, device_fingerprint

REPLY_MARK = "EVOTEAM-SLOT-REPLY "
# A slot measures and records nothing: it gets no token, store address or provider key, so a
# runner that a candidate somehow reached would find no credential either.
_NOT_FOR_SLOTS = ("EVOTEAM_TOKEN", "EVOTEAM_KNOWLEDGE_URL", "EVOTEAM_BENCH_URL", "ANTHROPIC_API_KEY",
                  "TAVILY_API_KEY", "OPENAI_API_KEY")
_PR_SET_PDEATHSIG = 1


async def evaluate_job(settings: Settings, job: EvalJob, warm: bool = False) -> SlotReply:
    """Evaluate ``job`` here (in this process) and say where; refuse a kit whose hash differs."""
    from evoteam.servers.bench.evaluation import core
    from evoteam.servers.bench.formats.kits import find_kit

    try:
        kit = find_kit(settings, job.kit)
    except DomainError as exc:
        return SlotReply(ok=False, error=f"{socket.gethostname()}: {exc}", refused=True)
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
                                   "runner": "standby" if warm else "fresh"}
    return SlotReply(ok=True, evaluation=result, samples=result.samples)


def _die_with_parent() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


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
    payload = json.loads(sys.stdin.read() or "null")
    if payload is None:  # a standby that was never used
        return 0
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
        reply = asyncio.run(evaluate_job(settings, job, warm=warm))
    except Exception as exc:  # noqa: BLE001 - one line back to the caller, never a traceback
        reply = SlotReply(ok=False, error=f"the slot runner failed: {type(exc).__name__}: {exc}")
    sys.stdout.write(REPLY_MARK + reply.model_dump_json() + "\n")
    sys.stdout.flush()
    return 0


def start_runner(cores: list[int] | None = None, gpu_id: str | None = None, warm: bool = False) -> subprocess.Popen:
    """Start a slot runner; given ``cores`` it pins itself to them; ``warm``: it imports the
    harness before its job comes (a standby); given ``gpu_id`` it (and every worker it starts)
    sees that GPU only. Call it from the thread that outlives the runner (the event loop's):
    the runner dies with it."""
    args = (["--cores", ",".join(map(str, cores))] if cores else []) + (["--warm"] if warm else [])
    env = {k: v for k, v in os.environ.items() if k not in _NOT_FOR_SLOTS}
    if gpu_id is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu_id
    return subprocess.Popen([sys.executable, "-m", "evoteam.servers.bench.scheduling.slot", *args], env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def stop_runner(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.communicate(timeout=10)


async def run_slot(job: EvalJob, settings: SlotSettings | None = None, timeout_s: float = 7200.0,
                   runner: subprocess.Popen | None = None) -> SlotReply:
    """Run ``job`` on ``runner`` (a standby started for the job's cores) or a fresh slot runner and
    wait for its reply; a runner that outlives ``timeout_s`` (a wedged device) or whose caller is
    cancelled is killed, freeing the slot."""
    proc = runner if runner is not None and runner.poll() is None else start_runner(gpu_id=job.gpu_id)
    data = json.dumps({"job": job.model_dump(mode="json"),
                       "settings": settings.model_dump(mode="json") if settings else None}).encode()
    try:
        out, err = await asyncio.to_thread(proc.communicate, data, timeout_s)
    except subprocess.TimeoutExpired:
        stop_runner(proc)
        return SlotReply(ok=False, error=f"the evaluation ran past {timeout_s:g} s on its slot and was killed; "
                                         "the slot is free again")
    except BaseException:  # cancelled: the thread's communicate returns once the runner is gone
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        raise
    for line in reversed(out.decode(errors="replace").splitlines()):
        if line.startswith(REPLY_MARK):
            return SlotReply.model_validate_json(line[len(REPLY_MARK):])
    tail = err.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
    return SlotReply(ok=False, error=f"the slot runner died (exit {proc.returncode}): {tail[0][:300]}")


if __name__ == "__main__":
    raise SystemExit(main())
