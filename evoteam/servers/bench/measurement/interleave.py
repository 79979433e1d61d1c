"""Interleaved rounds: the baseline and every candidate of a batch timed on the same fresh
inputs, in an order that rotates, with the call path measured alongside in a worker of its own
(the empty-call worker, session.py); every timed candidate output checked against the baseline's. How rounds turn into estimates is timing.py's business.
"""

from __future__ import annotations

from evoteam.servers.bench.measurement import machine, sparepool, timing
from evoteam.servers.bench.measurement.judge import compare_outputs, sampled_match
from evoteam.servers.bench.measurement.sides import BASELINE, CANDIDATE, Side, WorkloadSpec, WorkloadVerdict
from evoteam.servers.bench.measurement.workerproc import WorkerFailure

# Elements of each timed output compared with the baseline's (all of a smaller output); the
# correctness calls compare every element with the reference's. judge.sampled_match says how
# strong that is.
SAMPLED_ELEMENTS = 1 << 14
# The rounds call every side once per repetition (call_order). Each side's repetitions back to
# back (True) is kept for experiments only (benchmarks/bench_harness.py --order blocks): measured
# twice on 2026-12-02 it did not bring our medians nearer the minimal harness's and its score CV
# was no better (docs/bench.md, *Rounds*; benchmarks/results/2026-12-02-keeper_ab_m21e.txt,
# its variant keeper_blocks, with a keeper that was not adopted).
BLOCKS = False


def call_order(slots: list, r: int, reps: int, blocks: bool):
    """The calls of round ``r``: (slot, repetition, whether a group of calls ends there).
    blocks: each slot's repetitions back to back, the slots' order rotating by round (and
    backwards every other cycle). Otherwise per repetition every slot once (see _round_order)."""
    n = len(slots)
    if blocks:
        order = slots[r % n:] + slots[:r % n]
        if (r // n) % 2:
            order.reverse()
        for s in order:
            for j in range(reps):
                yield s, j, j == reps - 1
        return
    base = _round_order(n, r)
    for j in range(reps):
        order = base[j % n:] + base[:j % n]
        for i, k in enumerate(order):
            yield slots[k], j, i == n - 1


def _round_order(n: int, r: int) -> list[int]:
    """Round ``r``'s first repetition, as indices of the slots, the last being the empty calls'
    (every other slot a timed side); each later repetition rotates it by one. Rounds come in
    blocks of n-1, one per timed side: a block's rounds take one row of a Williams design (a
    zig-zag 0, 1, n-1, 2, n-2, ... shifted by the block, backwards every other cycle of n
    blocks) and relabel the timed sides cyclically, so within a block each timed side takes each
    timed side's place once. What that gives: with one candidate (an evaluation: three slots),
    any even number of rounds treats the baseline and the candidate exactly alike — as many
    rounds opened (the first call after the round's inputs were made), as many calls right after
    the empty calls and right after each other; with more sides the same over every n-1 rounds
    for opening and for following the empty calls, but not for who follows whom among the timed
    sides (cyclic relabelling keeps the two turning directions apart: with A and B, over 24
    rounds A follows B 18 times and the baseline 10, B the reverse; a mirrored pairing that
    balances it changed nothing measurable in A/A, 2026-12-05); no slot ever follows itself inside
    a round. Measured on 2026-12-02, a call's time depends on what ran just before it: on
    rmsnorm_cpu's t64_h8192 a side called right after itself took ~1.2 ms, after the other side
    ~1.6 ms (docs/bench.md, *Rounds*). The order used until then opened 4 of 6 rounds with the
    baseline and none with the candidate, and called the candidate twice in a row where the
    baseline never was: a copy of the baseline read 1.03-1.07 on the score."""
    timed = n - 1
    block, turn = divmod(r, timed)
    zigzag, low, high = [0], 1, n - 1
    while len(zigzag) < n:
        zigzag.append(low)
        low += 1
        if len(zigzag) < n:
            zigzag.append(high)
            high -= 1
    base = [(k + block) % n for k in zigzag]
    if (block // n) % 2:
        base.reverse()
    return [(k + turn) % timed if k < timed else k for k in base]


class InterleavedRounds:
    """The timed rounds of a KernelSession (session.py): its workers, stage and call path."""

    def measure(self, wl: WorkloadSpec, v: WorkloadVerdict) -> None:
        """Time the one candidate against the baseline (see measure_sides)."""
        self.measure_sides(wl, {CANDIDATE: v})

    def measure_sides(self, wl: WorkloadSpec, verdicts: dict[str, WorkloadVerdict]) -> timing.Rounds:
        """See _measure_sides; the harness thread runs apart from the timed workers meanwhile
        (session.apart)."""
        sparepool.settle()  # no spare of this process starts beside timed rounds (sparepool.py)
        with self.apart():
            return self._measure_sides(wl, verdicts)

    def _measure_sides(self, wl: WorkloadSpec, verdicts: dict[str, WorkloadVerdict]) -> timing.Rounds:
        """Interleaved rounds of the baseline and every candidate in ``verdicts`` on the same fresh
        inputs. Each round: one staging of fresh inputs for all sides; per repetition every side
        once, and a slot of empty calls in the empty-call worker (the call path alone), in an
        order that rotates with every repetition; every timed candidate output checked against
        the baseline's output for the same inputs. A candidate that fails leaves the batch (its verdict says why); the
        others go on. The per-round times become estimates in timing.py."""
        plan = self.timing
        reps = plan.reps_per_round
        live = [self.side(label) for label in verdicts if not self.side(label).dead]
        rounds = timing.Rounds(labels=[BASELINE, *[s.label for s in live]])
        what = f"timing workload {wl.name}"
        tol = self.tolerance
        for r in range(plan.rounds):
            active = [self.baseline, *live]
            if len(active) == 1:
                break
            warm_n = plan.warmup if r == 0 else 0
            payloads = self._stage(wl, warm_n + reps)
            warm, timed = payloads[:warm_n], payloads[warm_n:]
            outputs: dict[str, list] = {}
            times: dict[str, list[int]] = {}
            nulls: list[int] = []
            for s in active:  # warm-up (first round only), not timed for the score
                try:
                    for p in warm:
                        self._call(s, wl, p, what)
                except WorkerFailure as exc:
                    self._drop(s, verdicts, live, exc)
            for p in warm:  # the empty-call worker's path warmed up alike
                self._call(self.empty, wl, p, "warming up the call path", calibrate=True)
            # Each repetition calls every side once on the same inputs, with a slot of empty
            # calls (the call path alone) in the empty-call worker, a process of its own: were
            # they made in a timed side's worker, that side's next call would follow its own
            # process and find its caches warm, the others' not. The order rotates with every
            # repetition and round, so a burst of other work on the machine lands on all sides
            # of a round alike instead of on whichever side's turn it was.
            slots: list[Side | None] = [*active, None]
            self._check_sched()
            for s, j, last in call_order(slots, r, reps, BLOCKS):
                p = timed[j]
                if s is None:
                    nulls.append(self._call(self.empty, wl, p, "measuring the call path", calibrate=True)[2])
                elif s is self.baseline or s in live:  # else dropped earlier in this round
                    try:
                        meta, got, ns = self._call(s, wl, p, what, slot=j)  # kept until the round's checks
                    except WorkerFailure as exc:
                        self._drop(s, verdicts, live, exc)
                        outputs.pop(s.label, None)
                        times.pop(s.label, None)
                    else:
                        outputs.setdefault(s.label, []).append((meta, got))
                        times.setdefault(s.label, []).append(ns)
                if last:
                    self._check_sched()
            # What else wants a CPU now (every timed worker is stopped): unlike the load average,
            # which trails by a minute, it sees load that began during this evaluation.
            busy = machine.runnable_others()
            if busy is not None:
                rounds.runnable.append(busy)
            base_out = outputs.get(BASELINE)
            for s in list(live):
                if s.label not in outputs or len(outputs[s.label]) != len(timed):
                    continue
                for (cm, cg), (bm, bg) in zip(outputs[s.label], base_out):
                    # Baseline and reference agree within the tolerance, so a correct candidate is
                    # within twice that of the baseline.
                    if sampled_match(cm, cg, bg, wl.expected, 2 * tol.atol, 2 * tol.rtol, tol.required_matched_ratio,
                                     self.rng, SAMPLED_ELEMENTS):
                        continue
                    check = compare_outputs(cm, cg, bm, bg, wl.expected, 2 * tol.atol, 2 * tol.rtol,
                                            tol.required_matched_ratio)
                    if check.status != "PASSED":
                        self._drop(s, verdicts, live, WorkerFailure(
                            check.status, f"a timed call returned a wrong result ({check.message}); outputs must "
                            "be computed on every call", flagged=True))
                        times.pop(s.label, None)
                        break
            rounds.add(nulls, times)
        self.nulls[wl.name] = list(rounds.nulls)
        for s in live:
            est = rounds.speedup(s.label)
            v = verdicts[s.label]
            if est is None:
                continue
            v.speedup, v.speedup_interval, v.rounds = est.value, [est.lo, est.hi], est.n
            v.samples = rounds.ratios(s.label)
            v.sample_ranges = rounds.bounds(BASELINE, s.label) if rounds.censored(BASELINE, s.label) else None
            v.times_ns = rounds.times(s.label)
            v.candidate_ms = rounds.median_ms(s.label)
            v.baseline_ms = rounds.median_ms(BASELINE)
            v.kernel_s = rounds.kernel_s(s.label)
            note = _unresolved_note(rounds, s.label)
            if note:
                v.notes.append(note)
        return rounds

    @staticmethod
    def _drop(s: Side, verdicts: dict[str, WorkloadVerdict], live: list[Side], exc: WorkerFailure) -> None:
        if s.trusted_code and not s.baseline_copy:
            raise RuntimeError(f"the kit's baseline failed while timed: {exc.message}")
        v = verdicts[s.label]
        v.status, v.message, v.flagged = exc.status, exc.message, exc.flagged
        v.speedup = v.candidate_ms = v.baseline_ms = None
        if s in live:
            live.remove(s)


def _unresolved_note(rounds: timing.Rounds, label: str) -> str | None:
    """One line when a side's or the baseline's net time was below the resolution in some rounds
    (timing.Rounds.resolution): those rounds count it at the resolution, which pulls the speedup
    toward 1, while the interval's upper end reaches what a time near zero would give (15,867x
    beside "reads closer to 1" read as a contradiction; mp67). It is never a point from the 1 us
    floor."""
    parts = [f"{who} in {n} of {len(rounds.per_round)} rounds" for who, n in
             (("the candidate", rounds.unresolved(label)), ("the baseline", rounds.unresolved(BASELINE))) if n]
    if not parts:
        return None
    return (f"{timing.UNRESOLVED} above the call path's spread ({rounds.resolution / 1e3:.0f} us) for "
            + " and ".join(parts) + "; such rounds count it at that spread (its ms may then be that spread, not a "
            "timing), so the speedup reads closer to 1 "
            "while its interval's upper end stretches to what a time near zero would give (a busy machine "
            "widens that spread: bench.remeasure on a quiet one resolves it)")
