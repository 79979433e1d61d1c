"""Initial program: a 6 x 5 grid of equal circles, 26 of the 30 places used."""
import numpy as np


def run_packing():
    r = 1.0 / 12.0  # six across
    centers = [((2 * i + 1) * r, (2 * j + 1) * 0.1) for j in range(5) for i in range(6)][:26]
    centers = np.array(centers)
    radii = np.full(26, min(r, 0.1))
    return centers, radii
