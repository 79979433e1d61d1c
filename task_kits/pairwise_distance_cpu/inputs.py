"""Input generator for pairwise_distance_cpu: two clouds with an offset between them."""
import numpy as np


def make_inputs(axes, seed, device):
    rng = np.random.default_rng(seed)
    n, m, d = axes["n"], axes["m"], axes["d"]
    x = rng.random((n, d), dtype=np.float32)
    y = rng.random((m, d), dtype=np.float32)
    y += np.float32(0.25)
    return {"x": x, "y": y}
