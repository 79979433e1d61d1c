"""Faster: stay in float32, get the sum of squares from einsum, scale in place."""
import numpy as np


def run(hidden_states, weight, eps):
    h = hidden_states.shape[-1]
    sumsq = np.einsum("ij,ij->i", hidden_states, hidden_states)
    inv = 1.0 / np.sqrt(sumsq / np.float32(h) + np.float32(eps))
    out = hidden_states * inv[:, None].astype(np.float32)
    out *= weight
    return out
