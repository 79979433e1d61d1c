"""One re-measurement batch of a run's finalists on one split: a kernel kit's sides timed in one
interleaved batch, a program kit's evaluators run in rotating order until their runs settle.
Used by remeasure.py, which decides what the new rounds mean."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from evoteam import stats
from evoteam.config import Settings
from evoteam.servers.bench.evaluation.settle import settled
from evoteam.servers.bench.measurement import copies
from evoteam.servers.bench.measurement.timing import Rounds
from evoteam.servers.bench.models import BASELINE_ID

COPY = "baseline_copy"  # the side that times the copy of the baseline (an A/A check)
# A kernel batch of this many sides or fewer times each in copies.COPIES processes, and the
# baseline in as many (copies.py); a larger one keeps one process a side: twelve finalists in
# three would be 41 processes (on a GPU, as many contexts), each timed in every round.
COPIED_SIDES = 6
# On a GPU, fewer: three sides in copies start 3 x 4 + 2 = 14 CUDA contexts (the trusted and the
# empty-call workers too), no more than a batch of twelve finalists in one process each already
# does; six would be 23, untested on a device (a finalist's process out of memory fails it).
COPIED_SIDES_GPU = 3


def processes_per_side(kit, n_sides: int) -> int:
    """The processes each side of a batch of ``n_sides`` runs in (COPIED_SIDES)."""
    most = COPIED_SIDES_GPU if kit.manifest.device.startswith("cuda") else COPIED_SIDES
    return copies.COPIES if kit.manifest.kind == "kernel" and n_sides <= most else 1


@dataclass
class PairedRounds:
    """A kernel batch's rounds per workload and each side's processes: every two sides' paired
    contrasts, read as compare reads its copies (copies.py) where each side ran in several."""

    rounds: dict[str, Rounds]
    processes: dict[str, tuple[str, ...]]  # a side's label -> its processes' labels, its own first

    def samples(self, a: str, b: str) -> dict[str, list[float]]:
        """Per workload, A's time over B's in each round."""
        pa, pb = self.processes[a], self.processes[b]
        return {w: r.group_contrast(pa, pb) for w, r in self.rounds.items()}

    def ranges(self, a: str, b: str) -> dict[str, tuple[list[float], list[float]]]:
        pa, pb = self.processes[a], self.processes[b]
        return {w: r.group_bounds(pa, pb) for w, r in self.rounds.items()}

    def spread(self, a: str, b: str) -> tuple[float, float] | None:
        """The processes' variance of the kit's contrast and its degrees of freedom (copies.spread);
        None where each side ran in one process."""
        found = [copies.offsets(r, self.processes[a], self.processes[b]) for r in self.rounds.values()]
        return copies.spread(found) if found and None not in found else None


async def measure_sides(settings: Settings, kit, codes: dict[str, str], split: str, rounds: int,
                        progress: Callable[[str], None] | None,
                        earlier: dict[str, list[float]] | None = None) -> tuple[dict, PairedRounds | None]:
    """Every side's evaluation on one split: one kernel batch (each side in copies.COPIES processes
    where there are at most COPIED_SIDES, its evaluation scored by them against the baseline's as
    an evaluation with repeats is), or each program's evaluator once per round in rotating order
    (``earlier``: _program_rounds); and a kernel batch's rounds (for paired contrasts)."""
    from evoteam.servers.bench.confinement import scratch
    from evoteam.servers.bench.evaluation import core
    from evoteam.servers.bench.measurement.batch import run_kernel_batch
    from evoteam.servers.bench.measurement.session import SideSpec

    async def report(done: float, total: float, message: str) -> None:
        if progress:
            progress(f"{split} {100 * done / total:.0f}% done: {message}" if total else f"{split}: {message}")

    # The baseline's copy is a candidate side like the others: its label must not be the session's own
    # name for the kit's baseline.
    side_of = {label: (COPY if label == BASELINE_ID else label) for label in codes}
    count = processes_per_side(kit, len(codes))
    processes = {side: copies.labels(side, count) for side in side_of.values()}
    prepared = {}
    try:
        for label, code in codes.items():
            for process in processes[side_of[label]]:  # each from a folder of its own
                prepared[process] = core.prepare_candidate(kit, None, code, settings)
    except BaseException:  # the folders made so far go too
        for p in prepared.values():
            scratch.remove_folder(p.folder)
        raise
    if kit.manifest.kind != "kernel":
        try:
            found = await _program_rounds(settings, kit, prepared, split, rounds, report,
                                          {side_of[k]: v for k, v in (earlier or {}).items() if k in side_of})
            return {label: found[side_of[label]] for label in codes}, None
        finally:
            for p in prepared.values():
                scratch.remove_folder(p.folder)
    try:
        # In a drawn order: the rounds' rotation keeps the order given, and a side given later read
        # faster (an A/A's B/A +0.65% given after A, -0.75% before it; docs/bench.md, *With copies*):
        # in the finalists' order one of them would be favoured in every re-measurement. In copies,
        # tier by tier (every side's first process, then every second...), each tier drawn anew.
        order = [processes[side][j] for j in range(count) for side in random.sample(list(processes), len(processes))]
        sides = [SideSpec(x, prepared[x].folder, prepared[x].file, prepared[x].function, prepared[x].dps)
                 for x in order]
        batch = await run_kernel_batch(settings, kit, sides, split, report, True,
                                       core._workload_specs(kit, split, settings), core._deny_roots(settings, kit),
                                       rounds, groups=list(processes.values()) if count > 1 else None)
    finally:
        for p in prepared.values():
            scratch.remove_folder(p.folder)
    from evoteam.codehash import code_hash

    out = {label: copies.named_evaluation(batch.evaluations[side_of[label]], side_of[label]) if count > 1
           else batch.evaluations[side_of[label]] for label in codes}
    for label, e in out.items():
        e.code_hash = code_hash(codes[label])
    return out, PairedRounds(batch.rounds, processes)


async def _program_rounds(settings: Settings, kit, prepared: dict, split: str, rounds: int, report,
                          earlier: dict[str, list[float]] | None = None) -> dict:
    """Each program's evaluator once per round, in an order that rotates from round to round; each
    side's score is the median of its rounds with its interval. A side stops once its runs, with
    ``earlier`` (its code's runs recorded before, on this split), are settled: three re-measurements
    of programs already exact took 400 of a model's 485 s in calls, and changed nothing (mp28,
    2026-12-04); or, where the earlier runs already give a 95% interval (5+), once they number
    ``rounds`` with them: a stochastic program with six runs and an interval 0.1% wide ran ten
    more, 104 s, and nothing moved (mp36, 2026-12-05). A side here runs at least once (one exact
    before is not sent: remeasure._batch)."""
    from evoteam.servers.bench.evaluation import core

    labels = list(prepared)
    earlier = earlier or {}
    runs: dict[str, list] = {label: [] for label in labels}
    for r in range(rounds):
        shift = r % len(labels)
        for label in labels[shift:] + labels[:shift]:
            before = earlier.get(label, [])
            enough = len(before) >= stats.EXACT_MIN_RUNS and len(before) + len(runs[label]) >= rounds
            if runs[label] and (settled(before, runs[label]) or enough):
                continue
            await report(r, rounds, f"{label}: round {r + 1}/{rounds}")
            runs[label].append(await core._run_program(settings, kit, prepared[label], split, core._noop))
    out = {}
    for label, evals in runs.items():
        failed = next((e for e in evals if e.status != "PASSED" or e.score is None), None)
        if failed is not None:
            out[label] = failed
            continue
        out[label] = core.median_run(kit, evals)[0]
    return out
