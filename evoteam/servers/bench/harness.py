"""The harness side: starting workers, asking them for outputs and timings, and judging.

Everything that decides a score happens here, in the harness process: comparing outputs with the
reference, the statistics, the timer cross-check. Workers only run code and report.
The functions here block; the async core calls them in threads.
"""

from __future__ import annotations

import fcntl
import math
import os
import secrets
import shutil
import signal
import statistics
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

from evoteam.servers.bench import protocol

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
    """A small environment: no API keys or tokens reach a worker."""
    env = {
        "PATH": os.pathsep.join(p for p in ["/usr/local/cuda/bin", "/usr/local/bin", "/usr/bin", "/bin"]),
        "HOME": str(scratch), "TMPDIR": str(scratch), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1",
        "TRITON_CACHE_DIR": str(scratch / ".triton"), "TORCH_EXTENSIONS_DIR": str(scratch / ".torch_ext"),
        # A fixed allocator policy in every worker, so baseline and candidate processes allocate
        # alike (glibc's adaptive mmap threshold otherwise depends on each process's history).
        "MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(1 << 30),
        "MALLOC_TOP_PAD_": str(64 << 20),
    }
    for key in ("CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "CUDA_HOME", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                "OPENBLAS_NUM_THREADS", "NVIDIA_VISIBLE_DEVICES", "EVOTEAM_BENCH_NO_LANDLOCK"):
        if os.environ.get(key):
            env[key] = os.environ[key]
    env.update(extra or {})
    return env


class WorkerProc:
    """One worker process, in its own session (process group), with its output drained and
    capped, its memory watched and every request under a deadline."""

    def __init__(self, label: str, init: dict, scratch: Path, memory_mb: int | None,
                 extra_env: dict[str, str] | None = None):
        self.label = label
        self.memory_mb = memory_mb
        self.reason: str | None = None
        self.tail = bytearray()
        self.printed = 0
        p_r, c_w = os.pipe()  # child -> parent
        c_r, p_w = os.pipe()  # parent -> child
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-B", "-m", "evoteam.servers.bench.worker", str(c_r), str(c_w)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            pass_fds=(c_r, c_w), cwd=str(scratch), env=_worker_env(scratch, extra_env),
            start_new_session=True, close_fds=True)
        os.close(c_r)
        os.close(c_w)
        self.wfd = p_w
        self.reader = protocol.FrameReader(p_r)
        self.rfd = p_r
        self._stop = threading.Event()
        threading.Thread(target=self._drain, daemon=True).start()
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

    # -------------------------------------------------------- requests

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def _death(self) -> WorkerFailure:
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.proc.wait()
        if self.reason:
            return WorkerFailure("RUNTIME_ERROR", self.reason, fatal=True)
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
            msg += "; last output:\n" + tail
        return WorkerFailure("RUNTIME_ERROR", msg, fatal=True)

    def read(self, timeout: float, what: str) -> tuple[dict, dict]:
        deadline = time.monotonic() + timeout
        try:
            header, arrays = self.reader.read(deadline)
        except protocol.PeerTimeout:
            self.kill()
            raise WorkerFailure("TIMEOUT", f"the {self.label} did not finish {what} within {timeout:g} s "
                                "(a hang, or far too slow) and was stopped", fatal=True) from None
        except protocol.PeerClosed:
            raise self._death() from None
        except protocol.ProtocolError as exc:
            self.kill()
            raise WorkerFailure("RUNTIME_ERROR", f"the {self.label} sent malformed data to the harness ({exc})",
                                flagged=True, fatal=True) from None
        if self.reason:  # flooded or over memory but still answered
            self.kill()
            raise WorkerFailure("RUNTIME_ERROR", self.reason, fatal=True)
        violations = header.get("violations") or []
        if violations:
            raise WorkerFailure("RUNTIME_ERROR", f"{violations[0]} (this evaluation is flagged)", flagged=True)
        if not header.get("ok", False):
            raise WorkerFailure(str(header.get("status", "RUNTIME_ERROR")), str(header.get("message", "failed")),
                                flagged=bool(header.get("flagged")))
        return header, arrays

    def request(self, msg: dict, timeout: float, what: str, arrays: dict | None = None) -> tuple[dict, dict]:
        try:
            protocol.write_frame(self.wfd, msg, arrays)
        except (BrokenPipeError, OSError):
            raise self._death() from None
        return self.read(timeout, what)

    def close(self) -> None:
        self._stop.set()
        if self.proc.poll() is None:
            try:
                protocol.write_frame(self.wfd, {"cmd": "exit"})
                self.proc.wait(timeout=2)
            except Exception:
                pass
        self.kill()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        for fd in (self.wfd, self.rfd):
            try:
                os.close(fd)
            except OSError:
                pass
        if self.proc.stdout:
            try:
                self.proc.stdout.close()
            except OSError:
                pass


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


class KernelSession:
    """A candidate worker and a trusted worker for one evaluation of one kernel kit."""

    def __init__(self, *, definition: dict, framework: str, device: str, inputs_source: str | None,
                 reference_source: str, baseline: dict | None, candidate_dir: Path, candidate_file: str,
                 function: str, dps: bool | None, deny: list[str], memory_mb: int, timeouts, tolerance,
                 timing, use_landlock: bool = True, threads: int | None = None):
        self.tolerance = tolerance
        self.timeouts = timeouts
        self.timing = timing
        self.device = device
        self.gpu = device.startswith("cuda")
        self.sandbox = ""
        self.trusted_dir = Path(tempfile.mkdtemp(prefix="evoteam-trusted-"))
        self.candidate_dir = candidate_dir
        public_def = {"inputs": definition["inputs"], "outputs": definition["outputs"]}
        env = {}
        if threads and not self.gpu:
            env = {k: str(threads) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
        common = {"framework": framework, "device": device, "inputs_source": inputs_source,
                  "definition": public_def}
        self.trusted = WorkerProc("reference/baseline worker", dict(common, mode="trusted",
                                  reference_source=reference_source, baseline=baseline),
                                  self.trusted_dir, None if self.gpu else max(memory_mb, 8192), extra_env=env)
        cand_mem = memory_mb
        self.candidate = WorkerProc("candidate", dict(common, mode="candidate",
                                    solution={"dir": str(candidate_dir), "file": candidate_file,
                                              "function": function, "dps": dps},
                                    sandbox={"scratch": str(candidate_dir), "deny": deny,
                                             "memory_mb": None if self.gpu else cand_mem,
                                             "landlock": use_landlock}),
                                    candidate_dir, cand_mem, extra_env=env)
        self.candidate_error: WorkerFailure | None = None
        self.dead = False

    def start(self) -> None:
        try:
            header, _ = self.trusted.read(self.timeouts.startup_s, "loading the reference")
        except WorkerFailure as exc:
            raise RuntimeError(f"the kit's reference/baseline failed to load: {exc.message}") from None
        try:
            header, _ = self.candidate.read(self.timeouts.startup_s, "importing the candidate")
            self.sandbox = header.get("sandbox", "")
        except WorkerFailure as exc:
            self.candidate_error = exc
            self.dead = True

    def close(self) -> None:
        for w in (self.candidate, self.trusted):
            w.close()
        shutil.rmtree(self.trusted_dir, ignore_errors=True)

    # -------------------------------------------------------- steps

    def _cand(self, msg: dict, what: str):
        try:
            return self.candidate.request(msg, self.timeouts.workload_s, what)
        except WorkerFailure as exc:
            if exc.fatal:
                self.dead = True
                self.candidate_error = exc
            raise

    def _trusted(self, msg: dict, what: str):
        try:
            return self.trusted.request(msg, max(self.timeouts.workload_s, 120.0), what)
        except WorkerFailure as exc:
            raise RuntimeError(f"the kit's {msg.get('who', 'reference')} failed on {what}: {exc.message}") from None

    def check_correctness(self, wl: WorkloadSpec) -> WorkloadVerdict:
        v = WorkloadVerdict()
        tol = self.tolerance
        for round_no in range(2):  # candidate -> reference -> candidate, each on a fresh seed
            seed = new_seed()
            msg = {"cmd": "call", "axes": wl.axes, "scalars": wl.scalars, "seed": seed}
            try:
                ch, ca = self._cand(dict(msg, who="candidate"), f"workload {wl.name}")
            except WorkerFailure as exc:
                return WorkloadVerdict(exc.status, exc.message, exc.flagged)
            rh, ra = self._trusted(dict(msg, who="reference"), f"workload {wl.name}")
            if ch.get("digest") != rh.get("digest"):
                return WorkloadVerdict("RUNTIME_ERROR", "the inputs generated in the candidate's process differ "
                                       "from the harness's: the input generator was tampered with "
                                       "(this evaluation is flagged)", True)
            check = compare_outputs(ch["outputs"], ca, rh["outputs"], ra, wl.expected, tol.atol, tol.rtol,
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

    def measure(self, wl: WorkloadSpec, v: WorkloadVerdict, rng: secrets.SystemRandom | None = None) -> None:
        """Interleaved timing of baseline and candidate, then a spot check of one timed call."""
        rng = rng or secrets.SystemRandom()
        plan = self.timing
        samples = {"baseline": [], "candidate": []}
        walls = {"baseline": [], "candidate": []}
        harness_wall = {"baseline": 0, "candidate": 0}
        spot_round, spot_index = rng.randrange(plan.rounds), rng.randrange(plan.reps_per_round)
        spot_seed, spot_out = None, None
        for r in range(plan.rounds):
            order = ("baseline", "candidate") if r % 2 == 0 else ("candidate", "baseline")
            for side in order:
                seeds = [new_seed() for _ in range(plan.reps_per_round)]
                warm = [new_seed() for _ in range(plan.warmup)] if r == 0 else []
                prep = {"cmd": "prepare", "who": side, "axes": wl.axes, "scalars": wl.scalars, "seeds": seeds,
                        "warmup_seeds": warm}
                what = f"timing workload {wl.name}"
                if side == "candidate":
                    self._cand(prep, what)
                    t0 = time.perf_counter_ns()
                    h, _ = self._cand({"cmd": "go"}, what)
                    harness_wall[side] += time.perf_counter_ns() - t0
                    index = spot_index if r == spot_round else -1
                    rh, ra = self._cand({"cmd": "reveal", "index": index}, what)
                    if index >= 0:
                        spot_seed, spot_out = seeds[index], (rh["outputs"], ra)
                else:
                    self._trusted(prep, what)
                    t0 = time.perf_counter_ns()
                    h, _ = self._trusted({"cmd": "go", "who": side}, what)
                    harness_wall[side] += time.perf_counter_ns() - t0
                    self._trusted({"cmd": "reveal", "index": -1, "who": side}, what)
                samples[side] += [int(s) for s in h["samples_ns"]]
                walls[side] += [int(s) for s in h.get("wall_ns") or []]
        # The harness's own clock bounds what the candidate's process reported.
        reported = sum(samples["candidate"])
        wall = harness_wall["candidate"]
        # Scheduling delays on a busy machine only ever add to the harness's figure, so the lower
        # bound is loose (a quarter): it catches a faked clock, not a slow pipe.
        if not self.gpu and (reported > 1.05 * wall + 1e6 or reported < 0.25 * wall - 2e6 * plan.rounds):
            raise WorkerFailure("RUNTIME_ERROR", f"timer tampering suspected: the candidate's process reported "
                                f"{reported / 1e6:.2f} ms of kernel time for calls the harness clocked at "
                                f"{wall / 1e6:.2f} ms (this evaluation is flagged)", flagged=True)
        # Spot check: one timed call, chosen after the fact, must match the reference too.
        if spot_out is not None:
            rh, ra = self._trusted({"cmd": "call", "who": "reference", "axes": wl.axes, "scalars": wl.scalars,
                                    "seed": spot_seed}, f"workload {wl.name}")
            tol = self.tolerance
            check = compare_outputs(spot_out[0], spot_out[1], rh["outputs"], ra, wl.expected, tol.atol, tol.rtol,
                                    tol.required_matched_ratio)
            if check.status != "PASSED":
                raise WorkerFailure(check.status, f"a timed call returned a wrong result ({check.message}); "
                                    "outputs must be computed on every call", flagged=True)
        use = samples
        if self.gpu and walls["candidate"]:
            ev, wa = statistics.median(samples["candidate"]), statistics.median(walls["candidate"])
            if wa > 1.25 * ev + 30_000:
                use = walls
                v.notes.append("work outside the timed stream detected; both sides timed with device-wide "
                               "synchronisation")
                v.flagged = True
        base_ns = statistics.median(use["baseline"])
        cand_ns = statistics.median(use["candidate"])
        v.baseline_ms = base_ns / 1e6
        v.candidate_ms = cand_ns / 1e6
        v.speedup = base_ns / cand_ns if cand_ns > 0 else math.inf
        v.kernel_s = (sum(samples["baseline"]) + sum(samples["candidate"])) / 1e9


# ---------------------------------------------------------------- program kits


def _decode_value(value: Any, arrays: dict[str, np.ndarray]) -> Any:
    if isinstance(value, dict):
        if set(value) == {"__array__"}:
            return np.array(arrays[value["__array__"]])
        if set(value) == {"__float__"}:
            return float(value["__float__"])
        return {k: _decode_value(v, arrays) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode_value(v, arrays) for v in value]
    return value


def run_program_worker(program: Path, function: str, kwargs: dict, timeout_s: float, memory_mb: int,
                       deny: list[str], use_landlock: bool = True) -> Any:
    scratch = Path(tempfile.mkdtemp(prefix="evoteam-program-"))
    try:
        shutil.copyfile(program, scratch / "program.py")
        w = WorkerProc("program", {"mode": "program", "framework": "numpy",
                                   "solution": {"dir": str(scratch), "file": "program.py", "function": function,
                                                "dps": False},
                                   "sandbox": {"scratch": str(scratch), "deny": deny, "memory_mb": memory_mb,
                                               "landlock": use_landlock}},
                       scratch, memory_mb)
        try:
            start = time.monotonic()
            w.read(min(timeout_s, 120.0), "importing the program")
            left = max(1.0, timeout_s - (time.monotonic() - start))
            header, arrays = w.request({"cmd": "program", "kwargs": kwargs}, left, f"{function}()")
            return _decode_value(header.get("result"), arrays)
        finally:
            w.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def run_evaluator(evaluator: Path, program: Path, timeout_s: float, memory_mb: int, deny: list[str],
                  options: dict | None = None) -> dict:
    """Run a program kit's ``evaluate(program_path)`` in a worker of its own. Returns metrics, or
    raises WorkerFailure. With ``options`` (see bench/openevolve.py ``run_evaluation``) it returns
    the whole evaluation: metrics, artifacts, stages and any failure."""
    scratch = Path(tempfile.mkdtemp(prefix="evoteam-evaluator-"))
    try:
        env = {"EVOTEAM_BENCH_PROGRAM_TIMEOUT": str(timeout_s), "EVOTEAM_BENCH_MEMORY_MB": str(memory_mb),
               "EVOTEAM_BENCH_DENY": os.pathsep.join(deny)}
        w = WorkerProc("kit evaluator", {"mode": "evaluator", "evaluator": str(evaluator), "program": str(program),
                                         "env": env, "options": options}, scratch, None, extra_env=env)
        try:
            w.read(60.0, "loading the evaluator")
            header, _ = w.request({"cmd": "evaluate"}, timeout_s + 30.0, "evaluating the program")
            return header["evaluation"] if options is not None else header["metrics"]
        finally:
            w.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
