"""The frontier view's numbers: what the fleet pays (output tokens/s per GPU) against what each user feels
(tokens/s per user, 1/TPOT), and the same for good tokens only (requests meeting the SLO, as the goodput
judge counts them). Pure: a run's summary block, and the non-dominated points of a set of (x, y)."""

from __future__ import annotations

import numpy as np

from .cost import completed_output_tokens, delivered_output_tokens
from .derived import RequestMetrics


def frontier_block(cols: RequestMetrics, slo: dict | None, gpus: dict[str, int] | None, duration_s: float) -> dict:
    """summary.json's tok_s_per_user (median over requests of 1/TPOT, requests of 2+ output tokens),
    output_tok_s_per_gpu and good_output_tok_s_per_gpu (None where the run's GPU count is not known: a live
    server's, unless told)."""
    tpot = cols.tpot[cols.ok & ~np.isnan(cols.tpot) & (cols.tpot > 0)]
    per_user = float(np.median(1.0 / tpot)) if tpot.size else None
    n = sum((gpus or {}).values())
    good = delivered_output_tokens(cols, slo)
    per_gpu = n and duration_s > 0
    return {
        "tok_s_per_user": per_user,
        "output_tok_s_per_gpu": completed_output_tokens(cols) / duration_s / n if per_gpu else None,
        "good_output_tok_s_per_gpu": good / duration_s / n if per_gpu else None,
    }


def non_dominated(xs, ys) -> list[bool]:
    """Which points no other point beats on both axes (both higher is better); a point equal to another on
    both is kept."""
    x, y = np.asarray(xs, float), np.asarray(ys, float)
    out = []
    for i in range(len(x)):
        if np.isnan(x[i]) or np.isnan(y[i]):
            out.append(False)
            continue
        better = (x >= x[i]) & (y >= y[i]) & ((x > x[i]) | (y > y[i]))
        out.append(not bool(better.any()))
    return out


def mark(rows: list[dict]) -> list[dict]:
    """on_frontier / on_good_frontier: no other row has more tokens per user and more tokens per GPU."""
    nan = float("nan")
    x = [r["tok_s_per_user"] if r["tok_s_per_user"] is not None else nan for r in rows]
    for key, flag in (("output_tok_s_per_gpu", "on_frontier"), ("good_output_tok_s_per_gpu", "on_good_frontier")):
        y = [r[key] if r[key] is not None else nan for r in rows]
        for r, on in zip(rows, non_dominated(x, y)):
            r[flag] = on
    return rows
