"""Wrong: the integral of h is 2, not 1."""
import numpy as np


def run():
    return np.ones(400)
