"""The 1-D toy regression problem of the SLANG/VOGN papers' figures, shared by the examples.

``y = x^3 + eps`` with ``x ~ U(-4, 4)`` and ``eps ~ N(0, 3^2)``.
"""

import numpy as np

NOISE_STD = 3.0


def make_data(n=30, seed=0):
    """``n`` rows of the toy problem: ``X`` of shape (n, 1) and ``y`` of shape (n,)."""
    rng = np.random.RandomState(seed)
    X = rng.uniform(-4.0, 4.0, size=(n, 1))
    y = X[:, 0] ** 3 + NOISE_STD * rng.standard_normal(n)
    return X, y
