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

# Worker processes per timed side on a CPU, the rounds alternating between them. Each process
# has a speed of its own (the same code differs by ~8% from one process to the next on
# pairwise_distance_cpu, benchmarks/results/2026-12-02-process_spread.txt), which one process per
# side carries whole into every evaluation's score: measured on 2026-12-03 (bench_process_split.py)
# that made the score's CV 1.7-3.9x that of one process holding both sides, and N processes per
# side cut it by about sqrt(N) (docs/bench.md, *Processes per side*).
PROCESSES_PER_SIDE = 4
# At most this many timed workers in one batch (a re-measurement of many finalists gets fewer
# processes per side rather than dozens of processes).
MAX_TIMED_WORKERS = 16


def processes_per_side(plan, gpu: bool, n_sides: int) -> int:
    """How many worker processes each of ``n_sides`` timed sides gets: the kit's
    ``processes_per_side``, else PROCESSES_PER_SIDE on a CPU and one on a GPU; never more than
    there are rounds, nor more than MAX_TIMED_WORKERS in all."""
    k = plan.processes_per_side or (1 if gpu else PROCESSES_PER_SIDE)
    return max(1, min(k, plan.rounds, MAX_TIMED_WORKERS // max(1, n_sides)))


def timing_method(kit: Kit) -> str:
    """How this kit's candidates are timed, in words (describe_kit, docs/bench.md)."""
    t = kit.manifest.timing
    per_side = processes_per_side(t, kit.manifest.device == "cuda", 2)
    dps = ("with destination passing style the outputs are allocated (NaN-filled) by the harness outside "
           "the clock; otherwise the candidate's own allocation of its outputs is inside the timed call")
    return (f"{t.rounds} rounds of {t.reps_per_round} repetitions; each repetition calls the baseline and the "
            "candidate once each on the same fresh inputs (made per round by the trusted worker; a cache keyed on "
            "inputs never hits) plus empty calls in a worker of their own (the baseline's code, confined like the "
            "sides, never timed as a side and out of the candidate's reach), in a balanced order (each side opens "
            "as many rounds, follows every other slot as often, never itself; so every call follows another "
            "process); "
            f"each side runs in {per_side} worker process{'es' if per_side > 1 else ''} of its own"
            + (", the rounds alternating between them (the same code runs a few percent faster in one process "
               "than in another; several per side average that out)" if per_side > 1 else "")
            + f"; {t.warmup} warm-up calls per side before each process's first round; caches are warm (the same "
            "processes and code, fresh data). Baseline and candidate each run in workers confined alike, so both "
            "pay the same call path; the path (the median over rounds of each round's fastest empty call) is "
            f"subtracted from every time. A round's time is each side's fastest call; {dps}. A time left below "
            "the spread of the rounds' fastest empty calls is unresolved: it counts at that spread, and the "
            "intervals cover every ratio it allows. Speedup per workload: the median of the rounds' "
            "paired ratios with a 95% order-statistic interval; score: geometric mean over "
            "workloads with a bootstrap interval.")
