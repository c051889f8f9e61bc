"""The `cost` block of a simulated summary: what the GPUs cost for the run, per delivered token.
Only requests that met the SLO count as delivered (without an SLO: every successful request)."""

from __future__ import annotations

import numpy as np

from ..engine.prices import cost_block
from .derived import RequestMetrics


def completed_output_tokens(cols: RequestMetrics) -> int:
    """Output tokens of the requests that completed with a first token (the energy and frontier blocks' all)."""
    return int(cols.out[cols.ok & ~np.isnan(cols.first)].sum())


def delivered_output_tokens(cols: RequestMetrics, slo: dict | None) -> int:
    """Output tokens of the requests that met the SLO (without one: every completed request's)."""
    met = cols.meets(slo)
    return completed_output_tokens(cols) if met is None else int(cols.out[met].sum())


def cost_summary(
    cols: RequestMetrics, slo: dict | None, gpus: dict[str, int], prices: dict[str, float], summary: dict
) -> dict:
    """{"cost": {...}} for summary.json (engine.prices.cost_block defines every key); cols: the run's
    measured requests (warm-up excluded)."""
    goodput = summary.get("goodput") if slo else summary.get("request_throughput")
    return {"cost": cost_block(gpus, prices, delivered_output_tokens(cols, slo), goodput, summary["duration_s"])}
