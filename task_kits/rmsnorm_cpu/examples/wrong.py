"""Wrong: divides by the root of the mean square but forgets the weight."""
import numpy as np


def run(hidden_states, weight, eps):
    ms = np.mean(hidden_states * hidden_states, axis=-1, keepdims=True)
    return (hidden_states / np.sqrt(ms + eps)).astype(np.float32)
