"""One kernel evaluation's workers, and the one call path every timed call goes through.

A session holds a trusted worker (the kit's reference and input generator, unconfined; never
timed) and N *timed sides*: the kit's baseline and one or more candidates, each in a confined
worker of its own (own uid, seccomp, Landlock, cgroup). The baseline is trusted code, yet it runs
confined exactly like a candidate, so both ends of a speedup pay the same call path by
construction (the same seccomp filter, audit hook, Landlock and cgroup thaw). The empty call
path is measured in a worker of its own (the *empty-call worker*): the baseline's files again,
confined the same way under a uid of its own, called on the same path but never timed as a side.
So no candidate controls it or can reach it, and no timed side's call ever follows a call in its
own process because of the empty calls (until 2026-12-02 they did: on the baseline's worker).

Every timed call: the harness writes the call's inputs into the side's shared area while it is
stopped, reads its clock, resumes the worker and asks for the call, stops the worker the moment
it answers, reads its clock again, then reads the outputs out of the stopped process and checks
that the inputs are unchanged. While one side runs, every other worker is stopped.
The timed rounds are interleave.py's (part of KernelSession), estimates timing.py's, names sides.py's.
"""

from __future__ import annotations

import json
import os
import random
import secrets
import shutil
import threading
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from evoteam.servers.bench.confinement import scratch
from evoteam.servers.bench.measurement import arena, callclock, sparepool, trustedpool
from evoteam.servers.bench.measurement.arena import LABELS, Payload, align
from evoteam.servers.bench.measurement.checks import CorrectnessChecks
from evoteam.servers.bench.measurement.interleave import InterleavedRounds
from evoteam.servers.bench.measurement.pinning import pin_threads
from evoteam.servers.bench.measurement.sides import (  # noqa: F401 - the names callers import from here
    BASELINE, CANDIDATE, EMPTY, Side, SideSpec, WorkloadSpec, WorkloadVerdict, new_seed, worker_name)
from evoteam.servers.bench.confinement.workerenv import tuning_env
from evoteam.servers.bench.measurement.workerproc import WorkerFailure, WorkerProc, verify_confinement


# How long a timed call's waits poll before sleeping, when the harness has CPUs of its own
# (apart()): longer than most short kernels, after which a late wake-up costs under a percent.
POLL_S = 0.02
# Polling pays only where CPUs go idle; on a busy machine a polling thread has used its share
# when the reply comes and waits for another process's time slice, where a sleeping one would
# have been woken at once. Measured at load 7-9 (2 cores): rmsnorm_cpu candidate medians 2.1x
# those of the sleeping harness. So apart() polls only below this load average per usable core.
QUIET_LOAD_PER_CORE = 0.75


def machine_busy() -> bool:
    """Whether other work keeps this process's CPUs busy (1-minute load average per usable core)."""
    return os.getloadavg()[0] > QUIET_LOAD_PER_CORE * max(1, len(os.sched_getaffinity(0)))


def _baseline_folder(baseline: dict | None, reference_source: str) -> SideSpec:
    """The baseline's own files in a scratch folder of their own (its worker is confined like a
    candidate's and reads nothing of the kit): the baseline file and the Python files beside it,
    or the reference itself when the kit names no baseline."""
    folder = scratch.new_folder("baseline")
    try:
        if baseline is None:
            (folder / "baseline.py").write_text(reference_source)
            return SideSpec(BASELINE, folder, "baseline.py", "run", False)
        src = Path(baseline["dir"])
        for path in src.glob("*.py"):
            if path.is_file():
                shutil.copyfile(path, folder / path.name)
    except BaseException:  # a full disk: nothing half-made stays
        scratch.remove_folder(folder)
        raise
    return SideSpec(BASELINE, folder, baseline["file"], baseline.get("function") or "run", baseline.get("dps"))


class KernelSession(CorrectnessChecks, InterleavedRounds):
    """The workers of one kernel evaluation: a trusted worker (reference, inputs) and the timed
    sides (the baseline first, then each candidate). ``candidate_*`` names the one candidate of a
    plain evaluation; ``sides`` gives several (a comparison, a re-measurement)."""

    def __init__(self, *, definition: dict, framework: str, device: str, inputs_source: str | None,
                 reference_source: str, baseline: dict | None, deny: list[str], memory_mb: int, timeouts,
                 tolerance, timing, candidate_dir: Path | None = None, candidate_file: str | None = None,
                 function: str | None = None, dps: bool | None = None, sides: list[SideSpec] | None = None,
                 use_landlock: bool = True, threads: int | None = None, worker_env: dict[str, str] | None = None,
                 kit_hash: str | None = None, baseline_copies: tuple[str, ...] = ()):
        self.tolerance = tolerance
        self.timeouts = timeouts
        self.memory_mb = memory_mb
        self.timing = timing
        self.device = device
        self.gpu = device.startswith("cuda")
        self.threads = threads
        self.sandbox = ""
        self.out_names = list(definition["outputs"].keys())
        if sides is None:
            sides = [SideSpec(CANDIDATE, candidate_dir, candidate_file, function, dps)]
        labels = [s.label for s in sides]
        if BASELINE in labels or len(set(labels)) != len(labels):
            raise ValueError(f"side labels must be unique and not {BASELINE!r}: {labels}")
        base_spec = _baseline_folder(baseline, reference_source)
        self._owned = [base_spec.folder]
        # The empty-call worker's own copy of the baseline's files: it imports the same code, so
        # its process looks like a timed side's, but it never shares a folder or a uid with one.
        # Then the baseline's other processes where it is timed in several (copies.py), each with
        # its files in a folder of its own, timed as sides under these labels.
        made: list[SideSpec] = []
        try:
            for label in (EMPTY, *baseline_copies):
                made.append(_baseline_folder(baseline, reference_source))
                made[-1].label = label
                self._owned.append(made[-1].folder)
        except BaseException:
            for folder in self._owned:
                scratch.remove_folder(folder)
            raise
        empty_spec, copied = made[0], made[1:]
        public_def = {"inputs": definition["inputs"], "outputs": definition["outputs"]}
        # One environment for every worker: the same allocator policy and thread counts, or the
        # speedup would reflect them (workerenv.py).
        env = self.worker_env = tuning_env(threads, self.gpu, worker_env)
        common = {"framework": framework, "device": device, "definition": public_def}
        # The trusted worker and its staging area: kept from an earlier evaluation of this kit in
        # this process where there is one (trustedpool.py: it only ever runs kit code). Only with
        # the kit's content hash: its code strings do not say what it reads from disk (blobs).
        try:
            self.lease = trustedpool.lease(dict(common, mode="trusted", inputs_source=inputs_source,
                                                reference_source=reference_source, baseline=None),
                                           env, None if self.gpu else max(memory_mb, 8192),
                                           poolable=not self.gpu and kit_hash is not None, kit_hash=kit_hash)
        except BaseException:  # no trusted worker: the baseline's folders made above go too
            for folder in self._owned:
                scratch.remove_folder(folder)
            raise
        try:
            # The baseline's other processes start in a drawn order among the (drawn) given sides.
            started = random.sample([*sides, *copied], len(sides) + len(copied)) if copied else sides
            self._start_sides(common, env, base_spec, empty_spec, started, deny, memory_mb, use_landlock, copied)
        except BaseException:
            # Never handed back: the session that leased it did not start (nor do its sides stay).
            for side in getattr(self, "sides", []):
                side.worker.close()
            if getattr(self, "empty", None) is not None:
                self.empty.worker.close()
            self.lease.close()
            for folder in self._owned:
                scratch.remove_folder(folder)
            raise

    def _start_sides(self, common, env, base_spec, empty_spec, sides, deny, memory_mb, use_landlock,
                     copied: list[SideSpec]) -> None:
        from evoteam.servers.bench.confinement.jail import can_drop_privileges, pick_uid

        self.trusted = self.lease.worker
        # Held by every use of the trusted worker and tried by close(): a cancelled evaluation's
        # thread runs on after close (asyncio cannot stop it), and the worker, kept for the next
        # evaluation, must never get that thread's requests beside the next one's (trustedpool.py).
        self._trusted_lock = threading.Lock()
        self.closed = False
        self.staging_fd = self.lease.staging_fd
        self.staging_map = None
        self.staging_size = 0
        self.sides: list[Side] = []
        self.empty: Side | None = None
        self.spares_taken = 0
        for spec in [base_spec, empty_spec, *sides]:
            is_base = spec is base_spec or spec is empty_spec or any(spec is c for c in copied)
            uid = pick_uid() if can_drop_privileges() else None
            if uid is not None:
                for path in [spec.folder, *spec.folder.rglob("*")]:
                    os.chown(path, uid, uid)
            label = worker_name(spec.label)
            init = dict(common, mode="candidate", label=f"the {label}",
                        solution={"dir": str(spec.folder), "file": spec.file, "function": spec.function,
                                  "dps": spec.dps},
                        sandbox={"scratch": str(spec.folder), "deny": deny,
                                 "memory_mb": None if self.gpu else memory_mb, "landlock": use_landlock,
                                 "uid": uid, "private_tmp": uid is not None})
            # A spare started after an earlier evaluation where this process keeps them
            # (sparepool.py), told now what it is; else a worker started now. Same frame either way.
            w = None if self.gpu else sparepool.take(env, memory_mb)
            if w is not None:
                self.spares_taken += 1
                w.begin(init, spec.folder, label, untrusted_code=not is_base)
            else:
                w = WorkerProc(label, init, spec.folder, memory_mb, extra_env=env, untrusted_code=not is_base,
                               arena=True)
            if spec is empty_spec:
                self.empty = Side(EMPTY, w, trusted_code=True)
            else:
                self.sides.append(Side(spec.label, w, trusted_code=is_base,
                                       baseline_copy=any(spec is c for c in copied)))
        self.sched: dict[str, tuple] = {}
        self.read_by_pipe = False
        self.nulls: dict[str, list[int]] = {}  # workload -> every empty call's time (the empty-call worker)
        self.checks_for: tuple | None = None  # the workload whose correctness checks are kept (checks.py)
        self.checks: dict[int, tuple[Payload, dict[str, np.ndarray]]] = {}
        self.pinned: list[int] = []
        self.clock = "wall"  # how timed calls are read (callclock.py); set once the workers are up
        self.harness_cpus: list[int] = []
        # Which elements of a timed output are compared: drawn after each call, from a seed no worker sees.
        self.rng = np.random.default_rng(secrets.randbits(128))

    # -------------------------------------------------------- the sides

    @property
    def baseline(self) -> Side:
        return self.sides[0]

    def side(self, label: str) -> Side:
        return next(s for s in self.sides if s.label == label)

    @property
    def candidates(self) -> list[Side]:
        return self.sides[1:]

    @property
    def candidate(self) -> WorkerProc:  # the (first) candidate's worker
        return self.sides[1].worker

    @property
    def dead(self) -> bool:
        return self.sides[1].dead

    @property
    def candidate_error(self) -> WorkerFailure | None:
        return self.sides[1].error

    def _called(self) -> list[Side]:
        """Every worker called on the timed path: the timed sides and the empty-call worker."""
        return [*self.sides, self.empty]

    def _workers(self) -> list[WorkerProc]:
        return [self.trusted, *(s.worker for s in self._called())]

    # -------------------------------------------------------- life

    def start(self) -> None:
        if not self.lease.reused:  # a kept worker loaded the reference long ago (trustedpool.py)
            with self._trusted_lock:
                self._refuse_if_closed("loading the reference")
                try:
                    self.trusted.read(self.timeouts.startup_s, "loading the reference")
                except WorkerFailure as exc:
                    self.lease.healthy = False
                    raise RuntimeError(f"the kit's reference failed to load: {exc.message}") from None
                finally:
                    self.trusted.jail.stop()
                    self.trusted.jail.hold()
        for s in self._called():
            try:
                header, _ = s.worker.read(self.timeouts.startup_s, f"importing the {s.worker.label}")
                s.dps = header.get("dps") is True
                if not s.trusted_code:
                    desc = header.get("sandbox", "")
                    if not self.sandbox:
                        self.sandbox = (desc if isinstance(desc, str) else "")[:300] + "+" + s.worker.jail.describe()
            except WorkerFailure as exc:
                if s.trusted_code and not s.baseline_copy:
                    where = " (as the empty-call worker)" if s is self.empty else ""
                    raise RuntimeError(f"the kit's baseline failed to load in its sandbox{where}: {exc.message}") from None
                s.error, s.dead = exc, True
            finally:
                s.worker.jail.stop()
                s.worker.jail.hold()
        # Where the harness cannot read a stopped worker's memory, outputs come back through the
        # pipe inside the timed call instead (same for every side; slower, still sound).
        self.read_by_pipe = any(s.worker.jail.mem_fd is None for s in self._called())
        if self.read_by_pipe:
            self.sandbox += "+OUTPUTS-BY-PIPE(cannot read worker memory)"
        self.pinned = self._pin_timed_workers()
        # One clock for every timed worker, empty calls included, or the subtraction mixes two; and
        # one CPU, where a cgroup's CPU time is a duration (callclock.py).
        workers = [s.worker for s in self._called()]
        self.clock = "cpu-guarded" if len(self.pinned) == 1 and callclock.cpu_guarded_wanted() and workers and all(
            w.jail.cgroup is not None for w in workers) else "wall"
        for w in workers:
            w.cpu_clock = self.clock == "cpu-guarded"
        # The CPUs the harness may use that no timed worker runs on: there its waits inside a
        # timed call can poll without taking a worker's CPU (apart()).
        self.harness_cpus = sorted(os.sched_getaffinity(0) - set(self.pinned)) if self.pinned else []
        for w in self._workers():
            try:
                self.sched[w.label] = self._sched_of(w)
            except OSError:
                pass
        for s in self.candidates:
            if not s.dead:
                self.sandbox += verify_confinement(s.worker.proc.pid)
                break
        # Spares another evaluation of this process asked for import now: never beside timing.
        sparepool.settle()

    def _pin_timed_workers(self) -> list[int]:
        """Every timed worker, with the processes it forked at import, on the same CPUs (as many as
        the kit's threads), chosen before any timing: the scheduler otherwise tends to wake each
        process on the core it last ran on, and two cores of a shared machine are rarely equally
        busy (a steady difference between identical sides that no number of rounds removes); and a
        forked helper on another CPU would run part of each call in parallel. Later forks inherit
        the pinning (the filter refuses sched_setaffinity). Nothing is pinned when the kit leaves
        threads to the libraries, or where the harness may not set affinity."""
        if self.gpu or not self.threads:
            return []
        cpus = sorted(os.sched_getaffinity(0))[-self.threads:]
        pids = [pid for s in self._called() if not s.dead
                for pid in dict.fromkeys([s.worker.proc.pid, *s.worker.jail.members()])]
        return cpus if pin_threads(pids, cpus) else []

    @contextmanager
    def apart(self):
        """While timing: the calling thread on CPUs no timed worker uses, and the timed workers'
        waits (for the reply, for the stop) polling instead of sleeping (workerproc.py). Where
        there are no such CPUs (workers not pinned, or pinned to every CPU there is), nothing
        changes: polling there could take the very CPU a worker needs; nor on a busy machine
        (machine_busy), where it would make the harness late."""
        if not self.harness_cpus or machine_busy():
            yield
            return
        before = os.sched_getaffinity(0)
        try:
            os.sched_setaffinity(0, self.harness_cpus)
        except OSError:
            yield
            return
        for s in self._called():
            s.worker.spin_s = POLL_S
        try:
            yield
        finally:
            for s in self._called():
                s.worker.spin_s = 0.0
            os.sched_setaffinity(0, before)

    def close(self) -> None:
        if self.closed:  # a second close would hand the worker back again, perhaps in use by then
            return
        # A thread still using the trusted worker (a cancelled evaluation's) means it is not idle:
        # killed, not kept. Otherwise every later use is refused (_refuse_if_closed).
        idle = self._trusted_lock.acquire(blocking=False)
        self.closed = True
        if idle:
            self._trusted_lock.release()
        else:
            self.lease.healthy = False
        # All at once: each close waits until its worker's processes are gone and its cgroup removed.
        threads = [threading.Thread(target=w.close) for w in self._workers()[1:]]
        for t in threads:
            t.start()
        try:
            self.staging_map = None
            self.lease.release()  # kept for this kit's next evaluation, or killed (trustedpool.py)
        finally:
            for t in threads:
                t.join()
            for folder in self._owned:
                scratch.remove_folder(folder)
        if not self.gpu:  # for the next evaluation, now that this one's workers are gone
            sparepool.refill(self.worker_env, self.memory_mb, len(self._called()))

    # -------------------------------------------------------- helpers

    @staticmethod
    def _sched_of(w: WorkerProc) -> tuple:
        from evoteam.servers.bench.confinement.jail import sched_state

        pid = w.proc.pid
        states = [sched_state(int(t)) for t in sorted(os.listdir(f"/proc/{pid}/task"))]
        return tuple(sorted(set(states)))

    def _check_sched(self) -> None:
        """Every worker's nice value, CPU affinity and scheduling policy must be what they were at
        start: anything else means someone tried to tilt the timing."""
        for w in self._workers():
            before = self.sched.get(w.label)
            if before is None:
                continue
            try:
                now = self._sched_of(w)
            except OSError:
                continue
            if now != before:
                if w is self.trusted:
                    self.lease.healthy = False  # never kept for another evaluation (trustedpool.py)
                raise WorkerFailure("RUNTIME_ERROR", f"the {w.label}'s scheduling (nice value, CPU affinity or "
                                    f"policy) changed during the evaluation: {before} -> {now}; timings are not "
                                    "comparable (this evaluation is flagged)", flagged=True)

    def _request(self, s: Side, msg: dict, what: str, timed: bool = False):
        try:
            return s.worker.request(msg, self.timeouts.workload_s, what, timed=timed)
        except WorkerFailure as exc:
            if s.trusted_code and not s.baseline_copy:
                raise RuntimeError(f"the kit's baseline failed on {what}: {exc.message}") from None
            if exc.fatal:
                s.dead, s.error = True, exc
            raise

    def _trusted(self, msg: dict, what: str):
        with self._trusted_lock:
            self._refuse_if_closed(what)
            try:
                return self.trusted.request(msg, max(self.timeouts.workload_s, 120.0), what)
            except WorkerFailure as exc:
                self.lease.healthy = False
                raise RuntimeError(f"the kit's {msg.get('who', 'reference')} failed on {what}: {exc.message}") from None

    def _refuse_if_closed(self, what: str) -> None:
        if self.closed:
            raise RuntimeError(f"the evaluation was closed before {what}")

    def _stage(self, wl: WorkloadSpec, count: int) -> list[Payload]:
        """Fresh inputs for ``count`` calls, made by the trusted worker in one request straight into
        the staging area both processes map. The payloads are views of that area, valid until the
        next _stage or _reference."""
        seeds = [new_seed() for _ in range(count)]
        h, _ = self._trusted({"cmd": "stage", "axes": wl.axes, "scalars": wl.scalars, "seeds": seeds},
                             f"making inputs for {wl.name}")
        batches, size = h.get("batches"), h.get("size")
        if not isinstance(batches, list) or len(batches) != count or not isinstance(size, int):
            self.lease.healthy = False
            raise RuntimeError(f"the kit's input generator returned malformed inputs for {wl.name}")
        whole = self._staging(size)
        return [self._payload(specs, whole) for specs in batches]

    def _staging(self, size: int) -> np.ndarray:
        """The staging area as bytes, mapped again when the trusted worker has grown it."""
        import mmap

        if size > self.staging_size:
            self.staging_map = mmap.mmap(self.staging_fd, size, prot=mmap.PROT_READ)
            self.staging_size = size
        return np.frombuffer(self.staging_map, dtype=np.uint8)

    @staticmethod
    def _payload(specs: list[dict], whole: np.ndarray) -> Payload:
        blobs = {s["name"]: whole[s["offset"]:s["offset"] + s["nbytes"]] for s in specs if "scalar" not in s}
        return Payload([{k: v for k, v in s.items() if k not in ("offset", "nbytes")} for s in specs], blobs)

    def _layout(self, s: Side, payload: Payload, wl: WorkloadSpec) -> dict:
        """Place the inputs (and output slots, when every output shape is known) in the side's
        shared area; tell the worker when the layout changes."""
        w = s.worker
        # The same workload gives the same layout on every call: built once per side and
        # workload, not ~80 times an evaluation (it was ~90 us a call, outside the clock).
        sig = (wl.name, tuple((spec["name"], spec.get("dtype"), tuple(spec.get("shape") or ()), spec.get("scalar"),
                               int(payload.blobs[spec["name"]].nbytes) if "scalar" not in spec else -1)
                              for spec in payload.specs))
        cached = w.layout_cache
        if cached is not None and cached[0] == sig:
            return cached[1]
        specs, off = [], 0
        for spec in payload.specs:
            if "scalar" in spec:
                specs.append(dict(spec))
                continue
            n = int(payload.blobs[spec["name"]].nbytes)
            specs.append(dict(spec, offset=off, nbytes=n))
            off = align(off + n)
        outs = []
        if all(shape is not None for shape, _ in wl.expected.values()):
            for name in self.out_names:
                shape, dtype = wl.expected[name]
                n = int(np.prod(shape, dtype=np.int64)) * np.dtype(LABELS.get(dtype, np.float32)).itemsize
                outs.append({"name": name, "dtype": dtype, "shape": list(shape), "offset": off, "nbytes": n})
                off = align(off + n)
        layout = {"inputs": specs, "outputs": outs, "size": off, "who": "candidate"}
        key = json.dumps(layout, sort_keys=True)
        w.arena(max(off, 64))
        if w.layout_key != key:
            self._request(s, dict(layout, cmd="arena"), "setting up inputs")
            w.layout_key = key
            w.nan_fill = {}
        w.layout_cache = (sig, layout)
        return layout

    def _call(self, s: Side, wl: WorkloadSpec, payload: Payload, what: str, calibrate: bool = False,
              slot="call") -> tuple[list[dict], dict[str, np.ndarray], int]:
        """One call through the common path. Returns the outputs and the harness-clocked time. The
        outputs lie in buffers kept for ``slot`` (arena.capture): valid until the next call of
        this side with the same slot."""
        w = s.worker
        layout = self._layout(s, payload, wl)
        if not calibrate:  # an empty call reads no input and writes no output: nothing to fill
            arena.fill(w, layout, payload, outputs=s.dps)
        msg = {"cmd": "tcall", "calibrate": calibrate, "send": self.read_by_pipe}
        header, arrays, ns = self._request(s, msg, what, timed=True)
        if calibrate:
            return [], {}, ns  # nothing was computed: nothing to read or check
        meta, got = arena.capture(w, self.out_names, self.read_by_pipe, header, arrays, wl.expected, slot)
        # The kit's baseline is trusted and has an area of its own: only a candidate's inputs are
        # compared with what was written.
        changed = None if s.trusted_code else arena.inputs_unchanged(w, layout, payload)
        if changed is not None:
            raise WorkerFailure("RUNTIME_ERROR", f"the {w.label} modified its input {changed!r}; inputs must be "
                                "left unchanged (work on a copy)", flagged=True)
        return meta, got, ns
