"""The allocator and thread settings of bench workers, and what a kit may change of them.

A speedup is the ratio of two processes' timings, so both must allocate memory and use threads
the same way: glibc's adaptive mmap threshold, for one, depends on each process's allocation
history, and a candidate measured in a fresh process against a baseline in another can look
faster or slower for that alone (rmsnorm_cpu's better example has been seen at 3.8x in plain
processes and 5.75x otherwise). Every worker of a kit therefore gets the same fixed allocator
policy and the same thread counts, built by ``tuning_env`` in one place for the
baseline/reference worker, the candidate worker, a program kit's evaluator and the programs it
runs.

A kit may override these in ``kit.json`` (``worker_env``), for a kernel that wants, say, four
OpenMP threads or a different arena count. Only the named allocator and thread variables are
accepted: the same environment reaches the trusted baseline worker, and variables such as
LD_PRELOAD, PYTHONPATH or OMP_TOOL_LIBRARIES would load code into it. This module has no
dependencies: it is imported inside workers.
"""

from __future__ import annotations

import os
import re

# glibc's malloc tunables that have an environment variable (mallopt(3)), and nothing else.
ALLOCATOR_VARS = ("MALLOC_ARENA_MAX", "MALLOC_ARENA_TEST", "MALLOC_MMAP_MAX_", "MALLOC_MMAP_THRESHOLD_",
                  "MALLOC_TOP_PAD_", "MALLOC_TRIM_THRESHOLD_")
# Thread counts and placement of the numeric libraries. Not every OMP_*/MKL_* variable: some
# (OMP_TOOL_LIBRARIES, OMP_DEBUG, MKL_VERBOSE ...) load code or write files.
THREAD_VARS = ("OMP_NUM_THREADS", "OMP_DYNAMIC", "OMP_PROC_BIND", "OMP_PLACES", "OMP_WAIT_POLICY",
               "MKL_NUM_THREADS", "MKL_DYNAMIC", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
               "NUMEXPR_MAX_THREADS", "BLIS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")
ALLOWED = ALLOCATOR_VARS + THREAD_VARS

# The fixed allocator policy of every worker: large blocks always come from mmap at a fixed
# threshold (not glibc's adaptive one, which depends on the process's history), freed memory is
# kept rather than trimmed back, and the heap grows in large steps.
ALLOCATOR_DEFAULTS = {"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(1 << 30),
                      "MALLOC_TOP_PAD_": str(64 << 20)}
# What a kit's `threads` sets (on CPU kernel kits), and what the operator's own environment may
# set for every worker of every kit.
THREAD_COUNT_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")

# Values are numbers, booleans or OpenMP place lists ("cores", "{0:4}", "threads(8)"): no
# spaces, quotes, slashes or control characters, so no path or command can ride in one.
_VALUE = re.compile(r"^[A-Za-z0-9_.,:{}()+-]{1,64}$")


def check_worker_env(value: object) -> dict[str, str]:
    """A kit's `worker_env`, validated: names from ALLOWED, short plain values (numbers become
    strings). Raises ValueError saying what is wrong and what is allowed."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError("worker_env must be an object of variable names to values, e.g. "
                         '{"MALLOC_ARENA_MAX": "2", "OMP_NUM_THREADS": "4"}')
    out: dict[str, str] = {}
    for key, raw in value.items():
        if key not in ALLOWED:
            raise ValueError(f"worker_env may set only allocator and thread variables, and {key!r} is not one "
                             f"(it would reach the trusted baseline worker too); allowed: {', '.join(ALLOWED)}")
        if isinstance(raw, bool) or not isinstance(raw, (str, int)):
            raise ValueError(f"worker_env {key}: the value must be a string or an integer, not {raw!r}")
        text = str(raw)
        if not _VALUE.match(text):
            raise ValueError(f"worker_env {key}: {text[:80]!r} is not a plain value (1-64 letters, digits and "
                             "_ . , : { } ( ) + -)")
        out[key] = text
    return out


def tuning_env(threads: int | None = None, gpu: bool = False,
               overrides: dict[str, str] | None = None) -> dict[str, str]:
    """The allocator and thread variables a kit's workers get, in order of precedence (later
    wins): the fixed allocator policy; the operator's own OMP/OPENBLAS/MKL_NUM_THREADS; the kit's
    `threads` (CPU kernel kits); the kit's `worker_env`. The harness passes the one result to
    every worker of an evaluation, so the baseline and the candidate cannot differ."""
    env = dict(ALLOCATOR_DEFAULTS)
    for key in THREAD_COUNT_VARS:
        if os.environ.get(key):
            env[key] = os.environ[key]
    if threads and not gpu:
        env.update({key: str(threads) for key in THREAD_COUNT_VARS})
    env.update(check_worker_env(overrides))
    return env
