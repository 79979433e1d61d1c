"""Judging outputs: a candidate's outputs against the reference's (or the baseline's) for the
same inputs. Pure functions of arrays; the harness decides what to compare with what."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Check:
    status: str = "PASSED"
    message: str | None = None
    max_abs: float = 0.0
    max_rel: float = 0.0
    flagged: bool = False


def compare_outputs(meta: list[dict], got: dict[str, np.ndarray], ref_meta: list[dict], ref: dict[str, np.ndarray],
                    expected: dict[str, tuple[tuple[int, ...] | None, str]], atol: float, rtol: float,
                    matched_ratio: float) -> Check:
    """Shape, then dtype, then values. An element fails only when it exceeds both atol and
    rtol; NaN/inf in the candidate's output never pass."""
    check = Check()
    by_name = {m["name"]: m for m in meta}
    for name, (shape, dtype) in expected.items():
        m = by_name.get(name)
        if m is None:
            return Check("INCORRECT_SHAPE", f"output {name!r} is missing")
        if shape is not None and tuple(m["shape"]) != tuple(shape):
            return Check("INCORRECT_SHAPE", f"output {name!r} has shape {tuple(m['shape'])}, expected {tuple(shape)}")
        if shape is None and m["dtype"] == "python_scalar":
            pass
        elif m["dtype"] != dtype:
            return Check("INCORRECT_DTYPE", f"output {name!r} has dtype {m['dtype']}, expected {dtype}")
        a, r = np.asarray(got[name]), np.asarray(ref[name])
        if a.shape != r.shape:
            return Check("INCORRECT_SHAPE", f"output {name!r} has shape {a.shape}; the reference's is {r.shape}")
        fast = _within(a, r, atol, rtol, matched_ratio)
        if fast is not None:  # all finite: the same verdict and figures, without whole-size temporaries
            passed, max_abs, max_rel = fast
            check.max_abs, check.max_rel = max(check.max_abs, max_abs), max(check.max_rel, max_rel)
            if passed:
                continue
        a, r = a.astype(np.float64), r.astype(np.float64)
        finite = np.isfinite(a)
        if not finite.all():
            bad = int((~finite).sum())
            return Check("INCORRECT_NUMERICAL", f"output {name!r} has {bad} NaN/inf values (NaN/inf never pass)")
        diff = np.abs(a - r)
        absr = np.abs(r)
        if diff.size:
            check.max_abs = max(check.max_abs, float(diff.max()))
            with np.errstate(divide="ignore", invalid="ignore"):
                rel = np.divide(diff, absr, out=np.zeros_like(diff), where=absr > 0)
            check.max_rel = max(check.max_rel, float(np.nanmax(rel)))
        failing = diff > atol
        failing &= diff > rtol * absr
        if not np.isfinite(r).all():
            failing |= ~np.isfinite(r) & (a != r)
        n_bad = int(failing.sum())
        ratio = 1.0 - n_bad / max(1, failing.size)
        if n_bad and ratio < matched_ratio:
            idx = np.unravel_index(int(np.argmax(np.where(failing, diff, -1))), failing.shape) if failing.ndim else ()
            return Check("INCORRECT_NUMERICAL",
                         f"output {name!r}: {n_bad} of {failing.size} elements exceed atol={atol:g} and "
                         f"rtol={rtol:g} (worst at {tuple(int(i) for i in idx)}: got {float(a[idx]):.6g}, expected "
                         f"{float(r[idx]):.6g}; max abs error {check.max_abs:.3g})", check.max_abs, check.max_rel)
    return check


_CHUNK = 1 << 16  # elements per step: the scratch arrays stay in cache, and nothing large is allocated


def _within(a: np.ndarray, r: np.ndarray, atol: float, rtol: float,
            matched_ratio: float) -> tuple[bool, float, float] | None:
    """compare_outputs' verdict for one output, with its max abs and max rel error, computed in
    float64 a chunk at a time (no array the size of the output is made); None when either
    array holds NaN/inf (then the careful path decides and words the failure). An element fails
    when it exceeds both tolerances, that is when |a - r| > max(atol, rtol·|r|)."""
    a, r = np.asarray(a).reshape(-1), np.asarray(r).reshape(-1)
    n = a.size
    if not n:
        return True, 0.0, 0.0
    k = min(n, _CHUNK)
    diff, limit, rel, ok = np.empty(k), np.empty(k), np.empty(k), np.empty(k, dtype=bool)
    max_abs = max_rel = 0.0
    good = 0
    for start in range(0, n, k):
        m = min(k, n - start)
        d, lim, q, o = diff[:m], limit[:m], rel[:m], ok[:m]
        np.subtract(a[start:start + m], r[start:start + m], out=d, dtype=np.float64)
        np.abs(d, out=d)
        top = float(d.max())  # NaN or inf in either array makes this NaN or inf
        if not np.isfinite(top):
            return None
        max_abs = max(max_abs, top)
        np.abs(r[start:start + m], out=lim, dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            np.divide(d, lim, out=q)  # |r| = 0: inf, or NaN where d is 0 too; neither is a relative error
            worst = float(np.fmax.reduce(q, initial=0.0))
            if not np.isfinite(worst):
                q[...] = 0.0
                np.divide(d, lim, out=q, where=lim > 0)
                worst = float(q.max())
        max_rel = max(max_rel, worst)
        lim *= rtol
        np.maximum(lim, atol, out=lim)
        np.less_equal(d, lim, out=o)
        good += int(np.count_nonzero(o))
    n_bad = n - good
    return (not n_bad or 1.0 - n_bad / n >= matched_ratio), max_abs, max_rel


def sampled_match(meta: list[dict], got: dict[str, np.ndarray], ref: dict[str, np.ndarray],
                  expected: dict[str, tuple[tuple[int, ...] | None, str]], atol: float, rtol: float,
                  matched_ratio: float, rng: np.random.Generator, count: int) -> bool:
    """True when shapes and dtypes match and ``count`` elements of each output (all of a smaller
    one), drawn by ``rng`` after the outputs exist, are finite and within tolerance; False means:
    ask compare_outputs. The positions are the harness's secret, drawn anew for every call, so
    a candidate that leaves a fraction f of an output undone passes one call with probability
    (1 - f)^count: for f = 0.1% and count = 16384, about 1e-7."""
    by_name = {m["name"]: m for m in meta}
    for name, (shape, dtype) in expected.items():
        m = by_name.get(name)
        if m is None or m["dtype"] != dtype or name not in got or name not in ref:
            return False
        a, r = got[name], ref[name]
        if a.shape != r.shape or (shape is not None and a.shape != tuple(shape)):
            return False
        a, r = a.reshape(-1), r.reshape(-1)
        if a.size > count:
            where = rng.integers(0, a.size, count)
            a, r = a[where], r[where]
        verdict = _within(a, r, atol, rtol, matched_ratio)
        if verdict is None or not verdict[0]:
            return False
    return True
