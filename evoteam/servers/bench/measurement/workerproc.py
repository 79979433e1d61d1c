"""One worker process as the harness holds it: started in its own process group (and cgroup),
its output drained and capped, its memory watched, every request under a deadline, and stopped
between requests. How a worker fails, in words for the evaluation, is here too. harness.py builds
on this (device locks, program kits); session.py times calls through ``WorkerProc.request``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from evoteam.servers.bench.measurement import callclock, protocol, replies
from evoteam.servers.bench.measurement.owntime import OwnTimeDeadline
from evoteam.servers.bench.confinement.workerenv import tuning_env

OUTPUT_CAP_BYTES = 1 << 20  # what a worker may print before it is stopped
PIPE_EARLY_BYTES = 1 << 15  # a message this small fits in the pipe while its reader is stopped
INIT_SEND_S = 60.0  # the start-up message goes into an empty pipe; a worker that never reads it is killed
PASSED_ENV = ("CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "CUDA_HOME", "NVIDIA_VISIBLE_DEVICES",  # what a worker
              "EVOTEAM_BENCH_NO_LANDLOCK", "EVOTEAM_BENCH_SPEC_ALLOW")  # takes from ours; a spare's key too
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


def folder_env(scratch: Path) -> dict[str, str]:
    """The variables that name a worker's folder. The start-up frame sets them again (with the
    working folder): a spare worker (sparepool.py) starts before its folder is known."""
    return {"HOME": str(scratch), "TMPDIR": str(scratch), "TRITON_CACHE_DIR": str(scratch / ".triton"),
            "TORCH_EXTENSIONS_DIR": str(scratch / ".torch_ext")}


def _worker_env(scratch: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """A small environment: no API keys or tokens reach a worker. Its allocator and thread
    variables are `workerenv.tuning_env()`'s defaults unless `extra` (the kit's tuning_env, the
    same dict for every worker of an evaluation) replaces them."""
    env = {
        "PATH": os.pathsep.join(p for p in ["/usr/local/cuda/bin", "/usr/local/bin", "/usr/bin", "/bin"]),
        "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1",
        **folder_env(scratch),
    }
    for key in PASSED_ENV:
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

    def __init__(self, label: str, init: dict | None, scratch: Path, memory_mb: int | None,
                 extra_env: dict[str, str] | None = None, untrusted_code: bool = False, arena: bool = False,
                 extra_fds: tuple[int, ...] = (), tree_memory_mb: int | None = None):
        """Start the worker in ``scratch`` and send it ``init``; with ``init`` None, a spare
        (sparepool.py): started, jailed and importing what every worker imports, told what it is
        and where by ``begin`` later. Either way nothing but this harness's frames reaches it."""
        from evoteam.servers.bench.confinement.jail import Jail

        self.label = label
        self.memory_mb = memory_mb
        self.untrusted = untrusted_code
        self.reason: str | None = None
        self.tail = bytearray()
        self.printed = 0
        self.in_flight = 0  # requests under way (a kept trusted worker is pooled only at 0: trustedpool.py)
        # A closed worker takes no request, and its pipes' numbers are freed only when no thread
        # is in a request any more: a thread still reading would otherwise read whatever pipe
        # got the number next (another worker's replies).
        self._requests = threading.Lock()
        self.closed = False
        self._fds_open = True
        # The whole tree's cap (limits.py): the worker's own, plus a little for what it starts.
        self.jail = Jail(label, tree_memory_mb or (memory_mb + 64 if memory_mb else None))
        self.arena_fd: int | None = None
        self.arena_map = None
        self.arena_size = 0
        self.layout_key = None
        self.layout_cache: tuple | None = None  # (signature, layout) of the last call (session.py)
        # How long a timed call's waits (for the reply, for the stop) poll before they sleep: set
        # by the session only while the harness thread runs on CPUs of its own (session.py), so
        # that polling never takes the CPU this worker needs.
        self.spin_s = 0.0
        # Set by the session where every timed worker has a cgroup (callclock.py): a timed call's
        # time then leaves out the worker's waits for a CPU.
        self.cpu_clock = False
        self.capture_bufs: dict = {}  # (slot, output) -> the buffer its outputs are read into (arena.py)
        pass_fds = list(extra_fds)
        if arena:
            self.arena_fd = os.memfd_create(f"evoteam-{label.split()[0]}", 0)
            pass_fds.append(self.arena_fd)
        p_r, c_w = os.pipe()  # child -> parent
        c_r, p_w = os.pipe()  # parent -> child
        for fd in (p_r, p_w):
            try:
                fcntl.fcntl(fd, 1031, 1 << 20)  # F_SETPIPE_SZ: fewer round trips for large inputs
            except OSError:
                pass
            # The harness's ends only (the worker's are other descriptions of the pipes): a read
            # or write can then never outlast a request's deadline, whatever the worker does.
            os.set_blocking(fd, False)
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-B", "-m", "evoteam.servers.bench.measurement.worker", str(c_r), str(c_w)],
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
        self.ready = False  # its first frame, sent once its imports are done, read (wait_ready)
        if init is not None:
            self.begin(init, scratch)

    def begin(self, init: dict, scratch: Path, label: str | None = None, untrusted_code: bool | None = None) -> None:
        """Tell the worker what it is (``init``) and where it works (``scratch``, and the
        variables naming it): its start-up frame, read by the harness with ``read``."""
        if label is not None:
            self.label = self.jail.label = label
        if untrusted_code is not None:
            self.untrusted = untrusted_code
        self.printed = 0  # what a spare printed while waiting counts toward nobody's cap
        self.tail.clear()
        # Watched from here on: a waiting spare is held by its cgroup's cap alone, and wakes no
        # thread of the harness while other evaluations are timed.
        threading.Thread(target=self._watch_memory, daemon=True).start()
        init = dict(init, place={"cwd": str(scratch), "env": folder_env(scratch)})
        if self.arena_fd is not None:
            init["arena_fd"] = self.arena_fd
        try:
            protocol.write_frame(self.wfd, init, deadline=time.monotonic() + INIT_SEND_S)
        except protocol.PeerTimeout:
            self.reason = f"the {self.label} did not read its start-up message within {INIT_SEND_S:g} s"
            self.kill()  # the start-up read then fails with this reason
        except OSError:
            pass  # it died at once: the start-up read reports how

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
        """The worker's exit code (negative: the signal), waiting up to ``timeout`` for it to exit
        by itself. Its group is killed before the worker is reaped: once reaped, its number is
        free, and a group can then be signalled only where the kernel signals through a pidfd."""
        self.jail.wait_exit(timeout)
        self.jail.kill_all()
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
        with self._using(what):
            return self._checked(*self._read_frame(timeout, what))

    def wait_ready(self, timeout: float) -> None:
        """Wait for the worker's first frame, which says its imports are done (worker.main)."""
        with self._using("starting"):
            self._ready_frame(OwnTimeDeadline(self.proc.pid, timeout), "starting")

    def _ready_frame(self, deadline: OwnTimeDeadline, what: str) -> None:
        if self.ready:
            return
        header, _ = self._next_frame(deadline, what, 0.0)
        if header.get("ready") is not True:
            raise self._malformed("its first frame was not the ready frame")
        self.ready = True

    def _read_frame(self, timeout: float, what: str, spin_s: float = 0.0,
                    deadline: OwnTimeDeadline | None = None) -> tuple[dict, dict]:
        """The next frame, unchecked beyond the protocol (see _checked). The deadline counts the
        worker's own time (owntime.py); request() makes it before the clock starts, since reading
        the threads' counters costs more for a worker with more threads."""
        deadline = deadline or OwnTimeDeadline(self.proc.pid, timeout)
        self._ready_frame(deadline, what)
        return self._next_frame(deadline, what, spin_s)

    def _next_frame(self, deadline: OwnTimeDeadline, what: str, spin_s: float) -> tuple[dict, dict]:
        timeout = deadline.timeout
        try:
            header, arrays = self.reader.read(deadline, spin_s)
        except protocol.PeerTimeout:
            capped = self.jail.limits.hit()
            self.kill()
            if capped:  # stuck at a cap (a fork refused, memory reclaimed): that is the cause to report
                raise WorkerFailure("RUNTIME_ERROR", f"the {self.label}: {capped}", fatal=True) from None
            waited = f"; it also waited {deadline.waited:.1f} s for a CPU, not counted" if deadline.waited >= 0.1 else ""
            raise WorkerFailure("TIMEOUT", f"the {self.label} did not finish {what} within {timeout:g} s "
                                f"of its own time (a hang, or far too slow{waited}) and was stopped",
                                fatal=True) from None
        except protocol.PeerClosed:
            raise self._death() from None
        except protocol.ProtocolError as exc:
            raise self._malformed(str(exc)) from None
        return header, arrays

    def _checked(self, header: dict, arrays: dict) -> tuple[dict, dict]:
        """A frame's common fields checked and its failure raised (request() does this after the
        stop, outside a timed call's clock)."""
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
        with self._using(what):
            return self._request(msg, timeout, what, arrays, timed)

    @contextlib.contextmanager
    def _using(self, what: str):
        """One use of the worker's pipes (a request, a read): refused once closed, and counted so
        that close() leaves the pipes to the last use to end."""
        with self._requests:
            if self.closed:
                raise WorkerFailure("RUNTIME_ERROR", f"the {self.label} was closed before {what}", fatal=True)
            self.in_flight += 1
        try:
            yield
        finally:
            with self._requests:
                self.in_flight -= 1
                last = self.closed and self.in_flight == 0
            if last:
                self._close_fds()

    def _request(self, msg: dict, timeout: float, what: str, arrays: dict | None,
                 timed: bool) -> tuple[dict, dict] | tuple[dict, dict, int]:
        data = protocol.encode(msg, arrays)
        # Outside the clock, while the worker is still stopped (it can neither read the message
        # nor run): a small message goes into the pipe and the cgroup is thawed. The clock then
        # holds only SIGCONT, the call and the stop.
        deadline = OwnTimeDeadline(self.proc.pid, timeout)  # the stopped worker's counters stand still
        begun = callclock.start(self.jail.cpu_usage_ns(), deadline.start_waits.get(str(self.proc.pid))) \
            if timed and self.cpu_clock else None
        try:
            # What the pipe takes now goes in while the worker is stopped; the rest (a large
            # message, or a pipe a worker left unread) after it is resumed, by the deadline.
            rest = self._send_now(data) if len(data) <= PIPE_EARLY_BYTES else memoryview(data)
            self.jail.thaw()
            t0 = time.perf_counter_ns()
            self.jail.resume()
            if rest:
                protocol.write_all(self.wfd, rest, deadline)
        except protocol.PeerTimeout:
            self.kill()
            raise WorkerFailure("TIMEOUT", f"the {self.label} did not read its request for {what} within "
                                f"{timeout:g} s of its own time and was stopped", fatal=True) from None
        except (BrokenPipeError, OSError):
            raise self._death() from None
        spin = self.spin_s if timed else 0.0
        try:
            header, out = self._read_frame(timeout, what, spin, deadline)
        finally:
            self.jail.stop(spin_s=spin)
            t1 = time.perf_counter_ns()
            self.jail.hold()
        capped = self.jail.limits.hit()  # outside the timed window: a cap hit anywhere in the tree fails it
        if capped:
            self.kill()
            raise WorkerFailure("RUNTIME_ERROR", f"the {self.label}: {capped}", fatal=True)
        # The reply's checks (tens of microseconds of validation) run on the stopped worker,
        # outside the clock: they decide whether the call counts, not how long it took.
        header, out = self._checked(header, out)
        if timed:
            # Read with the worker frozen: its counters stand still (callclock.py).
            cpu = self.jail.cpu_usage_ns() if begun is not None else None
            return header, out, callclock.call_ns(begun, self.proc.pid, cpu, t1 - t0)
        return header, out

    def _send_now(self, data: bytes) -> memoryview:
        """As much of ``data`` as the pipe takes without waiting; what is left."""
        view = memoryview(data)
        while view:
            try:
                n = os.write(self.wfd, view)
            except BlockingIOError:
                break
            view = view[n:]
        return view

    # -------------------------------------------------------- the shared input area

    def arena(self, size: int):
        """The harness's mapping of the worker's shared area, grown to at least ``size`` bytes."""
        import mmap

        if size > self.arena_size:
            with self._using("growing its shared area"):  # never on a closed worker's freed number
                os.ftruncate(self.arena_fd, size)
                self.arena_map = mmap.mmap(self.arena_fd, size)
                self.arena_size = size
        return self.arena_map

    def close(self) -> None:
        with self._requests:
            self.closed = True  # no new request from here on; the pipes are closed at the end
        self._stop.set()
        # Killed, not asked to exit: every answer is in, and an interpreter's teardown (tens of
        # ms with numpy or torch loaded) would only add to every evaluation. Every process of the
        # worker goes, whatever it started (daemons, stdout-holding grandchildren).
        self.jail.close()
        self._returncode(2)
        with self._requests:
            busy = self.in_flight > 0
        if not busy:  # else the last request to end closes them
            self._close_fds()
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

    def _close_fds(self) -> None:
        with self._requests:
            if not self._fds_open:
                return
            self._fds_open = False
        for fd in (self.wfd, self.rfd, self.arena_fd):
            if fd is None:
                continue
            try:
                os.close(fd)
            except OSError:
                pass
