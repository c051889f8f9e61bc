"""Embeddings, rerank and score requests (client/unary.py): one JSON body each, so their latency is the
whole request (E2E; TTFT is the same instant) and their throughput is in items (texts embedded,
documents ranked) as well as requests. A latency SLO judges them through the usual `e2el` clause.
Pure numpy."""

from __future__ import annotations

import numpy as np

from .derived import RequestMetrics
from .dist import dist


def pooling_block(c: RequestMetrics, duration: float) -> dict | None:
    """summary.json's `pooling` (None when the run has no one-body requests)."""
    cols = c.cols
    has = cols.items >= 0
    if not has.any():
        return None
    ok = has & c.ok
    items = cols.items[ok].astype(float)

    def per_s(v: float) -> float | None:
        return float(v / duration) if duration > 0 else None

    return {
        "requests": int(has.sum()),
        "items": int(items.sum()),
        "items_per_s": per_s(items.sum()),
        "prompt_tokens_per_s": per_s(float(cols.prompt_tokens[ok].sum())),
        "batch_size": {
            "mean": float(items.mean()) if items.size else None,
            "p50": float(np.percentile(items, 50)) if items.size else None,
            "p90": float(np.percentile(items, 90)) if items.size else None,
            "max": int(items.max()) if items.size else None,
        },
        "latency_ms": dist(c.e2e[ok].copy()),
    }
