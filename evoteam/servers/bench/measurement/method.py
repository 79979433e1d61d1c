"""How a kit's candidates are timed, in words: what `describe_kit` and `evoteam bench describe`
say. Text only, so describing a kit does not import the measurement code (numpy with it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

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
    """How this kit's candidates are timed, in words (describe_kit, docs/bench.md)."""
    t = kit.manifest.timing
    dps = ("with destination passing style the outputs are allocated (NaN-filled) by the harness outside "
           "the clock; otherwise the candidate's own allocation of its outputs is inside the timed call")
    return (f"{t.rounds} rounds of {t.reps_per_round} repetitions; each repetition calls the baseline and the "
            "candidate once each on the same fresh inputs (made per round by the trusted worker; a cache keyed on "
            "inputs never hits) plus empty calls in a worker of their own (the baseline's code, confined like the "
            "sides, never timed as a side and out of the candidate's reach), in a balanced order (each side opens "
            "as many rounds, follows every other slot as often, never itself; so every call follows another "
            "process); "
            f"{t.warmup} warm-up calls per side before the first round; caches are warm (the same "
            "processes and code, fresh data). Baseline and candidate each run in a worker confined alike, so both "
            "pay the same call path; the path (the median over rounds of each round's fastest empty call) is "
            f"subtracted from every time. A round's time is each side's fastest call; {dps}. A time left below "
            "the spread of the rounds' fastest empty calls is unresolved: it counts at that spread, and the "
            "intervals cover every ratio it allows. Speedup per workload: the median of the rounds' "
            "paired ratios with a 95% order-statistic interval; score: geometric mean over "
            "workloads with a bootstrap interval.")
