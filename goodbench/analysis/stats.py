"""Confidence intervals for the numbers a verdict rests on. Pure (numpy/scipy)."""

from __future__ import annotations

import math

from scipy.stats import norm


def wilson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a proportion k/n (SLO attainment). (0, 1) when n == 0."""
    if n <= 0:
        return 0.0, 1.0
    z = float(norm.ppf(0.5 + level / 2))
    p = k / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, centre - half), min(1.0, centre + half)


def goodput_interval(k: int, n: int, duration_s: float, level: float = 0.95) -> tuple[float, float]:
    """Goodput = k / duration for k of n requests meeting the SLO; the duration is fixed by the
    schedule, so the uncertainty is the attainment's: n * Wilson(k, n) / duration."""
    if duration_s <= 0:
        return 0.0, 0.0
    lo, hi = wilson(k, n, level)
    return lo * n / duration_s, hi * n / duration_s
