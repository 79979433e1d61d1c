"""Jail.stop and Jail.resume as of an earlier commit against this checkout's (the pidfd change).

Both run inside a timed call's clock: resume (SIGCONT to the worker's group) just after the clock
starts, stop (SIGSTOP to the group, then waiting until the kernel reports the worker stopped)
just before it ends. Until dd53817 they signalled with killpg and waited with
waitpid(WUNTRACED | WNOHANG); now they signal through a pidfd (pidfd_send_signal with
PIDFD_SIGNAL_PROCESS_GROUP) and wait with waitid(P_PIDFD, WNOWAIT), then a second waitid takes the
stop report (confinement/pidhandle.py). This starts a child that leads its own process group,
either spinning (as a worker that has just finished a call and polls for the next frame) or asleep
in a read, and times resume and stop of both versions on it, alternating the versions round by
round. The old jail.py is read from git and loaded under another name; the modules it imports are
this checkout's (unchanged by the pidfd change). No cgroup: only the signal and wait paths.

Usage: python benchmarks/bench_jail_stop.py [--old dd53817] [--rounds 6] [--cycles 1000]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from evoteam.servers.bench.confinement import jail as new_jail
from evoteam.servers.bench.confinement.pidhandle import PidHandle

ROOT = Path(__file__).resolve().parent.parent
CHILD = {"spin": "while True:\n    pass",
         "sleep": "import os, sys\nos.read(0, 1)"}


def old_jail_module(commit: str):
    """jail.py as of ``commit``, loaded as module ``jail_old``."""
    text = subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:evoteam/servers/bench/confinement/jail.py"],
                          capture_output=True, text=True, check=True).stdout
    path = Path(tempfile.mkdtemp(prefix="jail-old-")) / "jail_old.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("jail_old", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def bare_jail(cls, pid: int):
    """A Jail of ``cls`` on ``pid`` without a cgroup: only what stop and resume read (the
    constructor would also sweep other harnesses' leftover workers, which a benchmark must not)."""
    j = cls.__new__(cls)
    j.pid, j.exit_status, j.stopped, j.thawed = pid, None, False, False
    j.cgroup, j.freeze_fd, j.events_fd = None, None, None
    if hasattr(cls, "exited"):  # the pidfd version
        j.handle = PidHandle(pid)
    return j


def time_cycles(j, cycles: int) -> tuple[list[float], list[float]]:
    """``cycles`` resume/stop pairs: (resume µs, stop µs) each; the child runs ~0.5 ms in between."""
    resumes, stops = [], []
    for _ in range(cycles):
        t = time.perf_counter()
        j.resume()
        resumes.append((time.perf_counter() - t) * 1e6)
        until = time.perf_counter() + 0.0005
        while time.perf_counter() < until:
            pass
        t = time.perf_counter()
        assert j.stop()
        stops.append((time.perf_counter() - t) * 1e6)
    return resumes, stops


def pct(xs: list[float], q: float) -> float:
    return sorted(xs)[min(len(xs) - 1, int(q * len(xs)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--old", default="dd53817", help="the commit whose jail.py is 'old'")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--cycles", type=int, default=1000)
    args = parser.parse_args()
    versions = {"old": old_jail_module(args.old).Jail, "new": new_jail.Jail}
    load0 = open("/proc/loadavg").read().split()[:3]
    print(f"# bench_jail_stop.py --old {args.old} --rounds {args.rounds} --cycles {args.cycles}, "
          f"{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC, kernel {os.uname().release}")
    print("child | version | round medians of stop µs (min-max) | stop p90 µs (median of rounds) | "
          "resume µs median (min-max)")
    for state, code in CHILD.items():
        r_pipe, w_pipe = os.pipe()
        child = subprocess.Popen([sys.executable, "-c", code], stdin=r_pipe, start_new_session=True)
        os.close(r_pipe)
        try:
            got: dict[str, list[tuple[float, float, float]]] = {v: [] for v in versions}
            for r in range(args.rounds):
                order = list(versions) if r % 2 == 0 else list(reversed(versions))
                for name in order:
                    j = bare_jail(versions[name], child.pid)
                    resumes, stops = time_cycles(j, args.cycles)
                    got[name].append((statistics.median(stops), pct(stops, 0.9), statistics.median(resumes)))
            for name, rows in got.items():
                meds, p90s, res = [x[0] for x in rows], [x[1] for x in rows], [x[2] for x in rows]
                print(f"{state:<5} | {name:<7} | {statistics.median(meds):6.1f} ({min(meds):.1f}-{max(meds):.1f}) | "
                      f"{statistics.median(p90s):6.1f} | {statistics.median(res):5.1f} ({min(res):.1f}-{max(res):.1f})")
        finally:
            os.killpg(child.pid, signal.SIGKILL)
            os.killpg(child.pid, signal.SIGCONT)
            os.close(w_pipe)
            child.wait()
    load1 = open("/proc/loadavg").read().split()[:3]
    print(f"(load average before {' '.join(load0)}, after {' '.join(load1)}; {os.cpu_count()} CPUs; "
          f"{args.cycles} resume/stop cycles a round, versions alternating, the child running ~0.5 ms between)")


if __name__ == "__main__":
    main()
