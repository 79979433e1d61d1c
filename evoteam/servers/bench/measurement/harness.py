"""The harness side of workers: one timing run per device at a time, and program kits'
evaluators and programs run in confined workers.

Everything that decides a score happens in the harness process (session.py times the calls,
judge.py compares outputs, timing.py turns rounds into estimates); workers only run code and
report. A worker process itself (start, requests under a deadline, its death) is workerproc.py's
(``WorkerFailure`` is still reachable here for the modules that import it from this one). The
functions here block; the async core calls them in threads.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from evoteam.servers.bench.confinement import scratch as folders
from evoteam.servers.bench.measurement import protocol, replies
from evoteam.servers.bench.confinement.workerenv import tuning_env
from evoteam.servers.bench.measurement.workerproc import WorkerFailure, WorkerProc

# ---------------------------------------------------------------- locks


def _open_lock(lock_dir: Path, name: str) -> int:
    return os.open(lock_dir / f"{name}.lock", os.O_CREAT | os.O_RDWR, 0o600)


@contextmanager
def device_lock(lock_dir: Path, device: str):
    """One timing run per device at a time, across processes.

    The CPU's locks nest: a pool slot's "cpu:1" holds its own lock and shares the machine's
    "cpu" lock with the other slots, while an evaluation of the whole machine (a bare "cpu": the
    local backend, or a service's compare and remeasure) holds "cpu" alone, so it never times
    beside a slot on the same cores. A whole-machine evaluation waiting for the slots closes a
    gate first, so slots that come after it wait for it instead of keeping it out for ever.
    """
    lock_dir.mkdir(parents=True, exist_ok=True)
    name = device.replace(":", "") if device.startswith(("cuda", "cpu:")) else "cpu"
    if name == "cuda":
        name = "cuda0"
    held: list[int] = []
    try:
        if name.startswith("cpu"):
            gate = _open_lock(lock_dir, "cpu-gate")
            held.append(gate)
            fcntl.flock(gate, fcntl.LOCK_EX)  # wait behind any whole-machine evaluation that is waiting
            machine = _open_lock(lock_dir, "cpu")
            held.append(machine)
            fcntl.flock(machine, fcntl.LOCK_EX if name == "cpu" else fcntl.LOCK_SH)
            held.remove(gate)
            os.close(gate)  # the gate is only for the wait
        if name != "cpu":
            own = _open_lock(lock_dir, name)
            held.append(own)
            fcntl.flock(own, fcntl.LOCK_EX)
        yield
    finally:
        for fd in reversed(held):
            os.close(fd)  # closing the descriptor drops its lock


# ---------------------------------------------------------------- program kits


def decode_value(value: Any, arrays: dict[str, np.ndarray]) -> Any:
    """A program's result as the worker encoded it (numbers, text, lists, dicts, arrays)."""
    if isinstance(value, dict):
        if set(value) == {"__array__"}:
            return np.array(arrays[value["__array__"]])
        if set(value) == {"__float__"}:
            return float(value["__float__"])
        return {k: decode_value(v, arrays) for k, v in value.items()}
    if isinstance(value, list):
        return [decode_value(v, arrays) for v in value]
    return value


def run_program_worker(program: Path, function: str, kwargs: dict, timeout_s: float, memory_mb: int,
                       deny: list[str], use_landlock: bool = True, worker_env: dict[str, str] | None = None) -> Any:
    header, arrays = _program_call(program.read_bytes(), function, kwargs, timeout_s, memory_mb, deny, use_landlock,
                                   worker_env)
    try:
        return decode_value(header.get("result"), arrays)
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        raise WorkerFailure("RUNTIME_ERROR", f"the program worker sent a malformed result ({type(exc).__name__}); "
                            "this evaluation is flagged", flagged=True) from None


def _program_call(source: bytes, function: str, kwargs: dict, timeout_s: float, memory_mb: int,
                  deny: list[str], use_landlock: bool = True,
                  worker_env: dict[str, str] | None = None) -> tuple[dict, dict]:
    """Run ``function(**kwargs)`` of a program (its source) in a confined worker; the worker's
    reply, encoded."""
    from evoteam.servers.bench.confinement.jail import can_drop_privileges, pick_uid

    scratch = folders.new_folder("program")
    try:
        (scratch / "program.py").write_bytes(source)
        uid = pick_uid() if can_drop_privileges() else None
        if uid is not None:
            for path in (scratch, scratch / "program.py"):
                os.chown(path, uid, uid)
        w = WorkerProc("program", {"mode": "program", "framework": "numpy",
                                   "solution": {"dir": str(scratch), "file": "program.py", "function": function,
                                                "dps": False},
                                   "sandbox": {"scratch": str(scratch), "deny": deny, "memory_mb": memory_mb,
                                               "landlock": use_landlock, "uid": uid,
                                               "private_tmp": uid is not None}},
                       scratch, memory_mb, extra_env=tuning_env(overrides=worker_env), untrusted_code=True)
        try:
            start = time.monotonic()
            w.read(min(timeout_s, 120.0), "importing the program")
            left = max(1.0, timeout_s - (time.monotonic() - start))
            header, arrays = w.request({"cmd": "program", "kwargs": kwargs}, left, f"{function}()")
            return {"ok": True, "result": header.get("result")}, arrays
        finally:
            w.close()
    finally:
        folders.remove_folder(scratch)


# The evaluator's own interpreter on top of the kit's cap, for its whole tree (the program it
# starts included).
EVALUATOR_OVERHEAD_MB = 256

# What a kit evaluator may start: Python, to run the program in a process of its own (as many
# OpenEvolve evaluators do); everything it starts inherits its confinement.
EVALUATOR_EXECUTABLES = {"python", "python3", os.path.basename(sys.executable),
                         os.path.basename(os.path.realpath(sys.executable))}


def run_evaluator(evaluator: Path, program: Path, timeout_s: float, memory_mb: int, deny: list[str],
                  options: dict | None = None, kit_root: Path | None = None,
                  evaluator_deny: list[str] | None = None, worker_env: dict[str, str] | None = None,
                  evaluator_reads: list[str] | None = None) -> dict:
    """Run a program kit's ``evaluate(program_path)`` in a worker of its own. Returns metrics, or
    raises WorkerFailure. With ``options`` (see measurement/cascade.py ``run_evaluation``) it returns
    the whole evaluation: metrics, artifacts, stages, any failure, the worker's sandbox, and
    ``program_in_process`` when the evaluator imported or exec'd the program in its own process.

    The evaluator is kit code, but it may run the program inside itself (OpenEvolve's examples
    import it), so it is confined like a candidate: its own uid, private /tmp, Landlock (its kit
    folder, a read-only copy of the program's folder, its working folder and the Python
    installation readable; only the working folder writable), seccomp, the audit hook
    (``evaluator_deny``: the store and the bench's state), a cgroup that is killed whole at the
    end, not dumpable. ``run_program`` called inside it is served here: the evaluator sends the
    source, a program worker the harness starts runs it (``deny``).
    ``worker_env`` (the kit's overrides) applies to the evaluator and to every program it runs.
    ``evaluator_reads``: read-only paths beside the kit its manifest declares (a benchmark suite's
    shared runtime). The evaluator may start a session of its own (``start_new_session``) where
    the jail still reaches the whole tree: by cgroup, or by the evaluator's own uid."""
    from evoteam.servers.bench.confinement.jail import can_drop_privileges, cgroup_root, pick_uid
    from evoteam.servers.bench.measurement.protocol import SERVICE_VAR

    scratch = folders.new_folder("evaluator")
    # The program's folder is read-only to the evaluator and what it starts (no file can be
    # added beside the program, e.g. a package that a later import by name would prefer).
    work = folders.new_folder("evaluated")
    fds: list[int] = []
    serving: threading.Thread | None = None
    try:
        shutil.copytree(program.parent, work, symlinks=False, dirs_exist_ok=True)
        for folder, dirs, files in os.walk(work):
            os.chmod(folder, 0o555)
            for name in files:
                os.chmod(os.path.join(folder, name), 0o444)
        uid = pick_uid() if can_drop_privileges() else None
        if uid is not None:
            os.chown(scratch, uid, uid)
        request_r, request_w = os.pipe()
        reply_r, reply_w = os.pipe()
        notice_r, notice_w = os.pipe()
        fds += [request_r, request_w, reply_r, reply_w, notice_r, notice_w]
        env = {"EVOTEAM_BENCH_PROGRAM_TIMEOUT": str(timeout_s), "EVOTEAM_BENCH_MEMORY_MB": str(memory_mb),
               SERVICE_VAR: f"{request_w},{reply_r}"}
        read = [str(kit_root or evaluator.parent), str(work), *(evaluator_reads or [])]
        w = WorkerProc("kit evaluator", {
            "mode": "evaluator", "evaluator": str(evaluator), "program": str(work / program.name), "env": env,
            "options": options, "notice_fd": notice_w, "watch": [str(work), str(scratch)],
            "sandbox": {"scratch": str(scratch), "deny": list(evaluator_deny or []), "read": read,
                        "memory_mb": None, "landlock": True, "uid": uid, "private_tmp": uid is not None,
                        "executables": sorted(EVALUATOR_EXECUTABLES),
                        "allow_setsid": uid is not None or cgroup_root() is not None},
        }, scratch, None, extra_env={**tuning_env(overrides=worker_env), **env}, untrusted_code=True,
           extra_fds=(request_w, reply_r, notice_w), tree_memory_mb=memory_mb + EVALUATOR_OVERHEAD_MB)
        w.jail.uid = uid  # a program in a session of its own is still killed, by uid, without a cgroup
        for fd in (request_w, reply_r, notice_w):  # the worker's ends
            os.close(fd)
            fds.remove(fd)
        serving = threading.Thread(target=_serve_program_requests, daemon=True,
                                   args=(request_r, reply_w, deny, timeout_s, memory_mb, worker_env))
        # Its two ends are the thread's from here on, closed by it when it ends: closed here while
        # it still ran a program, their numbers could be another worker's pipes by its reply.
        fds.remove(request_r)
        fds.remove(reply_w)
        try:
            serving.start()
        except BaseException:
            fds += [request_r, reply_w]
            serving = None
            raise
        try:
            header, _ = w.read(60.0, "loading the evaluator")
            sandbox_desc = str(header.get("sandbox") or "")[:300] + "+" + w.jail.describe()
            w.jail.stop()
            w.jail.hold()
            header, _ = w.request({"cmd": "evaluate"}, timeout_s + 30.0, "evaluating the program")
        finally:
            capped = w.jail.limits.hit()  # read before close removes the groups
            w.close()
        if capped:  # the program it started (or the evaluator) was over the kit's cap: never a score
            raise WorkerFailure("RUNTIME_ERROR", f"the kit evaluator's tree: {capped}")
        os.set_blocking(notice_r, False)
        try:
            in_process = bool(os.read(notice_r, 64))
        except (BlockingIOError, OSError):
            in_process = False
        try:
            if options is None:
                return replies.metrics(header.get("metrics"))
            return dict(replies.evaluation(header.get("evaluation")), program_in_process=in_process,
                        sandbox=sandbox_desc)
        except replies.BadReply as exc:
            raise WorkerFailure("RUNTIME_ERROR", f"the kit evaluator sent a malformed reply ({exc}); this evaluation "
                                "is flagged", flagged=True) from None
    finally:
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        if serving is not None:
            serving.join(timeout=5.0)
        folders.remove_folder(scratch)
        folders.remove_folder(work)  # read-only as the program saw it: remove_folder opens it up


def _serve_program_requests(request_fd: int, reply_fd: int, deny: list[str], timeout_s: float,
                            memory_mb: int, worker_env: dict[str, str] | None = None) -> None:
    """Answer an evaluator's ``run_program`` calls (sandbox.py) until it closes its end. The
    evaluator sends the program's source, read under its own confinement: the harness opens no
    path the evaluator names (a path can be swapped for a link to a secret between a check and
    a read)."""
    try:
        _answer_program_requests(request_fd, reply_fd, deny, timeout_s, memory_mb, worker_env)
    finally:
        for fd in (request_fd, reply_fd):
            with contextlib.suppress(OSError):
                os.close(fd)


def _answer_program_requests(request_fd: int, reply_fd: int, deny: list[str], timeout_s: float,
                             memory_mb: int, worker_env: dict[str, str] | None) -> None:
    reader = protocol.FrameReader(request_fd, max_bytes=64 << 20)
    while True:
        try:
            msg, arrays = reader.read()
        except (protocol.PeerClosed, protocol.ProtocolError, OSError):
            return
        reply: tuple[dict, dict | None]
        try:
            source = arrays.get("source")
            if source is None or source.dtype != np.uint8 or source.ndim != 1:
                raise WorkerFailure("RUNTIME_ERROR", "a malformed run_program call: no program source")
            call = replies.run_program_request(msg)
            reply = _program_call(source.tobytes(), call.function, call.kwargs,
                                  min(call.timeout_s or timeout_s, timeout_s),
                                  min(call.memory_mb or memory_mb, memory_mb), deny, worker_env=worker_env)
        except WorkerFailure as exc:
            reply = ({"ok": False, "status": exc.status, "message": exc.message}, None)
        except replies.BadReply as exc:
            reply = ({"ok": False, "status": "RUNTIME_ERROR", "message": str(exc)}, None)
        except (TypeError, ValueError, OSError, OverflowError) as exc:
            reply = ({"ok": False, "status": "RUNTIME_ERROR", "message": f"a malformed run_program call: {exc}"},
                     None)
        try:
            protocol.write_frame(reply_fd, *reply)
        except OSError:
            return
