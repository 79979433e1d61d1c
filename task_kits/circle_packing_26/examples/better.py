"""Better: a 5 x 5 grid of radius 0.1 plus one small circle in a gap between four of them."""
import numpy as np


def run_packing():
    centers = [(0.1 + 0.2 * i, 0.1 + 0.2 * j) for j in range(5) for i in range(5)]
    gap = 0.1 * np.sqrt(2.0) - 0.1 - 1e-12
    centers.append((0.2, 0.2))
    radii = [0.1] * 25 + [gap]
    return np.array(centers), np.array(radii)
