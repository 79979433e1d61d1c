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
        a = np.asarray(got[name], dtype=np.float64)
        r = np.asarray(ref[name], dtype=np.float64)
        if a.shape != r.shape:
            return Check("INCORRECT_SHAPE", f"output {name!r} has shape {a.shape}; the reference's is {r.shape}")
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


def quick_match(meta: list[dict], got: dict[str, np.ndarray], ref: dict[str, np.ndarray],
                expected: dict[str, tuple[tuple[int, ...] | None, str]], atol: float, rtol: float,
                matched_ratio: float) -> bool:
    """True when the outputs surely pass compare_outputs (same shapes and dtypes, all finite,
    within tolerance), computed in the outputs' own precision; False means: ask compare_outputs."""
    by_name = {m["name"]: m for m in meta}
    for name, (shape, dtype) in expected.items():
        m = by_name.get(name)
        if m is None or m["dtype"] != dtype or name not in got or name not in ref:
            return False
        a, r = got[name], ref[name]
        if a.shape != r.shape or (shape is not None and a.shape != tuple(shape)):
            return False
        if a.dtype.kind != "f" or a.dtype != r.dtype:
            a, r = a.astype(np.float64), r.astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            diff = np.abs(a - r)
            bad = (diff > atol) & (diff > rtol * np.abs(r))
        if not np.isfinite(a).all() or not np.isfinite(r).all():
            return False
        if bad.any() and 1.0 - int(bad.sum()) / max(1, bad.size) < matched_ratio:
            return False
    return True
