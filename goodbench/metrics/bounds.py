"""How far a run's measurement error could move its verdict. A run whose load generator fell behind
(schedule lag) or stamped chunks late (client stamp error) is not wrong by an unknown amount: each
latency is off by at most the measured error. When no clause can cross its threshold within that error
the run can still be judged (gating.py decides); this module computes the two extremes. Pure numpy."""

from __future__ import annotations

import numpy as np

from ..records import request_slo
from .derived import RequestMetrics


def _shifted(c: RequestMetrics, slo: dict, err_ms: float) -> np.ndarray:
    """Per request: every clause holds with each latency err_ms worse (err_ms < 0: better). A TPOT moves
    by the error of its two ends spread over its gaps, 2 * err / (tokens - 1)."""
    m = c.ok & ~np.isnan(c.first)
    err_s = err_ms / 1000.0
    with np.errstate(invalid="ignore", divide="ignore"):
        for k, ms in slo.items():
            if k == "tpot":
                gaps = np.maximum(c.out - 1, 1)
                v = np.nan_to_num(c.tpot, nan=0.0) + np.where(c.out >= 2, 2 * err_s / gaps, 0.0)
            else:
                v = {"ttft": c.ttft, "ttfo": c.ttfo, "e2el": c.e2e, "max_itl": c.max_itl}[k] + err_s
            m &= v * 1000.0 <= ms
    return m


def verdict_bounds(c: RequestMetrics, slo: dict | None, duration: float, err_ms: float) -> dict:
    """summary.json's `verdict_bounds`: the error bound and, for the per-request SLO, attainment and
    goodput at its two ends [every latency err_ms worse, every latency err_ms better]."""
    out: dict = {"error_ms": float(err_ms)}
    slo = request_slo(slo)
    issued = len(c.ok)
    if slo and issued:
        worse, better = (_shifted(c, slo, s * err_ms) for s in (1, -1))
        out["slo_attainment"] = [float(worse.sum() / issued), float(better.sum() / issued)]
        if duration > 0:
            out["goodput"] = [float(worse.sum() / duration), float(better.sum() / duration)]
    return out
