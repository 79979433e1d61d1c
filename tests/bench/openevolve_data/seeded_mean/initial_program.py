"""Guess a number close to each instance's hidden target (SkyDiscover-style test data)."""


# EVOLVE-BLOCK-START
def solve(instance):
    """Return a guess for the instance; the evaluator scores closeness to its target."""
    return 50.0
# EVOLVE-BLOCK-END
