"""Does the harness's own memory traffic between timed calls slow the next call? (issue #21)

Between two timed calls the harness (another process, on another CPU) writes the next call's
inputs into the worker's shared area, then after the call copies every output out of the
stopped worker and compares every input byte with what it wrote. The cache lines the kernel
then reads and writes were last touched by the harness's CPU. This runs whole evaluations of a
CPU kit's better example in turn with the minimal harness (bench_harness.MINIMAL), each
variant patched into the product only for its own evaluation, and prints every variant's
per-workload medians next to the minimal harness's from the same repeats:

- product:  as shipped;
- nocheck:  no byte-for-byte input check after a call;
- noread:   the outputs not read out of the worker (timed-output checks skipped);
- quiet:    nocheck and noread;
- pin:      the harness thread moved onto the timed worker's CPU while it fills the inputs,
            reads the outputs and checks the inputs, so those lines are in that CPU's cache;
- pinquiet: pin and quiet;
- warm:     every timed call of a side preceded by an untimed call of the same side on the same
            inputs (not a product candidate: it shows what warm caches are worth);
- warmo:    the same with the other repetition's inputs for the untimed call (what an honest
            warm-up call would cost and give: the timed call's inputs are written afresh after it);
- warmall:  warmo, and every empty call preceded by an empty call (so the call path that is
            subtracted is measured in the same warm state as the timed calls);
- warmq, warmpq: warmall with quiet, and with pinquiet;
- prempty:  every timed call (real or empty) preceded by an untimed empty call on its worker;
- emptyfill: before every empty call the harness writes that repetition's inputs into the
            baseline worker's area, as before a real call (the product skips it);
- emptycand: the empty calls on the candidate's worker instead of the baseline's (an experiment only:
            a candidate controls its own worker): the mirror of the product, where the baseline's
            calls, not the candidate's, sometimes follow a call in their own process;
- preother: before every timed call (real or empty) an untimed empty call in the other side's worker,
            so that no timed call follows a call in its own process: the state a worker of its own
            for the empty calls would give every timed call;
- blocks:   each side's repetitions of a round back to back (interleave.BLOCKS), so every side's
            second call follows its first;
- mincold:  the minimal harness writing a 16 MiB scratch buffer (4x this machine's L2) before it makes
            each call's inputs: the kernel's own memory (its heap, the previous outputs) cold in the
            core's private cache, as after another process ran there, its fresh inputs still hot;
- mincold2: the same scratch written after the inputs are made: inputs cold too;
- minblocks: the minimal harness in that order (the row "minimal" keeps the product's order);
- tapart:   the trusted worker (it makes every round's inputs) kept off the timed CPUs while timing.

An experiment (it switches checks off), not a product check.
Usage: python benchmarks/bench_call_traffic.py [--kits rmsnorm_cpu] [--repeats 4] [--variants product,quiet]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

import bench_harness  # noqa: E402 - the benchmarks folder is this script's path[0]
from bench_harness import minimal_harness  # noqa: E402
from evoteam.config import load_settings
from evoteam.servers.bench.evaluation.core import evaluate_candidate
from evoteam.servers.bench.formats.kits import discover
from evoteam.servers.bench.measurement import arena, interleave, session

VARIANTS = ("product", "nocheck", "noread", "quiet", "pin", "pinquiet", "warm", "warmo", "warmall", "warmq", "warmpq", "prempty", "emptyfill", "emptycand", "preother", "blocks", "tapart", "minblocks", "mincold", "mincold2")


def _on_worker_cpu(fn):
    """fn run with the calling thread on the worker's CPUs (its first argument), then moved back."""
    def wrapped(w, *args, **kwargs):
        before = os.sched_getaffinity(0)
        try:
            os.sched_setaffinity(0, os.sched_getaffinity(w.proc.pid))
        except OSError:
            return fn(w, *args, **kwargs)
        try:
            return fn(w, *args, **kwargs)
        finally:
            os.sched_setaffinity(0, before)
    return wrapped


_READ_INTO = arena._read_into


def _unread(w, slot, i, addr, nbytes):
    """The timed rounds' reads (slot: the repetition) skipped; correctness and warm-up calls read."""
    if not isinstance(slot, int):
        return _READ_INTO(w, slot, i, addr, nbytes)
    buf = w.capture_bufs.get((slot, i))
    if buf is None or buf.nbytes != nbytes:
        buf = w.capture_bufs[(slot, i)] = np.zeros(nbytes, dtype=np.uint8)
    return buf


@contextlib.contextmanager
def variant(name: str):
    """The product patched as the variant says, restored after."""
    saved = (arena.fill, arena.capture, arena.inputs_unchanged, arena._read_into, interleave.sampled_match)
    call, apart = session.KernelSession._call, session.KernelSession.apart
    stage, blocks = session.KernelSession._stage, interleave.BLOCKS
    try:
        if name == "tapart":
            @contextlib.contextmanager
            def trusted_apart(self):
                pid, cpus = self.trusted.proc.pid, self.harness_cpus
                tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")] if cpus else []
                before = {t: os.sched_getaffinity(t) for t in tids}
                for t in tids:
                    os.sched_setaffinity(t, cpus)
                self.sched[self.trusted.label] = self._sched_of(self.trusted)  # its checks expect this
                try:
                    with apart(self):
                        yield
                finally:
                    for t, c in before.items():
                        with contextlib.suppress(OSError):
                            os.sched_setaffinity(t, c)
                    with contextlib.suppress(OSError):
                        self.sched[self.trusted.label] = self._sched_of(self.trusted)
            session.KernelSession.apart = trusted_apart
        if name == "blocks":
            interleave.BLOCKS = True
        if name == "preother":
            def after_other(self, s, wl, payload, what, calibrate=False, slot="call"):
                # Since the empty-call worker (timing method 3) the empty calls already follow
                # another process; only the timed calls get the call before.
                if isinstance(slot, int) and len(self.sides) > 1 and not self.sides[1].dead:
                    other = self.sides[1] if s is self.baseline else self.baseline
                    call(self, other, wl, payload, what, calibrate=True)
                return call(self, s, wl, payload, what, calibrate, slot)
            session.KernelSession._call = after_other
        if name == "emptycand":
            def moved(self, s, wl, payload, what, calibrate=False, slot="call"):
                if calibrate and s is self.empty and len(self.sides) > 1 and not self.sides[1].dead:
                    s = self.sides[1]
                return call(self, s, wl, payload, what, calibrate, slot)
            session.KernelSession._call = moved
        if name == "emptyfill":
            def filled(self, s, wl, payload, what, calibrate=False, slot="call"):
                if calibrate:
                    arena.fill(s.worker, self._layout(s, payload, wl), payload, outputs=s.dps)
                return call(self, s, wl, payload, what, calibrate, slot)
            session.KernelSession._call = filled
        if name in ("warm", "warmo", "warmall", "warmq", "warmpq", "prempty"):
            def warmed(self, s, wl, payload, what, calibrate=False, slot="call"):
                if name == "prempty" and (calibrate or isinstance(slot, int)):
                    call(self, s, wl, payload, what, calibrate=True)
                elif name in ("warmall", "warmq", "warmpq") and calibrate:
                    call(self, s, wl, payload, what, calibrate=True)
                elif isinstance(slot, int) and not calibrate:
                    other = self._exp_payloads[(slot + 1) % len(self._exp_payloads)] if name != "warm" else payload
                    call(self, s, wl, other, what, slot="warm")
                return call(self, s, wl, payload, what, calibrate, slot)
            session.KernelSession._call = warmed
            if name in ("warmo", "warmall", "warmq", "warmpq"):
                def staged(self, wl, count):
                    got = stage(self, wl, count)
                    self._exp_payloads = got[-self.timing.reps_per_round:]  # the round's timed inputs
                    return got
                session.KernelSession._stage = staged
        if name in ("nocheck", "quiet", "pinquiet", "warmq", "warmpq"):
            arena.inputs_unchanged = lambda w, layout, payload: None
        if name in ("noread", "quiet", "pinquiet", "warmq", "warmpq"):
            arena._read_into = _unread
            interleave.sampled_match = lambda *a, **k: True
        if name in ("pin", "pinquiet", "warmpq"):
            arena.fill = _on_worker_cpu(arena.fill)
            arena.capture = _on_worker_cpu(arena.capture)
            arena.inputs_unchanged = _on_worker_cpu(arena.inputs_unchanged)
        yield
    finally:
        arena.fill, arena.capture, arena.inputs_unchanged, arena._read_into, interleave.sampled_match = saved
        session.KernelSession._call, session.KernelSession.apart = call, apart
        session.KernelSession._stage, interleave.BLOCKS = stage, blocks


_MAKE = '            args = [make(axes, seed, "cpu")[n] for n in cfg["names"]]\n'
_SCRATCH = "            scratch = globals().setdefault('scratch', np.zeros(1 << 22, np.float32)); scratch += 1.0\n"


def cold_minimal(kit, path, inputs_cold: bool):
    """bench_harness.minimal_harness with a 16 MiB scratch buffer written before each call (before
    the call's inputs are made, or after them with ``inputs_cold``). bench_harness.py
    --cold-minimal uses it too."""
    assert _MAKE in bench_harness.MINIMAL
    text = bench_harness.MINIMAL
    try:
        bench_harness.MINIMAL = text.replace(_MAKE, _MAKE + _SCRATCH if inputs_cold else _SCRATCH + _MAKE)
        return minimal_harness(kit, path, False)
    finally:
        bench_harness.MINIMAL = text


def _spread(xs: list[float]) -> str:
    return f"{statistics.median(xs):7.3f} ({min(xs):.3f}-{max(xs):.3f})"


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kits", default="pairwise_distance_cpu,rmsnorm_cpu")
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    args = parser.parse_args()
    names = args.variants.split(",")
    settings = load_settings()
    tmp = tempfile.TemporaryDirectory(prefix="evoteam-traffic-")
    settings.db = Path(tmp.name) / "kb.db"
    kits = discover(settings)
    load0 = open("/proc/loadavg").read().split()[:3]
    print(f"# bench_call_traffic.py --repeats {args.repeats} --variants {args.variants}, "
          f"{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC; product evaluations poll and keep the harness "
          f"apart only while the 1-minute load is under {session.QUIET_LOAD_PER_CORE} per core")
    for kit_name in args.kits.split(","):
        kit = kits[kit_name]
        path = kit.file(kit.manifest.examples["better"])
        # per variant (and "minimal"): workload -> list of (candidate ms, baseline ms) over repeats
        got: dict[str, dict[str, list]] = {n: {} for n in [*names, "minimal"]}
        scores: dict[str, list[float]] = {n: [] for n in [*names, "minimal"]}
        for r in range(args.repeats):
            order = [*names, "minimal"]
            order = order[r % len(order):] + order[:r % len(order)]  # each variant in every place
            for name in order:
                if name in ("minimal", "minblocks", "mincold", "mincold2"):
                    _, _, speedup, m_wl = minimal_harness(kit, path, name == "minblocks") if not \
                        name.startswith("mincold") else cold_minimal(kit, path, name == "mincold2")
                    for w, mw in zip(kit.dev_workloads(), m_wl):
                        got[name].setdefault(w.uuid, []).append((mw["candidate"], mw["baseline"]))
                    scores[name].append(speedup)
                    continue
                with variant(name):
                    e = await evaluate_candidate(settings, kit, candidate_path=str(path))
                assert e.status == "PASSED", e.message
                for w in e.workloads:
                    got[name].setdefault(w.workload, []).append((w.candidate_ms, w.baseline_ms))
                scores[name].append(e.score)
        print(f"\n{kit_name}: median (min-max) over {args.repeats} repeats of each evaluation's per-workload "
              "median ms; diff % of the medians against the minimal harness's")
        print(f"{'workload':<16} | {'variant':<9} | {'candidate ms':<26} | {'diff %':>6} | {'baseline ms':<26} | "
              f"{'diff %':>6}")
        for wl in got["minimal"]:
            mc = statistics.median(c for c, _ in got["minimal"][wl])
            mb = statistics.median(b for _, b in got["minimal"][wl])
            for name in [*names, "minimal"]:
                cs = [c for c, _ in got[name][wl]]
                bs = [b for _, b in got[name][wl]]
                print(f"{wl:<16} | {name:<9} | {_spread(cs):<26} | {100 * (statistics.median(cs) / mc - 1):+6.1f} | "
                      f"{_spread(bs):<26} | {100 * (statistics.median(bs) / mb - 1):+6.1f}")
        for name in [*names, "minimal"]:
            xs = scores[name]
            cv = statistics.stdev(xs) / statistics.mean(xs) * 100 if len(xs) > 1 else 0.0
            print(f"score {name:<9} median {statistics.median(xs):.3f} ({min(xs):.3f}-{max(xs):.3f}) CV {cv:.1f}%")
    load1 = open("/proc/loadavg").read().split()[:3]
    print(f"(load average before {' '.join(load0)}, after {' '.join(load1)}; {os.cpu_count()} CPUs)")
    tmp.cleanup()


if __name__ == "__main__":
    asyncio.run(main())
