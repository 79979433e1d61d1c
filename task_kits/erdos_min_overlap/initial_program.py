"""Initial program: h = 1/2 everywhere on [0, 2] (overlap 1/2)."""
import numpy as np


def run():
    return np.full(400, 0.5)
