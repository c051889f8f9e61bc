"""Step-time jitter: a real server's steps scatter around what its step-time model says (the host's
scheduling, the Python loop, a page fault), and a client sees the scatter in every latency. A
deterministic engine gives every idle short request the same TTFT; a real one spreads them, and a
p50 that lands at the top of such a group is then measured on the spread (docs/real-vllm.md: it made
the calibrated engine's TTFT p50 lean 4-17% fast on a real vLLM).

A calibration profile keeps the spread as the 1st to 99th percentiles of a step-time factor, measured
on the runs' decode-only gaps: each gap over the fitted model's time for that step (the requests then
decoding and their context), over that ratio's median (analysis/calibrate.py, step_spread). A
simulation with the profile takes each step's model time times a factor drawn from the spread (below
the 1st and above the 99th percentile, those), and calibrate fits the terms with its replays scattered
so, since a scattered step is slower on average than its median. The draw for step i is a pure
function of (salt, i): a simulation reproduces, the fast decode path draws what single steps would,
and each engine of a cluster has its own salt. The spread is measured on decode steps and applied to
every step, prefill chunks too."""

from __future__ import annotations

import numpy as np

PERCENTILES = tuple(range(1, 100))  # what a profile keeps: the 1st to 99th (the extremes are one gap each)
MIN_GAPS = 100  # fewer decode-only gaps than this: no spread kept (the steps take their model time)
FLOOR = 0.1  # a gap under this much of its step's time is two tokens read at once, not a step
COALESCED = 0.2  # a run with more such gaps than this share: its gaps are the client's reads (left out)
_MASK = (1 << 64) - 1


def _mix(z):
    """splitmix64's finaliser (64-bit arithmetic on Python ints)."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def unit(salt: int, i: int) -> float:
    """A number in [0, 1) for step i of the engine with this salt (a hash of both, not a stream)."""
    return (_mix((salt * 0x9E3779B97F4A7C15 + (i + 1) * 0xBF58476D1CE4E5B9) & _MASK) >> 11) / float(1 << 53)


def at(spread: tuple, u: float) -> float:
    """The spread read at u in [0, 1): percentile 100u, linear between the kept ones; below the 1st and
    above the 99th, those (1% of steps each). Plain Python: it runs once a step."""
    x = u * (len(spread) + 1) - 1
    if x <= 0:
        return spread[0]
    j = int(x)
    if j >= len(spread) - 1:
        return spread[-1]
    return (spread[j + 1] - spread[j]) * (x - j) + spread[j]


def factor(spread: tuple, salt: int, i: int) -> float:
    """Step i's time factor: the spread read at a uniform draw (1.0 with no spread)."""
    return at(spread, unit(salt, i)) if spread else 1.0


def deciles(spread: tuple) -> tuple[float, float]:
    """The spread's 10th and 90th percentiles: how it is shown (calibrate, explain, engine_uncertainty)."""
    return at(spread, 0.1), at(spread, 0.9)


def measure(ratios) -> tuple:
    """The spread a profile keeps from step-time ratios (a gap over its step's model time, over their
    median): their PERCENTILES, at least FLOOR; () when there are fewer than MIN_GAPS."""
    r = np.asarray(ratios, dtype=float)
    r = r[np.isfinite(r)]
    if len(r) < MIN_GAPS:
        return ()
    return tuple(round(max(float(v), FLOOR), 4) for v in np.percentile(r, PERCENTILES))
