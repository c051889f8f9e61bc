"""Token-length sampling for synthetic classes. Pure numpy."""

from __future__ import annotations

import math

import numpy as np

from .spec import LengthDist


def sample_lengths(d: LengthDist, n: int, rng: np.random.Generator) -> np.ndarray:
    """n lengths from d, rounded and clamped to [max(1, d.min), d.max]."""
    if d.dist == "constant":
        x = np.full(n, float(d.value))
    elif d.dist == "uniform":
        x = rng.integers(d.min, d.max + 1, n).astype(float)
    elif d.dist == "normal":
        x = rng.normal(d.mean, d.std, n)
    elif d.dist == "lognormal":
        x = rng.lognormal(math.log(d.median), d.sigma, n)
    else:
        raise ValueError("dataset lengths come from the dataset")
    return np.clip(np.rint(x), max(1, d.min), d.max).astype(int)
