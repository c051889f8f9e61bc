"""One distribution summary (percentiles with n, mean, max, optional intervals). Pure numpy."""

from __future__ import annotations

import numpy as np

from .stats import order_stat_ci, order_stat_ranks, percentile_ci, resampled

PCTS = (50, 90, 95, 99)


def empty() -> dict:
    return {"p50": None, "p90": None, "p95": None, "p99": None, "mean": None, "max": None, "n": 0}


def dist(values_s: np.ndarray, ci: bool = False, groups: np.ndarray | None = None) -> dict:
    """Percentiles (linear interpolation, as numpy's default), mean, max in ms, always with n; with ci,
    a 95% interval per percentile (see stats). Sorts the input in place by one partition: pass a
    temporary (a boolean-indexed copy), never an array that is used afterwards."""
    v = np.asarray(values_s)
    if v.dtype.kind != "f":
        v = v.astype(float)
    n = int(v.size)
    if n == 0:
        return empty()
    out_ci = None
    ranks = []
    if ci and n >= 2:
        if resampled(n, groups):
            out_ci = percentile_ci(v, PCTS, groups=groups)
        else:
            ranks = [order_stat_ranks(n, p) for p in PCTS]
    mean, mx = float(v.mean(dtype=np.float64)) * 1000.0, float(v.max()) * 1000.0
    pos = [q / 100.0 * (n - 1) for q in PCTS]
    kth = sorted(
        {int(np.floor(x)) for x in pos}
        | {min(int(np.floor(x)) + 1, n - 1) for x in pos}
        | {r for pair in ranks for r in pair}
    )
    v.partition(kth)
    pct = []
    for x in pos:
        lo = int(np.floor(x))
        hi = min(lo + 1, n - 1)
        a, b = float(v[lo]), float(v[hi])
        pct.append((a + (x - lo) * (b - a)) * 1000.0)
    if ranks:
        out_ci = order_stat_ci(v, ranks, PCTS, groups)
    d = {
        "p50": float(pct[0]),
        "p90": float(pct[1]),
        "p95": float(pct[2]),
        "p99": float(pct[3]),
        "mean": mean,
        "max": mx,
        "n": n,
    }
    if out_ci:
        d["ci"] = {k: ([x * 1000.0 for x in val] if isinstance(val, list) else val) for k, val in out_ci.items()}
    return d


def ratio(d: dict) -> float | None:
    """p99 / p50 of a dist (the head-of-line signature), None without samples."""
    if d["n"] == 0 or not d["p50"]:
        return None
    return d["p99"] / d["p50"]
