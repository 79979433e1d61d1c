"""Evaluator for circle_packing_26 (OpenEvolve style: evaluate(program_path) -> metrics).

The candidate program runs in a confined worker (evoteam's run_program); only its returned
arrays come back here, where they are checked."""
import numpy as np

from evoteam.servers.bench.measurement.program import ProgramFailure, run_program

N = 26
BEST_KNOWN = 2.635983
TOL = 1e-9


def check_packing(centers, radii):
    """Return (sum of radii, None) for a valid packing, else (None, reason)."""
    c = np.asarray(centers, dtype=np.float64)
    r = np.asarray(radii, dtype=np.float64)
    if c.shape != (N, 2) or r.shape != (N,):
        return None, f"expected centers of shape ({N}, 2) and radii of shape ({N},), got {c.shape} and {r.shape}"
    if not (np.isfinite(c).all() and np.isfinite(r).all()):
        return None, "centers and radii must be finite (NaN/inf never score)"
    if (r < 0).any():
        return None, f"radius {int(np.argmin(r))} is negative"
    low = c - r[:, None]
    high = c + r[:, None]
    if (low < -TOL).any() or (high > 1 + TOL).any():
        i = int(np.argmax(np.maximum(-low, high - 1).max(axis=1)))
        return None, f"circle {i} (center {c[i].round(6).tolist()}, radius {r[i]:.6g}) leaves the unit square"
    d = np.sqrt(((c[:, None, :] - c[None, :, :]) ** 2).sum(-1))
    gap = d - (r[:, None] + r[None, :])
    np.fill_diagonal(gap, np.inf)
    if (gap < -TOL).any():
        i, j = np.unravel_index(int(np.argmin(gap)), gap.shape)
        return None, f"circles {i} and {j} overlap by {-gap[i, j]:.3g}"
    return float(r.sum()), None


def evaluate(program_path):
    result = run_program(program_path, "run_packing")
    if isinstance(result, dict):
        centers, radii = result.get("centers"), result.get("radii")
    elif isinstance(result, (list, tuple)) and len(result) >= 2:
        centers, radii = result[0], result[1]
    else:
        raise ProgramFailure("INCORRECT_SHAPE", "run_packing() must return (centers, radii)")
    total, problem = check_packing(centers, radii)
    if problem:
        status = "INCORRECT_SHAPE" if problem.startswith("expected") else "INCORRECT_NUMERICAL"
        return {"status": status, "error": problem, "valid": 0}
    return {"sum_radii": total, "valid": 1, "combined_score": total / BEST_KNOWN}
