"""Evaluator for erdos_min_overlap (OpenEvolve style: evaluate(program_path) -> metrics).

For step functions the overlap is piecewise linear in the shift, so its maximum is attained at a
whole number of steps; the correlation over all such shifts is computed with an FFT."""
import numpy as np

from evoteam.servers.bench.measurement.program import ProgramFailure, run_program

BEST_KNOWN = 0.380859


def max_overlap(h):
    n = h.size
    size = 1 << int(np.ceil(np.log2(2 * n)))
    fh = np.fft.rfft(h, size)
    fg = np.fft.rfft(1.0 - h, size)
    corr = np.fft.irfft(fh * np.conj(fg), size)
    return float(corr.max() * (2.0 / n))


def evaluate(program_path):
    result = run_program(program_path, "run")
    if isinstance(result, dict):
        result = result.get("h")
    h = np.asarray(result, dtype=np.float64) if result is not None else np.zeros(0)
    if h.ndim != 1 or not 10 <= h.size <= 200_000:
        raise ProgramFailure("INCORRECT_SHAPE", f"run() must return a 1-D array of 10 to 200000 values, got shape {h.shape}")
    if not np.isfinite(h).all():
        return {"status": "INCORRECT_NUMERICAL", "error": "h has NaN/inf values", "valid": 0}
    if h.min() < -1e-9 or h.max() > 1 + 1e-9:
        return {"status": "INCORRECT_NUMERICAL", "valid": 0,
                "error": f"h must stay within [0, 1]; it ranges over [{h.min():.6g}, {h.max():.6g}]"}
    integral = float(h.sum() * 2.0 / h.size)
    if abs(integral - 1.0) > 1e-6:
        return {"status": "INCORRECT_NUMERICAL", "valid": 0,
                "error": f"the integral of h must be 1 (got {integral:.9g}); rescale h"}
    overlap = max_overlap(np.clip(h, 0.0, 1.0))
    return {"overlap": overlap, "valid": 1, "combined_score": BEST_KNOWN / overlap, "steps": int(h.size)}
