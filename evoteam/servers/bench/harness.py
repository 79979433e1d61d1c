"""The harness side: starting workers, asking them for outputs and timings, and judging.

Everything that decides a score happens here, in the harness process: comparing outputs with the
reference, the statistics, the timer cross-check. Workers only run code and report.
The functions here block; the async core calls them in threads.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from evoteam.servers.bench import protocol, replies
from evoteam.servers.bench.workerenv import tuning_env

OUTPUT_CAP_BYTES = 1 << 20  # what a worker may print before it is stopped
_SIGNALS = {signal.SIGSEGV: "segmentation fault", signal.SIGBUS: "bus error", signal.SIGABRT: "abort",
            signal.SIGILL: "illegal instruction", signal.SIGFPE: "floating-point exception",
            signal.SIGKILL: "killed", signal.SIGXFSZ: "file size limit exceeded"}


class WorkerFailure(Exception):
    """A worker (or the code in it) failed; ``status`` is a harness status."""

    def __init__(self, status: str, message: str, flagged: bool = False, fatal: bool = False):
        super().__init__(message)
        self.status = status
        self.message = message
        self.flagged = flagged
        self.fatal = fatal  # the worker is gone; nothing more can be asked of it


def _worker_env(scratch: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """A small environment: no API keys or tokens reach a worker. Its allocator and thread
    variables are `workerenv.tuning_env()`'s defaults unless `extra` (the kit's tuning_env, the
    same dict for every worker of an evaluation) replaces them."""
    env = {
        "PATH": os.pathsep.join(p for p in ["/usr/local/cuda/bin", "/usr/local/bin", "/usr/bin", "/bin"]),
        "HOME": str(scratch), "TMPDIR": str(scratch), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1",
        "TRITON_CACHE_DIR": str(scratch / ".triton"), "TORCH_EXTENSIONS_DIR": str(scratch / ".torch_ext"),
    }
    for key in ("CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "CUDA_HOME", "NVIDIA_VISIBLE_DEVICES",
                "EVOTEAM_BENCH_NO_LANDLOCK"):
        if os.environ.get(key):
            env[key] = os.environ[key]
    # A fixed allocator policy and thread counts in every worker, so baseline and candidate
    # processes allocate alike (see workerenv.py for why, and what a kit may override).
    env.update(tuning_env())
    env.update(extra or {})
    return env


STATUSES = {"PASSED", "INCORRECT_SHAPE", "INCORRECT_DTYPE", "INCORRECT_NUMERICAL", "RUNTIME_ERROR",
            "COMPILE_ERROR", "TIMEOUT"}
UNTRUSTED_LIMIT = 1200


def untrusted(text: str, limit: int = UNTRUSTED_LIMIT) -> str:
    """Text that came from candidate code (its errors, its prints), fenced and truncated so that
    whoever reads a report sees it as data, not as the harness's words."""
    text = str(text)
    if len(text) > limit:
        text = text[: limit // 3] + f"\n[... {len(text) - limit} characters cut ...]\n" + text[-(2 * limit // 3):]
    text = text.replace("<<<", "< < <").replace(">>>", "> > >")
    return f"\n<<<candidate output (untrusted, truncated)\n{text}\n>>>"


def verify_confinement(pid: int) -> str:
    """What the harness itself sees of a candidate worker's confinement (the worker's own report
    could be rewritten by the candidate): seccomp in force, no effective capabilities but read
    access, a uid other than the harness's. Returns the missing layers, '+'-prefixed."""
    try:
        status = {k: v.strip() for k, _, v in (line.partition(":") for line in
                                                 Path(f"/proc/{pid}/status").read_text().splitlines())}
    except OSError:
        return ""
    out = ""
    if status.get("Seccomp") != "2":
        out += "+NO-SECCOMP(not in force in the candidate's process)"
    uid = int((status.get("Uid") or "0").split()[0])
    if os.geteuid() == 0 and uid == 0:
        out += "+NO-OWN-UID(the candidate runs as root)"
    caps = int(status.get("CapEff") or "0", 16)
    if caps & ~(1 << 2):
        out += f"+NO-CAPABILITY-DROP(effective capabilities {caps:#x})"
    return out


class WorkerProc:
    """One worker process, in its own process group (and cgroup where available), with its
    output drained and capped, its memory watched and every request under a deadline. Between
    requests the worker is stopped: it runs only while the harness is waiting for it."""

    def __init__(self, label: str, init: dict, scratch: Path, memory_mb: int | None,
                 extra_env: dict[str, str] | None = None, untrusted_code: bool = False, arena: bool = False,
                 extra_fds: tuple[int, ...] = (), tree_memory_mb: int | None = None):
        from evoteam.servers.bench.jail import Jail

        self.label = label
        self.memory_mb = memory_mb
        self.untrusted = untrusted_code
        self.reason: str | None = None
        self.tail = bytearray()
        self.printed = 0
        # The whole tree's cap (limits.py): the worker's own, plus a little for what it starts.
        self.jail = Jail(label, tree_memory_mb or (memory_mb + 64 if memory_mb else None))
        self.arena_fd: int | None = None
        self.arena_map = None
        self.arena_size = 0
        self.layout_key = None
        pass_fds = list(extra_fds)
        if arena:
            self.arena_fd = os.memfd_create(f"evoteam-{label.split()[0]}", 0)
            init = dict(init, arena_fd=self.arena_fd)
            pass_fds.append(self.arena_fd)
        p_r, c_w = os.pipe()  # child -> parent
        c_r, p_w = os.pipe()  # parent -> child
        for fd in (p_r, p_w):
            try:
                fcntl.fcntl(fd, 1031, 1 << 20)  # F_SETPIPE_SZ: fewer round trips for large inputs
            except OSError:
                pass
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-B", "-m", "evoteam.servers.bench.worker", str(c_r), str(c_w)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            pass_fds=(c_r, c_w, *pass_fds), cwd=str(scratch), env=_worker_env(scratch, extra_env),
            start_new_session=True, close_fds=True)
        # Before it is sent anything (so before any candidate code exists in it).
        self.jail.attach(self.proc.pid)
        os.close(c_r)
        os.close(c_w)
        self.wfd = p_w
        self.reader = protocol.FrameReader(p_r)
        self.rfd = p_r
        self._stop = threading.Event()
        self._drainer = threading.Thread(target=self._drain, daemon=True)
        self._drainer.start()
        threading.Thread(target=self._watch_memory, daemon=True).start()
        protocol.write_frame(self.wfd, init)

    # -------------------------------------------------------- watchers

    def _drain(self) -> None:
        stream = self.proc.stdout
        while True:
            try:
                chunk = stream.read1(65536)
            except (OSError, ValueError):
                return
            if not chunk:
                return
            self.printed += len(chunk)
            self.tail += chunk
            if len(self.tail) > 4000:
                del self.tail[:-4000]
            if self.printed > OUTPUT_CAP_BYTES and self.reason is None:
                self.reason = (f"the {self.label} wrote more than {OUTPUT_CAP_BYTES >> 20} MiB to stdout/stderr "
                               "and was stopped; remove the prints")
                self.kill()

    def _watch_memory(self) -> None:
        if not self.memory_mb:
            return
        limit_kb = int(self.memory_mb * 1024 * 1.1)
        status = f"/proc/{self.proc.pid}/status"
        while not self._stop.wait(0.1):
            try:
                with open(status) as fh:
                    for line in fh:
                        if line.startswith("VmRSS:"):
                            if int(line.split()[1]) > limit_kb and self.reason is None:
                                self.reason = (f"the {self.label} used more than its memory cap of "
                                               f"{self.memory_mb} MiB and was stopped")
                                self.kill()
                            break
            except (OSError, ValueError):
                return

    def output_tail(self) -> str:
        return bytes(self.tail).decode("utf-8", "replace")[-1500:]

    def _text(self, text: str) -> str:
        return untrusted(text) if self.untrusted else str(text)[:4000]

    # -------------------------------------------------------- requests

    def kill(self) -> None:
        self.jail.kill_all()

    def _returncode(self, timeout: float) -> int:
        if self.jail.exit_status is not None:  # reaped by the jail's wait for a stop
            st = self.jail.exit_status
            return -os.WTERMSIG(st) if os.WIFSIGNALED(st) else os.WEXITSTATUS(st)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            try:
                return self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                return -signal.SIGKILL

    def _death(self) -> WorkerFailure:
        self.jail.resume()
        code = self._returncode(5)
        if self.reason:
            return WorkerFailure("RUNTIME_ERROR", self.reason, fatal=True)
        capped = self.jail.limits.hit()
        if capped:
            return WorkerFailure("RUNTIME_ERROR", f"the {self.label}: {capped}", fatal=True)
        if code < 0:
            sig = -code
            name = _SIGNALS.get(sig, signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig))
            try:
                signame = signal.Signals(sig).name
            except ValueError:
                signame = str(sig)
            msg = f"the {self.label} process crashed ({signame}, {name})"
        else:
            msg = f"the {self.label} process exited with code {code}"
        tail = self.output_tail().strip()
        if tail:
            msg += "; last output:" + self._text(tail)
        return WorkerFailure("RUNTIME_ERROR", msg, fatal=True)

    def _malformed(self, why: str) -> WorkerFailure:
        self.kill()
        return WorkerFailure("RUNTIME_ERROR", f"the {self.label} sent a malformed reply to the harness ({why}); "
                             "this evaluation is flagged", flagged=True, fatal=True)

    def read(self, timeout: float, what: str) -> tuple[dict, dict]:
        deadline = time.monotonic() + timeout
        try:
            header, arrays = self.reader.read(deadline)
        except protocol.PeerTimeout:
            capped = self.jail.limits.hit()
            self.kill()
            if capped:  # stuck at a cap (a fork refused, memory reclaimed): that is the cause to report
                raise WorkerFailure("RUNTIME_ERROR", f"the {self.label}: {capped}", fatal=True) from None
            raise WorkerFailure("TIMEOUT", f"the {self.label} did not finish {what} within {timeout:g} s "
                                "(a hang, or far too slow) and was stopped", fatal=True) from None
        except protocol.PeerClosed:
            raise self._death() from None
        except protocol.ProtocolError as exc:
            raise self._malformed(str(exc)) from None
        if self.reason:  # flooded or over memory but still answered
            self.kill()
            raise WorkerFailure("RUNTIME_ERROR", self.reason, fatal=True)
        try:
            replies.common(header)  # every common field bounded and typed before any is used
        except replies.BadReply as exc:
            raise self._malformed(str(exc)) from None
        violations = header.get("violations") or []
        if violations:
            if not isinstance(violations, list):
                raise self._malformed("violations is not a list")
            raise WorkerFailure("RUNTIME_ERROR", self._text(str(violations[0])[:500]).lstrip("\n")
                                + " (this evaluation is flagged)", flagged=True)
        ok = header.get("ok")
        if ok is not True:
            if ok is not False:
                raise self._malformed("no ok field")
            status = header.get("status", "RUNTIME_ERROR")
            if status not in STATUSES or status == "PASSED":
                raise self._malformed(f"unknown failure status {str(status)[:40]!r}")
            message = header.get("message", "failed")
            if not isinstance(message, str):
                raise self._malformed("message is not text")
            if self.untrusted:
                message = f"the {self.label} reported {status}:" + untrusted(message)
            raise WorkerFailure(status, message, flagged=header.get("flagged") is True)
        return header, arrays

    def request(self, msg: dict, timeout: float, what: str, arrays: dict | None = None,
                timed: bool = False) -> tuple[dict, dict] | tuple[dict, dict, int]:
        """Resume the worker, send one message, wait for its reply, stop the worker again. With
        ``timed``, also return the harness's own clock from just before the worker was resumed to
        just after it was stopped: the only time that scores."""
        data = protocol.encode(msg, arrays)
        t0 = time.perf_counter_ns()
        self.jail.resume()
        try:
            view = memoryview(data)
            while view:
                n = os.write(self.wfd, view)
                view = view[n:]
        except (BrokenPipeError, OSError):
            raise self._death() from None
        try:
            header, out = self.read(timeout, what)
        finally:
            self.jail.stop()
            t1 = time.perf_counter_ns()
            self.jail.hold()
        capped = self.jail.limits.hit()  # outside the timed window: a cap hit anywhere in the tree fails it
        if capped:
            self.kill()
            raise WorkerFailure("RUNTIME_ERROR", f"the {self.label}: {capped}", fatal=True)
        if timed:
            return header, out, t1 - t0
        return header, out

    # -------------------------------------------------------- the shared input area

    def arena(self, size: int):
        """The harness's mapping of the worker's shared area, grown to at least ``size`` bytes."""
        import mmap

        if size > self.arena_size:
            os.ftruncate(self.arena_fd, size)
            self.arena_map = mmap.mmap(self.arena_fd, size)
            self.arena_size = size
        return self.arena_map

    def close(self) -> None:
        self._stop.set()
        # Killed, not asked to exit: every answer is in, and an interpreter's teardown (tens of
        # ms with numpy or torch loaded) would only add to every evaluation. Every process of the
        # worker goes, whatever it started (daemons, stdout-holding grandchildren).
        self.jail.close()
        self._returncode(2)
        for fd in (self.wfd, self.rfd, self.arena_fd):
            if fd is None:
                continue
            try:
                os.close(fd)
            except OSError:
                pass
        # Never block on the output pipe: closing it while the drain thread reads would wait for
        # that thread, and a surviving holder of the pipe would wedge the harness. Once every
        # process is gone the pipe reaches EOF and the drain thread closes nothing but itself.
        self._drainer.join(timeout=0.5)
        if self.proc.stdout and not self._drainer.is_alive():
            try:
                self.proc.stdout.close()
            except (OSError, ValueError):
                pass
        self.arena_map = None


# ---------------------------------------------------------------- judging outputs


@dataclass
class Check:
    status: str = "PASSED"
    message: str | None = None
    max_abs: float = 0.0
    max_rel: float = 0.0
    flagged: bool = False


def compare_outputs(meta: list[dict], got: dict[str, np.ndarray], ref_meta: list[dict], ref: dict[str, np.ndarray],
                    expected: dict[str, tuple[tuple[int, ...] | None, str]], atol: float, rtol: float,
                    matched_ratio: float) -> Check:
    """Shape, then dtype, then values. An element fails only when it exceeds both atol and
    rtol; NaN/inf in the candidate's output never pass."""
    check = Check()
    by_name = {m["name"]: m for m in meta}
    for name, (shape, dtype) in expected.items():
        m = by_name.get(name)
        if m is None:
            return Check("INCORRECT_SHAPE", f"output {name!r} is missing")
        if shape is not None and tuple(m["shape"]) != tuple(shape):
            return Check("INCORRECT_SHAPE", f"output {name!r} has shape {tuple(m['shape'])}, expected {tuple(shape)}")
        if shape is None and m["dtype"] == "python_scalar":
            pass
        elif m["dtype"] != dtype:
            return Check("INCORRECT_DTYPE", f"output {name!r} has dtype {m['dtype']}, expected {dtype}")
        a = np.asarray(got[name], dtype=np.float64)
        r = np.asarray(ref[name], dtype=np.float64)
        if a.shape != r.shape:
            return Check("INCORRECT_SHAPE", f"output {name!r} has shape {a.shape}; the reference's is {r.shape}")
        finite = np.isfinite(a)
        if not finite.all():
            bad = int((~finite).sum())
            return Check("INCORRECT_NUMERICAL", f"output {name!r} has {bad} NaN/inf values (NaN/inf never pass)")
        diff = np.abs(a - r)
        absr = np.abs(r)
        if diff.size:
            check.max_abs = max(check.max_abs, float(diff.max()))
            with np.errstate(divide="ignore", invalid="ignore"):
                rel = np.divide(diff, absr, out=np.zeros_like(diff), where=absr > 0)
            check.max_rel = max(check.max_rel, float(np.nanmax(rel)))
        failing = diff > atol
        failing &= diff > rtol * absr
        if not np.isfinite(r).all():
            failing |= ~np.isfinite(r) & (a != r)
        n_bad = int(failing.sum())
        ratio = 1.0 - n_bad / max(1, failing.size)
        if n_bad and ratio < matched_ratio:
            idx = np.unravel_index(int(np.argmax(np.where(failing, diff, -1))), failing.shape) if failing.ndim else ()
            return Check("INCORRECT_NUMERICAL",
                         f"output {name!r}: {n_bad} of {failing.size} elements exceed atol={atol:g} and "
                         f"rtol={rtol:g} (worst at {tuple(int(i) for i in idx)}: got {float(a[idx]):.6g}, expected "
                         f"{float(r[idx]):.6g}; max abs error {check.max_abs:.3g})", check.max_abs, check.max_rel)
    return check


def quick_match(meta: list[dict], got: dict[str, np.ndarray], ref: dict[str, np.ndarray],
                expected: dict[str, tuple[tuple[int, ...] | None, str]], atol: float, rtol: float,
                matched_ratio: float) -> bool:
    """True when the outputs surely pass compare_outputs (same shapes and dtypes, all finite,
    within tolerance), computed in the outputs' own precision; False means: ask compare_outputs."""
    by_name = {m["name"]: m for m in meta}
    for name, (shape, dtype) in expected.items():
        m = by_name.get(name)
        if m is None or m["dtype"] != dtype or name not in got or name not in ref:
            return False
        a, r = got[name], ref[name]
        if a.shape != r.shape or (shape is not None and a.shape != tuple(shape)):
            return False
        if a.dtype.kind != "f" or a.dtype != r.dtype:
            a, r = a.astype(np.float64), r.astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            diff = np.abs(a - r)
            bad = (diff > atol) & (diff > rtol * np.abs(r))
        if not np.isfinite(a).all() or not np.isfinite(r).all():
            return False
        if bad.any() and 1.0 - int(bad.sum()) / max(1, bad.size) < matched_ratio:
            return False
    return True


# ---------------------------------------------------------------- locks


@contextmanager
def device_lock(lock_dir: Path, device: str):
    """One timing run per device at a time, across processes."""
    lock_dir.mkdir(parents=True, exist_ok=True)
    name = device.replace(":", "") if device.startswith("cuda") else "cpu"
    if name == "cuda":
        name = "cuda0"
    path = lock_dir / f"{name}.lock"
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


# ---------------------------------------------------------------- kernel sessions


@dataclass
class WorkloadSpec:
    name: str
    axes: dict[str, int]  # every axis, constants included
    scalars: dict[str, Any]
    expected: dict[str, tuple[tuple[int, ...] | None, str]]
    hidden: bool = False  # a held-out workload: nothing about it may reach the candidate's author


@dataclass
class WorkloadVerdict:
    status: str = "PASSED"
    message: str | None = None
    flagged: bool = False
    max_abs: float = 0.0
    max_rel: float = 0.0
    candidate_ms: float | None = None
    baseline_ms: float | None = None
    speedup: float | None = None
    notes: list[str] = field(default_factory=list)
    kernel_s: float = 0.0  # time spent inside timed calls, both sides


def new_seed() -> int:
    return secrets.randbits(62)


_LABELS = {"float64": np.float64, "float32": np.float32, "float16": np.float16, "bfloat16": np.uint16,
           "int64": np.int64, "int32": np.int32, "int16": np.int16, "int8": np.int8, "uint8": np.uint8,
           "bool": np.bool_}
MAX_OUTPUT_BYTES = 1 << 31
NULL_TRUST_NS = 250_000  # above this the empty call's cost is scheduling delay, not the call path


def _from_raw(label: str, data: bytes | np.ndarray, shape: list[int]) -> np.ndarray:
    arr = np.frombuffer(data, dtype=_LABELS[label]).reshape(shape)
    if label == "bfloat16":  # the top half of a float32
        arr = (arr.astype(np.uint32) << 16).view(np.float32)
    return arr


def _same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    """Byte-for-byte equality of two flat uint8 arrays, compared 8 bytes at a time where the
    size allows (half the time of a byte-wise compare on large inputs)."""
    if a.nbytes != b.nbytes:
        return False
    if a.nbytes % 8 == 0:
        return np.array_equal(a.view(np.uint64), b.view(np.uint64))
    return np.array_equal(a, b)


def _align(n: int) -> int:
    return (n + 63) // 64 * 64


@dataclass
class Payload:
    """One call's inputs, made by the trusted worker: raw bytes per array input, scalars."""

    specs: list[dict]
    blobs: dict[str, np.ndarray]  # uint8


class KernelSession:
    """A candidate worker and a trusted worker for one evaluation of one kernel kit.

    Every call that matters goes through one path for both workers: the harness writes the
    call's inputs into the worker's shared area while the worker is stopped, starts its clock,
    resumes the worker and asks for the call, stops the worker the moment it answers, stops its
    clock, then reads the outputs out of the stopped worker's memory and checks that the inputs
    are unchanged. While one worker is being called the other is stopped."""

    def __init__(self, *, definition: dict, framework: str, device: str, inputs_source: str | None,
                 reference_source: str, baseline: dict | None, candidate_dir: Path, candidate_file: str,
                 function: str, dps: bool | None, deny: list[str], memory_mb: int, timeouts, tolerance,
                 timing, use_landlock: bool = True, threads: int | None = None,
                 worker_env: dict[str, str] | None = None):
        from evoteam.servers.bench.jail import can_drop_privileges, pick_uid

        self.tolerance = tolerance
        self.timeouts = timeouts
        self.timing = timing
        self.device = device
        self.gpu = device.startswith("cuda")
        self.sandbox = ""
        self.out_names = list(definition["outputs"].keys())
        self.trusted_dir = Path(tempfile.mkdtemp(prefix="evoteam-trusted-"))
        self.candidate_dir = candidate_dir
        public_def = {"inputs": definition["inputs"], "outputs": definition["outputs"]}
        # One environment for both workers: the same allocator policy and thread counts, or the
        # speedup would reflect them (workerenv.py).
        env = self.worker_env = tuning_env(threads, self.gpu, worker_env)
        common = {"framework": framework, "device": device, "definition": public_def}
        uid = None
        if can_drop_privileges():
            uid = pick_uid()
            for path in [candidate_dir, *candidate_dir.rglob("*")]:
                os.chown(path, uid, uid)
        self.trusted = WorkerProc("reference/baseline worker", dict(common, mode="trusted", inputs_source=inputs_source,
                                  reference_source=reference_source, baseline=baseline),
                                  self.trusted_dir, None if self.gpu else max(memory_mb, 8192), extra_env=env,
                                  arena=True)
        self.candidate = WorkerProc("candidate", dict(common, mode="candidate",
                                    solution={"dir": str(candidate_dir), "file": candidate_file,
                                              "function": function, "dps": dps},
                                    sandbox={"scratch": str(candidate_dir), "deny": deny,
                                             "memory_mb": None if self.gpu else memory_mb,
                                             "landlock": use_landlock, "uid": uid, "private_tmp": uid is not None}),
                                    candidate_dir, memory_mb, extra_env=env, untrusted_code=True, arena=True)
        self.candidate_error: WorkerFailure | None = None
        self.dead = False
        self.sched: dict[str, tuple] = {}
        self.null_ns: dict[str, int] = {}
        self.read_by_pipe = False

    def start(self) -> None:
        try:
            self.trusted.read(self.timeouts.startup_s, "loading the reference")
        except WorkerFailure as exc:
            raise RuntimeError(f"the kit's reference/baseline failed to load: {exc.message}") from None
        finally:
            self.trusted.jail.stop()
            self.trusted.jail.hold()
        try:
            header, _ = self.candidate.read(self.timeouts.startup_s, "importing the candidate")
            desc = header.get("sandbox", "")
            self.sandbox = (desc if isinstance(desc, str) else "")[:300] + "+" + self.candidate.jail.describe()
        except WorkerFailure as exc:
            self.candidate_error = exc
            self.dead = True
        finally:
            self.candidate.jail.stop()
            self.candidate.jail.hold()
        # Where the harness cannot read a stopped worker's memory, outputs come back through the
        # pipe inside the timed call instead (same for both sides; slower, still sound).
        self.read_by_pipe = self.candidate.jail.mem_fd is None or self.trusted.jail.mem_fd is None
        if self.read_by_pipe:
            self.sandbox += "+OUTPUTS-BY-PIPE(cannot read worker memory)"
        for w in (self.trusted, self.candidate):
            try:
                self.sched[w.label] = self._sched_of(w)
            except OSError:
                pass
        if not self.dead:
            self.sandbox += verify_confinement(self.candidate.proc.pid)

    def close(self) -> None:
        # Both at once: each close waits until its worker's processes are gone and its cgroup removed.
        other = threading.Thread(target=self.trusted.close)
        other.start()
        try:
            self.candidate.close()
        finally:
            other.join()
        shutil.rmtree(self.trusted_dir, ignore_errors=True)

    # -------------------------------------------------------- helpers

    @staticmethod
    def _sched_of(w: WorkerProc) -> tuple:
        from evoteam.servers.bench.jail import sched_state

        pid = w.proc.pid
        states = [sched_state(int(t)) for t in sorted(os.listdir(f"/proc/{pid}/task"))]
        return tuple(sorted(set(states)))

    def _check_sched(self) -> None:
        """The trusted worker's nice value, CPU affinity and scheduling policy (and the candidate's)
        must be what they were at start: anything else means someone tried to tilt the timing."""
        for w in (self.trusted, self.candidate):
            before = self.sched.get(w.label)
            if before is None:
                continue
            try:
                now = self._sched_of(w)
            except OSError:
                continue
            if now != before:
                raise WorkerFailure("RUNTIME_ERROR", f"the {w.label}'s scheduling (nice value, CPU affinity or "
                                    f"policy) changed during the evaluation: {before} -> {now}; timings are not "
                                    "comparable (this evaluation is flagged)", flagged=True)

    def _cand(self, msg: dict, what: str, timed: bool = False):
        try:
            return self.candidate.request(msg, self.timeouts.workload_s, what, timed=timed)
        except WorkerFailure as exc:
            if exc.fatal:
                self.dead = True
                self.candidate_error = exc
            raise

    def _trusted(self, msg: dict, what: str, timed: bool = False):
        try:
            return self.trusted.request(msg, max(self.timeouts.workload_s, 120.0), what, timed=timed)
        except WorkerFailure as exc:
            raise RuntimeError(f"the kit's {msg.get('who', 'reference')} failed on {what}: {exc.message}") from None

    def _gen(self, wl: WorkloadSpec, seed: int) -> Payload:
        h, arrays = self._trusted({"cmd": "gen", "axes": wl.axes, "scalars": wl.scalars, "seed": seed},
                                  f"making inputs for {wl.name}")
        specs = h.get("inputs")
        if not isinstance(specs, list) or any(s.get("name") not in arrays for s in specs if "scalar" not in s):
            raise RuntimeError(f"the kit's input generator returned malformed inputs for {wl.name}")
        return Payload(specs, {k: v.reshape(-1).view(np.uint8) for k, v in arrays.items()})

    def _layout(self, w: WorkerProc, payload: Payload, wl: WorkloadSpec, who: str) -> dict:
        """Place the inputs (and output slots, when every output shape is known) in the worker's
        shared area; tell the worker when the layout changes."""
        specs, off = [], 0
        for spec in payload.specs:
            if "scalar" in spec:
                specs.append(dict(spec))
                continue
            n = int(payload.blobs[spec["name"]].nbytes)
            specs.append(dict(spec, offset=off, nbytes=n))
            off = _align(off + n)
        outs = []
        if all(shape is not None for shape, _ in wl.expected.values()):
            for name in self.out_names:
                shape, dtype = wl.expected[name]
                n = int(np.prod(shape, dtype=np.int64)) * np.dtype(_LABELS.get(dtype, np.float32)).itemsize
                outs.append({"name": name, "dtype": dtype, "shape": list(shape), "offset": off, "nbytes": n})
                off = _align(off + n)
        layout = {"inputs": specs, "outputs": outs, "size": off, "who": who}
        key = json.dumps(layout, sort_keys=True)
        w.arena(max(off, 64))
        if w.layout_key != key:
            msg = dict(layout, cmd="arena")
            if w is self.candidate:
                self._cand(msg, "setting up inputs")
            else:
                self._trusted(msg, "setting up inputs")
            w.layout_key = key
            w.nan_fill = {}
        return layout

    def _fill(self, w: WorkerProc, layout: dict, payload: Payload) -> None:
        """Write one call's inputs (and NaN-filled output slots) while the worker is stopped."""
        mm = w.arena_map
        for spec in layout["inputs"]:
            if "offset" in spec:
                mm[spec["offset"]:spec["offset"] + spec["nbytes"]] = payload.blobs[spec["name"]]
        for spec in layout["outputs"]:
            fill = w.nan_fill.get(spec["name"])
            if fill is None:
                kind = np.dtype(_LABELS.get(spec["dtype"], np.uint8)).kind
                arr = np.full(spec["shape"], np.nan if kind == "f" else 0, dtype=_LABELS.get(spec["dtype"], np.uint8))
                if spec["dtype"] == "bfloat16":
                    arr = np.full(spec["shape"], 0x7FC0, dtype=np.uint16)
                fill = w.nan_fill[spec["name"]] = arr.tobytes()
            mm[spec["offset"]:spec["offset"] + spec["nbytes"]] = fill

    def _inputs_unchanged(self, w: WorkerProc, layout: dict, payload: Payload) -> str | None:
        for spec in layout["inputs"]:
            if "offset" in spec:
                now = np.frombuffer(w.arena_map, np.uint8, spec["nbytes"], spec["offset"])
                if not _same_bytes(now, payload.blobs[spec["name"]]):
                    return spec["name"]
        return None

    def _capture(self, w: WorkerProc, header: dict, arrays: dict,
                 expected: dict | None = None) -> tuple[list[dict], dict[str, np.ndarray]]:
        """The outputs the stopped worker reported, read from its memory (or from the reply where
        the harness cannot read memory). Every count, size and type is checked first."""
        try:
            outs = [o.model_dump() for o in replies.outputs(header.get("outputs"), len(self.out_names))]
        except replies.BadReply as exc:
            raise w._malformed(str(exc)) from None
        meta, got = [], {}
        for i, (name, o) in enumerate(zip(self.out_names, outs)):
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
            if label not in _LABELS:
                raise WorkerFailure("INCORRECT_DTYPE", f"output {name!r} has dtype {str(label)[:40]}, which the "
                                    "harness does not accept")
            want = (expected or {}).get(name, (None, None))[0]
            if want is not None and tuple(shape) != tuple(want):  # before reading anything
                raise WorkerFailure("INCORRECT_SHAPE", f"output {name!r} has shape {tuple(shape)}, expected "
                                    f"{tuple(want)}")
            nbytes, addr = o.get("nbytes"), o.get("addr")
            size = int(np.prod(shape, dtype=np.int64)) * np.dtype(_LABELS[label]).itemsize
            if not isinstance(nbytes, int) or nbytes != size or nbytes > MAX_OUTPUT_BYTES:
                raise w._malformed(f"output {name!r} claims {nbytes!r} bytes for shape {shape} of {label}")
            if self.read_by_pipe:
                blob = arrays.get(f"o{i}")
                data = bytes(blob) if blob is not None else None
            else:
                if not isinstance(addr, int) or addr < 0:
                    raise w._malformed(f"output {name!r} has no valid address")
                data = w.jail.read_memory(addr, nbytes) if nbytes else b""
            if data is None or len(data) != nbytes:
                raise w._malformed(f"output {name!r} could not be read ({nbytes} bytes)")
            meta.append({"name": name, "dtype": label, "shape": shape})
            got[name] = _from_raw(label, data, shape)
        return meta, got

    def _call(self, w: WorkerProc, wl: WorkloadSpec, payload: Payload, who: str, what: str,
              calibrate: bool = False) -> tuple[list[dict], dict[str, np.ndarray], int]:
        """One call through the common path. Returns the outputs and the harness-clocked time."""
        layout = self._layout(w, payload, wl, who)
        self._fill(w, layout, payload)
        msg = {"cmd": "tcall", "calibrate": calibrate, "send": self.read_by_pipe}
        if w is self.candidate:
            header, arrays, ns = self._cand(msg, what, timed=True)
        else:
            header, arrays, ns = self._trusted(msg, what, timed=True)
        if calibrate and not layout["outputs"]:
            meta, got = [], {}  # no output slots (a shape not known before the call): nothing to read
        else:
            meta, got = self._capture(w, header, arrays, wl.expected)
        changed = self._inputs_unchanged(w, layout, payload)
        if changed is not None:
            raise WorkerFailure("RUNTIME_ERROR", f"the {'candidate' if w is self.candidate else who} modified its "
                                f"input {changed!r}; inputs must be left unchanged (work on a copy)", flagged=True)
        return meta, got, ns

    def _ref(self, wl: WorkloadSpec, seed: int) -> tuple[list[dict], dict]:
        rh, ra = self._trusted({"cmd": "call", "who": "reference", "axes": wl.axes, "scalars": wl.scalars,
                                "seed": seed}, f"workload {wl.name}")
        return rh["outputs"], ra

    # -------------------------------------------------------- steps

    def check_correctness(self, wl: WorkloadSpec) -> WorkloadVerdict:
        v = WorkloadVerdict()
        tol = self.tolerance
        for round_no in range(2):  # two calls, each on fresh inputs, each against the reference
            seed = new_seed()
            payload = self._gen(wl, seed)
            try:
                meta, got, _ = self._call(self.candidate, wl, payload, "candidate", f"workload {wl.name}")
            except WorkerFailure as exc:
                return WorkloadVerdict(exc.status, exc.message, exc.flagged)
            ref_meta, ref = self._ref(wl, seed)
            check = compare_outputs(meta, got, ref_meta, ref, wl.expected, tol.atol, tol.rtol,
                                    tol.required_matched_ratio)
            v.max_abs, v.max_rel = max(v.max_abs, check.max_abs), max(v.max_rel, check.max_rel)
            if check.status != "PASSED":
                msg_txt = check.message
                if round_no == 1:
                    msg_txt = f"second call, on fresh inputs: {msg_txt} (a cache keyed on earlier inputs?)"
                return WorkloadVerdict(check.status, msg_txt, False, v.max_abs, v.max_rel)
        return v

    def check_baseline(self, wl: WorkloadSpec) -> str | None:
        """Does the baseline match the reference on this workload? None if so, else why not."""
        msg = {"cmd": "call", "axes": wl.axes, "scalars": wl.scalars, "seed": new_seed()}
        try:
            bh, ba = self.trusted.request(dict(msg, who="baseline"), max(self.timeouts.workload_s, 120.0),
                                          f"the baseline on {wl.name}")
        except WorkerFailure as exc:
            return f"{exc.status}: {exc.message[:300]}"
        rh, ra = self._trusted(dict(msg, who="reference"), f"workload {wl.name}")
        tol = self.tolerance
        check = compare_outputs(bh["outputs"], ba, rh["outputs"], ra, wl.expected, tol.atol, tol.rtol,
                                tol.required_matched_ratio)
        return None if check.status == "PASSED" else f"{check.status}: {check.message}"

    def calibrate(self, wl: WorkloadSpec, payload: Payload, n: int = 9) -> int:
        """The cost of the call path itself (resume, message, reply, stop; on GPU also the copies
        in and out), measured on the trusted worker with no kernel in between. It is subtracted
        from both sides' times; the candidate cannot make it larger."""
        samples = [self._call(self.trusted, wl, payload, "baseline", "calibrating", calibrate=True)[2]
                   for _ in range(n)]
        # The fastest trip: what every call costs at least. A median would include scheduling
        # delays of a busy machine and could exceed a fast kernel's whole time.
        return int(min(samples))

    def measure(self, wl: WorkloadSpec, v: WorkloadVerdict, rng: secrets.SystemRandom | None = None) -> None:
        """Interleaved timing of baseline and candidate on the same fresh inputs, every call timed by
        the harness; every timed candidate output is checked against the baseline's output for
        the same inputs. Scores the fastest call of each side, less the call path's own cost."""
        plan = self.timing
        samples: dict[str, list[int]] = {"baseline": [], "candidate": []}
        what = f"timing workload {wl.name}"
        tol = self.tolerance
        null = None
        for r in range(plan.rounds):
            order = ("baseline", "candidate") if r % 2 == 0 else ("candidate", "baseline")
            payloads = [self._gen(wl, new_seed()) for _ in range(plan.reps_per_round)]
            warm = [self._gen(wl, new_seed()) for _ in range(plan.warmup)] if r == 0 else []
            if null is None:
                null = self.calibrate(wl, payloads[0])
            outputs: dict[str, list] = {"baseline": [], "candidate": []}
            for side in order:
                w = self.candidate if side == "candidate" else self.trusted
                self._check_sched()
                for p in warm:
                    self._call(w, wl, p, side, what)
                for p in payloads:
                    meta, got, ns = self._call(w, wl, p, side, what)
                    samples[side].append(ns)
                    outputs[side].append((meta, got))
                self._check_sched()
            for k, ((cm, cg), (bm, bg)) in enumerate(zip(outputs["candidate"], outputs["baseline"])):
                # Baseline and reference agree within the tolerance, so a correct candidate is
                # within twice that of the baseline.
                if quick_match(cm, cg, bg, wl.expected, 2 * tol.atol, 2 * tol.rtol, tol.required_matched_ratio):
                    continue
                check = compare_outputs(cm, cg, bm, bg, wl.expected, 2 * tol.atol, 2 * tol.rtol,
                                        tol.required_matched_ratio)
                if check.status != "PASSED":
                    raise WorkerFailure(check.status, f"a timed call returned a wrong result ({check.message}); "
                                        "outputs must be computed on every call", flagged=True)
        # The fastest call of each side. Delays (the machine's other work, waking a worker) only
        # ever add to a call's time, and no call can be fast by luck: each has fresh inputs that
        # exist only from the moment it starts, and each output is checked.
        if null > NULL_TRUST_NS:
            # Even the fastest empty call waited for the CPU: the machine is busy and the figure is
            # mostly delay, which a fast candidate's calls may not have had. Subtracting it could
            # credit a speedup nobody earned, so nothing is subtracted (speedups are understated).
            v.notes.append(f"busy machine: the call path took {null / 1e3:.0f} us at best and was not subtracted; "
                           "speedups are understated")
            null = 0
        floor = 1000  # 1 us: below the harness's resolution
        base_ns = max(floor, min(samples["baseline"]) - null)
        cand_ns = max(floor, min(samples["candidate"]) - null)
        self.null_ns[wl.name] = null
        v.baseline_ms = base_ns / 1e6
        v.candidate_ms = cand_ns / 1e6
        v.speedup = base_ns / cand_ns if cand_ns > 0 else math.inf
        v.kernel_s = (sum(samples["baseline"]) + sum(samples["candidate"])) / 1e9


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
    from evoteam.servers.bench.jail import can_drop_privileges, pick_uid

    scratch = Path(tempfile.mkdtemp(prefix="evoteam-program-"))
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
        shutil.rmtree(scratch, ignore_errors=True)


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
    raises WorkerFailure. With ``options`` (see bench/openevolve.py ``run_evaluation``) it returns
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
    from evoteam.servers.bench.jail import can_drop_privileges, cgroup_root, pick_uid
    from evoteam.servers.bench.sandbox import SERVICE_VAR

    scratch = Path(tempfile.mkdtemp(prefix="evoteam-evaluator-"))
    # The program's folder is read-only to the evaluator and what it starts (no file can be
    # added beside the program, e.g. a package that a later import by name would prefer).
    work = Path(tempfile.mkdtemp(prefix="evoteam-evaluated-"))
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
        serving.start()
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
        shutil.rmtree(scratch, ignore_errors=True)
        for folder, _, _ in os.walk(work):
            with contextlib.suppress(OSError):
                os.chmod(folder, 0o755)
        shutil.rmtree(work, ignore_errors=True)


def _serve_program_requests(request_fd: int, reply_fd: int, deny: list[str], timeout_s: float,
                            memory_mb: int, worker_env: dict[str, str] | None = None) -> None:
    """Answer an evaluator's ``run_program`` calls (sandbox.py) until it closes its end. The
    evaluator sends the program's source, read under its own confinement: the harness opens no
    path the evaluator names (a path can be swapped for a link to a secret between a check and
    a read)."""
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
