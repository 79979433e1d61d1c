"""One interleaved batch on a kernel kit: the baseline and one or more candidates, timed in the
same rounds on the same fresh inputs, and each candidate's evaluation built from it.

A plain evaluation is a batch of one candidate; ``compare`` is a batch of two; a re-measurement
of a run's finalists is a batch of all of them. Whatever drifts on the machine during a batch
touches every side of the same round alike, so contrasts between sides are paired.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import shutil
import random
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from evoteam import stats
from evoteam.config import Settings
from evoteam.errors import DomainError
from evoteam.copystats import joined
from evoteam.servers.bench.measurement import copies, harness, machine, timing
from evoteam.servers.bench.measurement.method import TIMING_METHOD, styles_clause
from evoteam.servers.bench.measurement.harness import WorkerFailure
from evoteam.servers.bench.confinement import scratch
from evoteam.servers.bench.confinement.jail import stop_not_held
from evoteam.servers.bench.formats.kit import Kit
from evoteam.servers.bench.formats.kits import state_dir
from evoteam.servers.bench.models import Evaluation, Split, WorkloadOutcome
from evoteam.servers.bench.measurement.session import KernelSession, SideSpec, WorkloadSpec, WorkloadVerdict
from evoteam.servers.bench.measurement.sides import BASELINE, CANDIDATE

Progress = Callable[[float, float, str], Awaitable[None]]
# What a candidate writing into given outputs is told against a baseline that returns its own.
# ("... alone was 1.08-1.13x of this speedup on its own" said it twice; mp49.)
IN_PLACE_CLAUSE = styles_clause("the candidate", "the baseline", " of such a speedup")
STATUS_ORDER = ["COMPILE_ERROR", "TIMEOUT", "RUNTIME_ERROR", "INCORRECT_SHAPE", "INCORRECT_DTYPE",
                "INCORRECT_NUMERICAL", "PASSED"]


@dataclass
class Batch:
    """What a batch measured: each side's evaluation, and each workload's rounds (for contrasts)."""

    evaluations: dict[str, Evaluation]
    rounds: dict[str, timing.Rounds] = field(default_factory=dict)
    contention: dict[str, Any] = field(default_factory=dict)
    # Each side's output style as its worker reported it at import (the baseline's too): True where
    # it writes into slots allocated outside the clock (destination passing).
    styles: dict[str, bool] = field(default_factory=dict)


def redact_heldout(v: WorkloadVerdict) -> None:
    """Held-out shapes are secret: a failing held-out workload reports its status and nothing the
    candidate or the comparison said (error text, shapes, printed output can all carry them)."""
    if v.status != "PASSED" or v.message:
        v.message = None if v.status == "PASSED" else (
            f"{v.status} on a held-out workload; details are hidden because held-out shapes are secret "
            "(reproduce it on dev workloads with other shapes)")
    # Kept: the sanity bound's and the unresolved rounds' notes (no shape in either: a wide
    # held-out interval went unexplained without the latter).
    v.notes = [n for n in v.notes if "sanity bound" in n or n.startswith(timing.UNRESOLVED)]
    v.max_abs = v.max_abs if v.status == "PASSED" else 0.0
    v.max_rel = v.max_rel if v.status == "PASSED" else 0.0


def missing_protections(sandbox: str) -> list[str]:
    """The confinement layers a worker reported as missing (named in capitals with the reason)."""
    return [part for part in sandbox.split("+") if part.startswith("NO-")]


async def run_kernel_batch(settings: Settings, kit: Kit, sides: list[SideSpec], split: Split, progress: Progress,
                           use_landlock: bool, specs: list[tuple[WorkloadSpec, str | None]],
                           deny: list[str], rounds: int | None = None, device: str | None = None,
                           copied: bool = False, groups: Sequence[Sequence[str]] | None = None) -> Batch:
    """Evaluate every side on the split in one session; see the module's docstring. ``device`` is
    the pool slot the batch holds ("cuda:2", "cpu:1"; scheduling/): its lock, where a slot runner
    already sees only that device (a GPU slot's CUDA_VISIBLE_DEVICES) or only its cores.
    ``copied``: ``sides`` is one candidate, timed in copies.COPIES processes, each from a copy of
    its folder, and the baseline in as many; its evaluation is scored by the two groups (copies.py).
    ``groups``: ``sides`` are several candidates' processes already made (each group the labels of
    one candidate's, its own first; given tier by tier: every first process, then every second...),
    the baseline timed in as many, and each group's evaluation scored so, under its first label."""
    if not copied:
        return await _run_batch(settings, kit, sides, split, progress, use_landlock, specs, deny, rounds, device,
                                groups)
    made: list[SideSpec] = []
    try:
        for label in copies.labels(CANDIDATE)[1:]:
            made.append(dataclasses.replace(sides[0], label=label, folder=scratch.new_folder("cand")))
            shutil.copytree(sides[0].folder, made[-1].folder, dirs_exist_ok=True)
        return await _run_batch(settings, kit, [*sides, *made], split, progress, use_landlock, specs, deny, rounds,
                                device, [copies.labels(CANDIDATE)])
    finally:
        for spec in made:
            scratch.remove_folder(spec.folder)


async def _run_batch(settings: Settings, kit: Kit, sides: list[SideSpec], split: Split, progress: Progress,
                     use_landlock: bool, specs: list[tuple[WorkloadSpec, str | None]], deny: list[str],
                     rounds: int | None, device: str | None,
                     groups: Sequence[Sequence[str]] | None = None) -> Batch:
    m = kit.manifest
    slot = device or m.device
    plan = m.timing if rounds is None else m.timing.model_copy(update={"rounds": rounds})
    total = len(specs)
    groups = [tuple(g) for g in groups] if groups else None
    base_copies = copies.labels(BASELINE, len(groups[0]))[1:] if groups else ()
    labels = _rotation([s.label for s in sides], len(groups) if groups else 0, base_copies)
    outcomes: dict[str, list[WorkloadOutcome]] = {label: [] for label in labels}
    verdicts_all: dict[str, list[WorkloadVerdict]] = {label: [] for label in labels}
    failed_before = dict.fromkeys(labels, False)
    rounds_by_wl: dict[str, timing.Rounds] = {}
    t_start = time.perf_counter()
    await progress(0, total, f"waiting for the {slot} and starting workers")
    # The candidates' workers start (and are pinned, and take spares) in an order drawn for the batch:
    # in the order given, a side's place moved its times by about 1% a place, always the same way
    # (A/A with four processes: B/A 1.022, SD 2.35%, over 80 batches, 2026-12-05); drawn, it went
    # (B/A 0.999 over 100). The rounds' rotation keeps the given order, where a side given later
    # read faster too: the callers give a balanced order (compare: A and B's processes alternating,
    # the lead drawn; a re-measurement: drawn; docs/bench.md, *With copies*).
    placed = random.sample(sides, len(sides))
    lock = harness.device_lock(state_dir(settings) / "locks", slot)
    await asyncio.to_thread(lock.__enter__)
    session = None
    baseline_notes: list[str] = []
    try:
        for baseline, baseline_label in kit.baseline_solutions():
            session = await _built(lambda: KernelSession(
                definition=kit.definition.model_dump(), framework=m.framework, device=m.device,
                inputs_source=kit.inputs_source(), reference_source=kit.definition.reference, baseline=baseline,
                sides=placed, deny=deny, memory_mb=m.memory_limit_mb, timeouts=m.timeouts,
                tolerance=m.tolerance, timing=plan, use_landlock=use_landlock, threads=m.threads,
                worker_env=m.worker_env, kit_hash=kit.content_hash, baseline_copies=base_copies))
            try:
                await asyncio.to_thread(session.start)
            except RuntimeError as exc:
                if baseline is None:
                    await asyncio.to_thread(session.close)
                    raise DomainError(f"kit {kit.name} is broken: {exc}") from None
                problem = str(exc)
            else:
                usable = [s for s, p in specs if not p]
                problem = None
                if usable:
                    problem = await asyncio.to_thread(session.check_baseline, usable[0])
                    if problem and baseline is None:
                        await asyncio.to_thread(session.close)
                        raise DomainError(f"kit {kit.name} is broken: its reference, run as the baseline, "
                                          f"does not match itself: {problem}")
            if problem is None:
                break
            baseline_notes.append(f"baseline {baseline_label} was skipped: {problem[:300]}")
            await asyncio.to_thread(session.close)
            session = None
        contention = machine.Contention(state_dir(settings), m.device, kit.name)
        for i, (spec, problem) in enumerate(specs):
            verdicts: dict[str, WorkloadVerdict] = {}
            for label in labels:
                verdicts[label] = await _correctness(session, spec, problem, label, outcomes[label])
            timed = {label: v for label, v in verdicts.items() if v.status == "PASSED" and not failed_before[label]}
            if timed:
                await progress(i + 0.5, total, f"{spec.name}: correct; timing")
                try:
                    rounds_by_wl[spec.name] = await asyncio.to_thread(session.measure_sides, spec, timed)
                except WorkerFailure as exc:  # something tilted the timing of every side (flagged)
                    for v in timed.values():
                        v.status, v.message, v.flagged = exc.status, exc.message, exc.flagged
                except RuntimeError as exc:
                    raise DomainError(f"kit {kit.name} is broken: {exc}") from None
            for label, v in verdicts.items():
                _over_bound(v, m.max_plausible_speedup)
                if v.status != "PASSED":
                    failed_before[label] = True
                if spec.hidden:
                    redact_heldout(v)
                verdicts_all[label].append(v)
                outcomes[label].append(_outcome(spec.name, v))
            if groups:
                _stop_copies(failed_before, verdicts_all, groups, base_copies)
            first = verdicts[labels[0]]
            await progress(i + 1, total, f"{spec.name}: {first.status}"
                           + (f" {stats.sig3(first.speedup)}x" if first.speedup is not None else ""))
        floors = [n for r in rounds_by_wl.values() for n in r.round_nulls]
        contended = contention.finish(floors, [n for r in rounds_by_wl.values() for n in r.runnable],
                                      len(session.pinned) if session is not None else 0)
    finally:
        try:
            if session is not None:
                await asyncio.to_thread(session.close)
        finally:
            lock.__exit__(None, None, None)  # whatever happened, the device is free again
    wall = time.perf_counter() - t_start
    metrics_base: dict[str, Any] = {"timing_method": TIMING_METHOD,  # here: where it was measured (any node)
                                    "baseline": baseline_label, "device": m.device, "kit_source": str(kit.root),
                                    "environment": machine.environment(m.device), "contention": contended}
    path = {name: r.summary() for name, r in rounds_by_wl.items() if r.nulls}
    if path:
        metrics_base["timing"] = path
    if session is not None and session.pinned:
        metrics_base["pinned_cpus"] = session.pinned  # every timed side ran on these CPUs
    if session is not None:
        metrics_base["clock"] = session.clock  # callclock.py: wall, or less the waits for a CPU
    if m.timing_note:
        metrics_base["timing_note"] = m.timing_note
    if baseline_notes:
        metrics_base["baseline_notes"] = baseline_notes
    sandbox_desc = session.sandbox if session else ""
    styles = {s.label: s.dps for s in session.sides} if session is not None else {}
    if groups:  # each candidate's evaluation, scored by its processes against the baseline's
        grouped = {}
        for group in groups:
            kit_spread, single = _grouped(verdicts_all, outcomes, rounds_by_wl, (BASELINE, *base_copies),
                                          group, m.max_plausible_speedup, len(groups))
            metrics = dict(metrics_base, processes_per_side=1 if single else len(group))
            e = grouped[group[0]] = _evaluation(
                kit, split, outcomes[group[0]], verdicts_all[group[0]], baseline_label, metrics,
                wall / len(groups), sandbox_desc, _styles_apart(styles, group[0]), kit_spread)
            if single and e.status == "PASSED" and e.message:
                e.message = f"{e.message}; {single}"
        return Batch(grouped, rounds_by_wl, contended, styles)
    evaluations = {label: _evaluation(kit, split, outcomes[label], verdicts_all[label], baseline_label,
                                      dict(metrics_base), wall / len(labels), sandbox_desc,
                                      _styles_apart(styles, label))
                   for label in labels}
    return Batch(evaluations, rounds_by_wl, contended, styles)


async def _built(make: Callable[[], KernelSession]) -> KernelSession:
    """``make()`` in a thread. Where the caller is cancelled meanwhile (a client's cancel, a tool's
    timeout), the thread runs on (asyncio cannot stop it) and the session it builds reaches no
    one: it is closed then, or its workers and folders outlived the evaluation."""
    lock, state = threading.Lock(), {"abandoned": False, "made": None}

    def build() -> KernelSession:
        made = make()
        with lock:
            abandoned = state["abandoned"]
            state["made"] = made
        if abandoned:
            made.close()
        return made

    try:
        return await asyncio.to_thread(build)
    except asyncio.CancelledError:
        with lock:
            state["abandoned"] = True
            made = state["made"]
        if made is not None:  # built just before the cancel: its result went nowhere
            threading.Thread(target=made.close, daemon=True).start()
        raise


def _grouped(verdicts: dict[str, list[WorkloadVerdict]], outcomes: dict[str, list[WorkloadOutcome]],
             rounds_by_wl: dict[str, timing.Rounds], base: Sequence[str], cand: Sequence[str],
             bound: float, n_groups: int = 1) -> tuple[tuple[float, float] | None, str | None]:
    """The candidate's verdicts (and outcomes) as its processes against the baseline's give them
    (copies.py: the median of the rounds' group contrasts, its interval joined with the processes'
    t interval, the flags of any of its processes), and the kit's spread for its score; or, where
    they do not score it, None and why (no reason: the candidate failed, as its first failing
    process did; its worker's messages name the process)."""
    first = cand[0]
    names = [o.workload for o in outcomes[first]]
    failed = [label for label in cand if any(v.status != "PASSED" for v in verdicts[label])]
    if failed:
        verdicts[first], outcomes[first] = verdicts[failed[0]], outcomes[failed[0]]
        return None, None
    for i, v in enumerate(verdicts[first]):  # a flag in any process is the candidate's
        for other in (verdicts[label][i] for label in cand[1:] if verdicts[label][i].flagged):
            v.flagged = True
            v.notes += [n for n in other.notes if n not in v.notes]
    found = [(rounds, copies.workload_estimate(rounds, base, cand, widened=True) if rounds else None)
             for rounds in (rounds_by_wl.get(name) for name in names)]
    broken = next((v for label in base[1:] for v in verdicts[label] if v.status != "PASSED"), None)
    if broken is not None or any(est is None for _, est in found):
        outcomes[first] = [_outcome(name, v) for name, v in zip(names, verdicts[first])]
        why = f"the baseline failed in its other process ({broken.status})" if broken else "not every round timed them all"
        return None, f"scored by one process a side: {why}"
    kept = []
    for v, (rounds, est) in zip(verdicts[first], found):
        kept.append(copies.offsets(rounds, base, cand))
        v.samples = rounds.group_contrast(base, cand)
        lows, highs = rounds.group_bounds(base, cand)
        v.sample_ranges = (lows, highs) if lows != highs else None
        v.speedup, v.speedup_interval, v.rounds = est.value, [est.lo, est.hi], len(v.samples)
        # Each side's time as the geometric mean of its processes' medians, as the speedup is of them.
        ms = [[rounds.median_ms(x) for x in group] for group in (cand, base)]
        v.candidate_ms, v.baseline_ms = (stats.geomean(each) if all(each) else None for each in ms)
        # Its processes' timed calls and its share of the baseline's (``n_groups`` candidates share them).
        spent = rounds.spent_ns
        v.kernel_s = (sum(spent.get(x, 0) for x in cand) + sum(spent.get(x, 0) for x in base) / n_groups) / 1e9
        _over_bound(v, bound)
    outcomes[first] = [_outcome(name, v) for name, v in zip(names, verdicts[first])]
    return copies.spread(kept), None


def _rotation(given: list[str], n_groups: int, base_copies: Sequence[str]) -> list[str]:
    """The order the sides are timed in (the rounds' rotation keeps it). In groups, given tier by
    tier, the baseline's other processes between the tiers: B C B' C' B'' C'' for one candidate
    (the session's own baseline first), B C D B' C' D' B'' C'' D'' for two."""
    if not n_groups:
        return given
    tiers = [given[i:i + n_groups] for i in range(0, len(given), n_groups)]
    return [x for tier, base in zip(tiers, [*base_copies, None]) for x in (*tier, base) if x]


def _stop_copies(failed_before: dict[str, bool], verdicts: dict[str, list[WorkloadVerdict]],
                 groups: Sequence[Sequence[str]], base_copies: Sequence[str]) -> None:
    """In copies, what is not timed again once a process has failed: a candidate's process failing
    fails that candidate, so none of its processes (and, where every candidate failed, nothing); a
    baseline copy's, so that each candidate's first process scores alone (_grouped), the baseline's
    copies, and with one candidate its other processes too (with several, their processes still
    pair them with each other: a re-measurement keeps those pairs)."""
    def failed(labels: Sequence[str]) -> bool:
        return any(v.status != "PASSED" for label in labels for v in verdicts[label])

    stopped = [x for group in groups if failed(group) for x in group]
    if len(stopped) == sum(map(len, groups)):
        stopped += base_copies
    elif failed(base_copies):
        stopped += base_copies
        if len(groups) == 1:  # its other processes pair it with nothing
            stopped += groups[0][1:]
    for label in stopped:
        failed_before[label] = True


def _over_bound(v: WorkloadVerdict, bound: float) -> None:
    """Flag a passing speedup above the kit's sanity bound (once)."""
    if v.status == "PASSED" and v.speedup is not None and v.speedup > bound and \
            not any("sanity bound" in n for n in v.notes):
        v.flagged = True
        v.notes.append(f"speedup {v.speedup:.1f}x is above the sanity bound of {bound:g}x; flagged for review")


async def _correctness(session: KernelSession, spec: WorkloadSpec, problem: str | None, label: str,
                       earlier: list[WorkloadOutcome]) -> WorkloadVerdict:
    if problem:
        return WorkloadVerdict("RUNTIME_ERROR", f"kit problem: {problem}")
    side = session.side(label)
    if side.dead:
        err = side.error
        first = not earlier or all(o.status == "PASSED" for o in earlier)
        return WorkloadVerdict(err.status, err.message if first and not any(o.message == err.message for o in earlier)
                               else f"not run: the candidate's process failed earlier ({err.status})", err.flagged)
    try:
        return await asyncio.to_thread(session.check_correctness, spec, label)
    except WorkerFailure as exc:
        return WorkloadVerdict(exc.status, exc.message, exc.flagged)
    except RuntimeError as exc:
        raise DomainError(f"kit is broken: {exc}") from None


def _against_baseline(est: stats.Estimate, busy: bool = False, unresolved: bool = False, copies: bool = False) -> str:
    """The verdict a speedup's interval gives, in words: a model read "1.02× (0.912–1.15)" as a gain.
    On a busy machine it also says how the store reads the score against x0 (stats.load_widened):
    a 2.6x "beyond noise" here sat "within noise of x0" in the trajectory (mp44), and said alone,
    the widened reading was taken for a verdict on the paired rounds (mp45). The rounds are kept in
    the run (evaluation/core.py): sent to compare with the baseline for rounds of the same kind, a
    model read a contradiction (mp56): record_evaluation says so where it keeps them. ``copies``:
    each side in several processes, whose rounds are not kept (their interval holds the processes'
    spread, which rounds alone do not)."""
    if est.coverage == 0:
        return "one round: no verdict against the baseline (evaluate with repeats for an interval)"
    short = f" (a {est.coverage:.0%} interval: few rounds)" if est.coverage < stats.CONFIDENCE - 1e-9 else ""
    if est.lo <= 1 <= est.hi:
        if unresolved:  # "not distinguishable" of a 3x kernel whose shortest workload could not be timed (mp44)
            return ("not told apart from the baseline: some workloads' times were not resolved here (their "
                    "messages say which), which widens the interval; evaluate again when the machine is quieter"
                    + short)
        return "not distinguishable from the baseline (the interval holds 1×)" + short
    said = f"{'faster' if est.lo > 1 else 'slower'} than the baseline, beyond noise"
    if not busy:
        return said + short
    wide = stats.load_widened(est)  # as the store reads it against x0
    lo, hi = wide.lo, wide.hi
    if lo > 1 or hi < 1:
        return said + " even widened for the load" + short
    # The verdict, then why the run needs more ("..., which holds 1" read as a contradiction; mp68, mp69).
    return (said + " in these paired rounds" + short + BUSY_UNSHOWN + " (widened for the "
            f"load, as the run reads it against x0, low /{stats.BUSY_SPREAD:g}, high x{stats.BUSY_SPREAD:g}: "
            f"{stats.sig3(lo)}–{stats.sig3(hi)}), so where x0 is 1 paired rounds with the baseline place it "
            f"({BUSY_SETTLE}" + ("; rounds in copies are not kept)" if copies else ")"))


# What settles a busy kernel against x0, as evaluate's message names it (after BUSY_UNSHOWN); where the
# evaluation's own rounds were kept in its run and decide, record_evaluation says so instead (evaluation/core.py).
BUSY_UNSHOWN, BUSY_SETTLE = "; a busy score alone would not show it", 'bench.compare it by id with a_candidate_id "baseline"'
MS_CLAUSE = "baseline_ms / candidate_ms is"  # how _ms_apart's clause reads (compare leaves it out)


def ms_disagree(ms_ratio: float, speedup: float) -> bool:
    """Two medians (each side's alone) that divide to more than 10% off the speedup (the median of
    the rounds' paired ratios), or to the other side of 1× by over 2% (a model read a baseline
    copy's ms as slower beside a speedup above 1, the gap under 10%; model-play 2026-12-04)."""
    apart = abs(math.log(ms_ratio / speedup))
    return apart > math.log(1.1) or ((ms_ratio - 1) * (speedup - 1) < 0 and apart > math.log(1.02))


def _ms_apart(outcomes: list[WorkloadOutcome]) -> str | None:
    """A line for the workloads whose ms read otherwise than their speedup (ms_disagree): a model
    divided the ms and read a baseline copy's 0.97 as 0.81."""
    off = [o for o in outcomes if o.speedup and o.candidate_ms and o.baseline_ms and ms_disagree(
           o.baseline_ms / o.candidate_ms, o.speedup)]
    if not off:
        return None
    o = off[0]
    more = f" (and {len(off) - 1} more)" if len(off) > 1 else ""
    return (f"{o.workload}{more}: {MS_CLAUSE} {stats.sig3(o.baseline_ms / o.candidate_ms)} but "
            f"the speedup is {stats.sig3(o.speedup)}: each ms is one side's own median, the speedup the median of "
            "same-round ratios, so rank by the speedup")


def _outcome(name: str, v: WorkloadVerdict) -> WorkloadOutcome:
    message = v.message or ("; ".join(v.notes) if v.notes else None)
    return WorkloadOutcome(
        workload=name, status=v.status, speedup=v.speedup, candidate_ms=v.candidate_ms,
        baseline_ms=v.baseline_ms, max_abs_error=v.max_abs if v.max_abs else None,
        max_rel_error=v.max_rel if v.max_rel and math.isfinite(v.max_rel) else None,
        message=message, flagged=v.flagged, speedup_interval=v.speedup_interval, rounds=v.rounds)


def _styles_apart(styles: dict[str, bool], label: str) -> str | None:
    """What side ``label``'s evaluation says where it and the baseline differ in output style."""
    if label not in styles or BASELINE not in styles or styles[label] == styles[BASELINE]:
        return None
    if styles[label]:
        return IN_PLACE_CLAUSE
    return styles_clause("the baseline", "the candidate") + "; writing into given outputs gives that back"


def _evaluation(kit: Kit, split: Split, outcomes: list[WorkloadOutcome], verdicts: list[WorkloadVerdict],
                baseline_label: str, metrics: dict, wall: float, sandbox: str,
                styles_apart: str | None = None, kit_spread: tuple[float, float] | None = None) -> Evaluation:
    m = kit.manifest
    passed = sum(o.status == "PASSED" for o in outcomes)
    status = "PASSED" if passed == len(outcomes) else min(
        (o.status for o in outcomes if o.status != "PASSED"), key=STATUS_ORDER.index)
    score, interval, samples, ranges = None, None, {}, {}
    metrics.update(workloads_passed=passed, workloads=len(outcomes))
    est = None
    if status == "PASSED":
        samples = {o.workload: list(v.samples) for o, v in zip(outcomes, verdicts) if v.samples}
        if len(samples) == len(outcomes) and all(s > 0 and math.isfinite(s) for vs in samples.values() for s in vs):
            ranges = {o.workload: v.sample_ranges for o, v in zip(outcomes, verdicts) if v.sample_ranges}
            est = timing.kit_estimate(samples, ranges=ranges)
            if kit_spread is not None:  # the processes' t interval beside the rounds' (copies.py)
                est = joined(est, [kit_spread])
            score, interval = est.value, [est.lo, est.hi]
            speedups = [o.speedup for o in outcomes]
            metrics.update(geomean_speedup=score, min_speedup=min(speedups), max_speedup=max(speedups))
        else:
            samples, ranges = {}, {}
    kernel_s = sum(v.kernel_s for v in verdicts)
    metrics["wall_s"] = round(wall, 3)
    metrics["harness_overhead_s"] = round(max(0.0, wall - kernel_s), 3)
    missing = missing_protections(sandbox)
    if missing:
        metrics["protections_missing"] = missing
    flags = [f"{o.workload}: {o.message}" for o in outcomes if o.flagged]
    if status == "PASSED" and (unheld := stop_not_held(sandbox)):
        flags.append(unheld)  # timings measured where the stop cannot hold never rank unreviewed
    first_bad = next((o for o in outcomes if o.status != "PASSED"), None)
    if first_bad:
        message = f"{first_bad.workload}: {first_bad.message}"
    elif est is not None:
        # Repeats' processes and rounds said: shown nowhere else a model reads (2026-12-05); 17 unexplained (mp78).
        k, r = metrics.get("processes_per_side", 1), max((o.rounds or 0 for o in outcomes), default=0)
        unresolved = [o.workload for o in outcomes if o.message and timing.UNRESOLVED in o.message]
        busy = bool((metrics.get("contention") or {}).get("contended")) and split == "dev"  # held-out: placed nowhere
        each = "" if k <= 1 else f", each side in {k} processes" + (
            f" of {r} rounds each (plain: one of {m.timing.rounds})" if r else "")
        message = (f"all {passed} workloads correct; geomean speedup {stats.describe(est, '×')} over {baseline_label}"
                   f"{each}: {_against_baseline(est, busy, bool(unresolved), copies=k > 1)}") + (
            f"; {', '.join(unresolved)}: {timing.UNRESOLVED_SAID}"  # dev only: a held-out record ranks nothing (rev79)
            if unresolved and split == "dev" and est.coverage > 0 and not est.lo <= 1 <= est.hi else "")
    else:
        message = None
    apart = _ms_apart(outcomes) if est is not None else None
    if apart:
        message = f"{message}; {apart}"
    if styles_apart and est is not None:
        message = f"{message}; {styles_apart}"
    line = machine.contention_line(metrics.get("contention") or {}, split)
    if line and est is not None:  # only a timed result is touched by contention
        message = f"{message}; {line}"
    if flags and status == "PASSED":
        # Said first: a model read "all 3 workloads correct; geomean speedup 38.5×" and not the flags.
        message = f"FLAGGED, does not rank until reviewed ({len(flags)} flag(s): see flags); {message}"
    return Evaluation(kit=kit.name, kind="kernel", split=split, status=status, score=score, score_interval=interval,
                      direction=m.direction, passed=passed, total=len(outcomes), workloads=outcomes, metrics=metrics,
                      flagged=bool(flags), flags=flags, message=message, best_known=m.best_known,
                      wall_s=round(wall, 3), sandbox=sandbox,
                      contended=bool((metrics.get("contention") or {}).get("contended")), samples=samples,
                      sample_ranges=ranges)
