"""What the machine is, and what else it was doing while we measured.

``environment`` records what a measurement was taken on (CPU model, cores, caches, library
versions; on GPU kits the GPU, driver and clocks) so two numbers from different machines are
never mistaken for comparable. ``Contention`` watches the machine during an evaluation: the load
average, CPU time stolen by a hypervisor where the kernel reports it, and the call path's floor
now (the median over rounds of each round's fastest empty call) against the lowest such median
of the same kit's recent evaluations here. A contended evaluation is marked, and says so in one
line; its rounds are noisier, so its intervals come out wider. The paired rounds give both sides
the same moments of the machine, but the load changes between evaluations more than within one,
so separate evaluations on a busy machine move by more than their intervals, either way
(measured: `examples/better.py` on pairwise_distance_cpu read 19.7 [13.3-21.8] with two busy
loops against 16.3 [15.3-18.1] quiet; docs/bench.md, "Intervals across evaluations"). The store
never announces a new best from such a measurement (knowledge/measurements.py).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

from evoteam import stats
from evoteam.servers.bench.measurement.method import TIMING_METHOD
from evoteam.servers.bench.models import CONTENDED_HEAD

# What the timing tolerates before an evaluation is marked contended.
MAX_FLOOR_RATIO = 2.0  # the call path's median floor this evaluation over the kit's best median here
MAX_STEAL = 0.05  # share of CPU time stolen by the hypervisor
MAX_LOAD_PER_CORE = 1.0  # runnable processes per usable core (1-minute load average)


def quiet_when(cores: int | None = None) -> str:
    """How to tell a quiet machine, by the rule `Contention.finish` marks with: "when the machine is
    quieter" left a model nothing to check (mp57), and "a load average below one per core" read
    1.1 on 2 cores as quiet while one other busy process marked every evaluation contended (mp60)."""
    cores = cores or os.cpu_count() or 1
    if cores <= 2:  # one CPU pinned for timing leaves the harness and any other process one
        return ("(quiet: no other busy process at all while it measures, as `top` shows: on 2 cores a single one "
                "marks it contended)")
    return (f"(quiet: fewer than {cores - 1} other busy processes and a 1-minute load average below {cores} "
            "while it measures, as `top` and `uptime` show)")


QUIET_WHEN = quiet_when()
RECENT_FLOORS = 20  # the kit's best floor is the lowest of its last this many evaluations


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def _caches() -> dict[str, str]:
    out = {}
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    for idx in sorted(base.glob("index*")):
        try:
            level = (idx / "level").read_text().strip()
            kind = (idx / "type").read_text().strip()
            size = (idx / "size").read_text().strip()
        except OSError:
            continue
        name = f"L{level}" + ({"Data": "d", "Instruction": "i"}.get(kind, ""))
        out[name] = size
    return out


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _blas() -> str | None:
    try:
        import numpy as np

        info = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        return f"{info.get('name')} {info.get('version', '')}".strip()
    except Exception:  # noqa: BLE001 - older numpy has no dict mode; the BLAS is then unknown
        return None


def _gpu() -> dict[str, str]:
    """GPU model, driver and clocks from nvidia-smi (no torch import in the harness)."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    first = out.strip().splitlines()[0] if out.strip() else ""
    parts = [p.strip() for p in first.split(",")]
    if len(parts) < 5:
        return {}
    return {"gpu": parts[0], "driver": parts[1], "sm_clock": parts[2], "sm_clock_max": parts[3],
            "mem_clock": parts[4]}


_ENV_CACHE: dict[str, dict] = {}


def environment(device: str) -> dict:
    """FIB's Environment (``hardware``, ``libs``) plus the CPU model, cores, caches and, on GPU
    kits, the GPU's driver and clocks. Library versions come from the installed distributions:
    nothing heavy is imported to learn them."""
    key = device
    if key in _ENV_CACHE:
        env = dict(_ENV_CACHE[key])
    else:
        libs = {name: v for name in ("numpy", "torch", "triton", "flashinfer-python")
                if (v := _version(name)) is not None}
        blas = _blas()
        if blas:
            libs["blas"] = blas
        if "torch" in sys.modules:
            torch = sys.modules["torch"]
            if getattr(torch.version, "cuda", None):
                libs["cuda"] = str(torch.version.cuda)
        cpu = _cpu_model()
        env = {"hardware": cpu, "libs": libs, "cpu": cpu, "cores": os.cpu_count() or 1,
               "usable_cores": len(os.sched_getaffinity(0)), "caches": _caches(), "python": platform.python_version()}
        if device.startswith("cuda"):
            gpu = _gpu()
            env.update(gpu)
            if gpu.get("gpu"):
                env["hardware"] = gpu["gpu"]
        _ENV_CACHE[key] = env
        env = dict(env)
    return env


def _cpu_times() -> tuple[int, int] | None:
    """(total jiffies, stolen jiffies) from /proc/stat, or None."""
    try:
        with open("/proc/stat") as fh:
            fields = fh.readline().split()[1:]
    except OSError:
        return None
    values = [int(x) for x in fields]
    steal = values[7] if len(values) > 7 else 0
    return sum(values[:8]), steal


def runnable_others() -> int | None:
    """Processes runnable on the whole machine right now, less the thread asking (procs_running
    in /proc/stat), or None where the kernel does not say. The harness asks between calls, while
    every timed worker is stopped."""
    try:
        with open("/proc/stat") as fh:
            for line in fh:
                if line.startswith("procs_running "):
                    return max(0, int(line.split()[1]) - 1)
    except (OSError, ValueError):
        pass
    return None


_PLAIN = re.compile(r"[^\w.,:/=+-]")


def busy_processes(limit: int = 2, proc: Path = Path("/proc")) -> list[str]:
    """Up to ``limit`` other processes running or runnable now, as "NAME (pid N)", NAME the one `top`
    shows (/proc/PID/comm): "1 other process runnable" left a model looking at `top` for a process
    it could not find (mp74). Never the command line: another user's arguments may hold a password
    (review). Read only once an evaluation is marked for them."""
    found = []
    own = os.getpid()
    try:
        entries = [e for e in os.listdir(proc) if e.isdigit() and int(e) != own]
    except OSError:
        return []
    for pid in entries:
        try:
            stat = (proc / pid / "stat").read_text()
            if stat[stat.rindex(")") + 2:][:1] != "R":
                continue
            name = _PLAIN.sub("_", (proc / pid / "comm").read_text(errors="replace").strip())[:16]
        except (OSError, ValueError):
            continue  # gone meanwhile, or not ours to read
        found.append(f"{name or '?'} (pid {pid})")
        if len(found) >= limit:
            break
    return found


class Contention:
    """Started before the timed rounds of an evaluation, finished after them."""

    def __init__(self, state: Path | None, device: str, kit: str):
        self.state = state
        # Per kit: a kit's empty call costs what its workers make it cost (measured on one quiet
        # machine: ~160 us on pairwise_distance_cpu, ~340-400 us on rmsnorm_cpu), so one kit's
        # best is no yardstick for another's.
        # And per timing method: a change to the harness changes what an empty call costs.
        self.key = f"{device} {kit} method {TIMING_METHOD}"
        self.load_start = os.getloadavg()[0]
        self.cpu_start = _cpu_times()

    def _best_floor(self, floor_us: float) -> float:
        """The lowest of the last RECENT_FLOORS median call-path floors this machine has shown
        for this kit, this one included (kept in the bench's state folder). Recent ones only: a
        lucky low median, or one from before a change to the machine, stops counting."""
        if self.state is None:
            return floor_us
        path = self.state / "call_path_floor.json"
        try:
            kept = json.loads(path.read_text())
        except (OSError, ValueError):
            kept = {}
        if not isinstance(kept, dict):
            kept = {}
        old = kept.get(self.key)
        recent = [float(x) for x in old if isinstance(x, (int, float))] if isinstance(old, list) else []
        recent = (recent + [floor_us])[-RECENT_FLOORS:]
        kept[self.key] = recent
        try:
            self.state.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}")
            tmp.write_text(json.dumps(kept))
            os.replace(tmp, path)
        except OSError:
            pass
        return min(recent)

    def finish(self, round_floors_ns: list[int], runnable: list[int] | None = None, pinned: int = 0) -> dict:
        """What the machine was doing, and whether that is more than the timing tolerates.
        ``runnable``: other runnable processes, sampled once a round (runnable_others); ``pinned``:
        the CPUs the timed workers were pinned to (0: not pinned)."""
        load = max(self.load_start, os.getloadavg()[0])
        cores = len(os.sched_getaffinity(0)) or 1
        out: dict = {"load_average": round(load, 2), "cores": cores}
        others = stats.median(runnable) if runnable else None
        if others is not None:
            out["runnable_others"] = others
        end = _cpu_times()
        steal = None
        if self.cpu_start and end and end[0] > self.cpu_start[0]:
            steal = (end[1] - self.cpu_start[1]) / (end[0] - self.cpu_start[0])
            out["cpu_steal"] = round(steal, 4)
        ratio = None
        if round_floors_ns:
            # Like against like: a median against the best median. Against the fastest single
            # round ever (as until 2026-12-02) a quiet machine read as contended on every
            # rmsnorm_cpu evaluation: one evaluation's own rounds' floors spread over 2x there
            # (an idle CPU's wake-up; docs/bench.md, "The state a timed call starts from").
            now_us = stats.median(round_floors_ns) / 1e3
            best_us = self._best_floor(now_us)
            ratio = now_us / best_us if best_us > 0 else None
            out.update(call_path_floor_us=round(now_us, 1), call_path_best_us=round(best_us, 1))
        reasons = []
        if load / cores > MAX_LOAD_PER_CORE:
            reasons.append(f"load average {load:.1f} on {cores} cores")
        machine_cores = os.cpu_count() or cores  # procs_running counts the whole machine
        # Pinned workers leave the others the remaining CPUs, the harness thread's among them: on
        # 2 cores one other process shares a CPU with the worker or the harness, and the same code
        # read 9.09x (8.15-10.2), then 13.4x (10.2-16.7), both unmarked (model-play mp31, 2026-12-04).
        crowded = max(1, machine_cores - pinned) if pinned else machine_cores * MAX_LOAD_PER_CORE
        if others is not None and others >= crowded:
            names = busy_processes()
            reasons.append(f"{others:g} other process{'es' if others != 1 else ''} runnable on {machine_cores} cores"
                           + (f" ({pinned} pinned for timing)" if pinned else "")
                           + (f", e.g. {', '.join(names)}" if names else ""))
        if steal is not None and steal > MAX_STEAL:
            reasons.append(f"{steal:.0%} of CPU time stolen")
        if ratio is not None and ratio > MAX_FLOOR_RATIO:
            reasons.append(f"call path {out['call_path_floor_us']:.0f} us against {out['call_path_best_us']:.0f} "
                           "us at best for this kit")
        out["contended"] = bool(reasons)
        out["reasons"] = reasons
        return out


def contention_line(c: dict, split: str = "dev") -> str | None:
    """The one line that says a machine was contended, or None. Ranking advice only for the dev
    split: a held-out score checks a best, it is not ranked (a model was told to compare its
    held-out check with the run's best)."""
    if not c.get("contended"):
        return None
    what = CONTENDED_HEAD + "; ".join(c.get("reasons") or []) + "): scores taken separately here can " \
        "differ by more than their intervals"
    if split == "heldout":
        # Still the one held-out check: the same candidate's rounds pool into this record (mp40
        # read "again" against the skill's "once").
        return what + (f"; evaluate the same candidate on the held-out split again when the machine is quiet "
                       f"{QUIET_WHEN}: its rounds pool into this record")
    # Said of any score: the hint once read as a new best in the making beside a copy of the
    # baseline at 1.07x under a best of 3.6x (model-play 2026-12-04).
    # A run's first score has no best to compare with: its mark is the starting score x0 (mp26).
    # Half its length: ~420 characters on every busy evaluation, read even far below the best (mp43).
    # "(low /3, high x3) clears that mark" read as a bar no score could clear (mp46); the rule is
    # applied in `standing` (evaluation/standing.py), which says the outcome. Its rule only, not the
    # case of a score above the best: read on every busy evaluation, far below the best too (mp70, mp71).
    return what + BUSY_RULE


# The rule of contention_line's last clause, which a recorded evaluation's `standing` applies and
# says the outcome of: there it is left out (evaluation/core.py; read five times over in mp78).
BUSY_RULE = ("; against the run's best (its starting score x0 in a run with none yet) a busy score's interval counts "
             f"as {stats.BUSY_COUNTS}, and paired rounds (bench.compare by id) settle what that leaves open: "
             "`standing` says where this one stands")
STANDING_SAYS = "; `standing` says where this one stands"
