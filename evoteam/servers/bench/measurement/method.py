"""How a kit's candidates are timed, in words: what `describe_kit` and `evoteam bench describe`
say. Text only, so describing a kit does not import the measurement code (numpy with it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from evoteam.passingstyle import STYLE_SHARE, share_text

if TYPE_CHECKING:
    from evoteam.servers.bench.formats.kit import Kit

# The way a kernel kit's times are taken, as a number recorded with every evaluation
# (`metrics.timing_method`). A run is bound to it as to its kit's content (evaluation/core.py):
# scores taken one way are never pooled or ranked with scores taken another. Raise it when a
# change to the harness makes scores from before and after not comparable. 2 (2026-12-02): the
# balanced call order (interleave._round_order), after which short kernels' speedups read
# 15-24% lower than before on the CPU kits' better examples (docs/bench.md, *Rounds*).
# 3 (2026-12-02): the empty calls in a confined worker of their own instead of the baseline's
# (session.py), after which the subtracted call path grew by ~60-80 us and the CPU kits' better
# examples read 11-14% higher than under 2; a copy of the baseline on rmsnorm_cpu's shortest
# workload 0.99 instead of 0.95 (docs/bench.md, *Where the empty calls run*).
TIMING_METHOD = 3


def timing_method(kit: Kit) -> str:
    """How this kit's candidates are timed, in words (describe_kit; the whole story in
    docs/bench.md). Every part a reader needs in one short paragraph: it was 1,325 of describe_kit's
    2,674 characters, the largest part of the first answer a model reads."""
    t = kit.manifest.timing
    return (f"{t.warmup} warm-up calls per side, then {t.rounds} rounds of {t.reps_per_round} repetitions: each "
            "repetition calls baseline and candidate once on the same fresh inputs, each side in "
            "a worker confined alike, in a balanced order, with empty calls (the call path alone) in a worker of "
            "their own; caches are warm, but inputs are written from another CPU. Timed: the call as the harness "
            "sees it (less the worker's waits for a CPU, where it has a cgroup), less the call path (median of each round's "
            "fastest empty call); a candidate in destination passing style gets its outputs allocated outside the "
            f"clock, a returning one inside it (up to {STYLE_SHARE[1]:.1f}x apart, memory-bound). Per round each "
            "side's fastest call; "
            "a time below the path's spread counts at that spread and the intervals cover it. Speedup: the median of the rounds' paired ratios "
            "(95% order-statistic interval); score: the geometric mean of the workloads' speedups (bootstrap interval).")


def styles_clause(dps: str, other: str, of: str = "") -> str:
    """Said where one side writes into output slots allocated outside the clock (destination
    passing) and the other allocates the outputs it returns inside it: "B is faster, 1.15x" of
    the same arithmetic read as a faster kernel (mp37), and a candidate's evaluation read as a
    fusion's win what was its style's (mp41). The share is the docs' measurement, said so: "that
    alone was 1.02-1.30x" read as measured on these two (mp74); "in docs/bench.md" named a file the
    roles are never told to read (mp82)."""
    return (f"{dps} writes its outputs into slots allocated outside the clock (destination passing), {other} "
            f"allocates the ones it returns inside it: that alone gave other kernels {share_text(of)}")
