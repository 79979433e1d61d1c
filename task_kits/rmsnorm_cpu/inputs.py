"""Input generator for rmsnorm_cpu: rows of varied scale, weights near one, and one row so small
that eps matters (its mean square is below eps), so a candidate that leaves eps out is wrong.

Uniform values keep generation cheap: the harness makes fresh inputs for every timed call."""
import numpy as np


def make_inputs(axes, seed, device):
    rng = np.random.default_rng(seed)
    t, h = axes["num_tokens"], axes["hidden_size"]
    x = rng.random((t, h), dtype=np.float32)
    x -= np.float32(0.5)
    x *= rng.uniform(1.0, 8.0, size=(t, 1)).astype(np.float32)
    x[rng.integers(t)] *= np.float32(1e-4)
    w = rng.random(h, dtype=np.float32)
    w *= np.float32(0.2)
    w += np.float32(0.9)
    return {"hidden_states": x, "weight": w, "eps": 1e-6}
