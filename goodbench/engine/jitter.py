"""Step-time jitter: a real server's steps scatter around what its step-time model says (the host's
scheduling, the Python loop, a page fault), and a client sees the scatter in every latency. A
deterministic engine gives every idle short request the same TTFT; a real one spreads them, and a
p50 that lands at the top of such a group is then measured on the spread (docs/real-vllm.md: it made
the calibrated engine's TTFT p50 lean 4-17% fast on a real vLLM).

A calibration profile keeps the spread as percentiles of a step-time factor, measured on the runs'
decode-only gaps: each gap over the median gap of the steps with as many requests decoding (thousands
of gaps on a run of a few minutes, none of them touched by the fit). The step-time model gives the
median step (the fit's decode-gap targets are medians), so a step's time is its model time times a
factor drawn from that spread. The draw for step i is a pure function of (salt, i): a simulation is
reproducible, and the fast decode path draws what single steps would."""

from __future__ import annotations

import numpy as np

PERCENTILES = tuple(range(1, 100))  # what a profile keeps: the 1st to 99th (the extremes are one gap each)
MIN_GAPS = 100  # fewer decode-only gaps than this: no spread kept (the steps take their model time)
FLOOR = 0.1  # the least factor kept: chunks read together make gaps near 0, no step is that short
_MASK = (1 << 64) - 1


def unit(salt: int, i: int) -> float:
    """A number in [0, 1) for step i of the engine with this salt (splitmix64: a hash, not a stream)."""
    z = (salt * 0x9E3779B97F4A7C15 + (i + 1) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return ((z ^ (z >> 31)) >> 11) / float(1 << 53)


def at(spread: tuple, u: float) -> float:
    """The spread read at u in [0, 1]: its percentiles spaced evenly, linear between them."""
    x = u * (len(spread) - 1)
    j = int(x)
    if j >= len(spread) - 1:
        return spread[-1]
    return spread[j] + (spread[j + 1] - spread[j]) * (x - j)


def factor(spread: tuple, salt: int, i: int) -> float:
    """Step i's time factor: the spread read at a uniform draw (1.0 with no spread)."""
    return at(spread, unit(salt, i)) if spread else 1.0


def measure(ratios) -> tuple:
    """The spread a profile keeps from decode-only gaps over their batch's median gap: PERCENTILES of
    them, at least FLOOR; () when there are fewer than MIN_GAPS."""
    r = np.asarray(ratios, dtype=float)
    r = r[np.isfinite(r)]
    if len(r) < MIN_GAPS:
        return ()
    return tuple(round(max(float(v), FLOOR), 4) for v in np.percentile(r, PERCENTILES))
