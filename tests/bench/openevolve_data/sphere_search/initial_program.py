"""Random search for the lowest point of a shifted sphere in three dimensions."""
import random


# EVOLVE-BLOCK-START
def search(budget=300, seed=0):
    """Sample points uniformly in the box and keep the best one."""
    rng = random.Random(seed)
    best_value, best_point = float("inf"), None
    for _ in range(budget):
        point = [rng.uniform(-5.0, 5.0) for _ in range(3)]
        value = sum((x - 1.5) ** 2 for x in point)
        if value < best_value:
            best_value, best_point = value, point
    return best_point
# EVOLVE-BLOCK-END


def run():
    """Entry point the evaluator calls: returns a point [x, y, z]."""
    return search()
