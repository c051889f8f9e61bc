"""Other tools' definitions of ITL and TPOT where they differ from goodbench's (docs/definitions.md
says who uses each), so numbers from different tools can be reconciled. Pure numpy."""

from __future__ import annotations

import numpy as np

from .derived import RequestMetrics
from .dist import dist


def variants(c: RequestMetrics, sel: np.ndarray, itl: dict) -> dict:
    """Per-request values, percentiles across requests; `itl` is goodbench's own pooled ITL dist."""
    ok = c.ok & sel & ~np.isnan(c.first)
    chunk_mean = c.chunk_mean_itl
    with np.errstate(invalid="ignore", divide="ignore"):
        incl = np.where(c.out >= 1, c.e2e / c.out, np.nan)
    return {
        "itl_per_request_ms": {
            "defined_as": "per request (E2E - TTFT) / (output_tokens - 1); percentiles across requests",
            "used_by": "GenAI-Perf, AIPerf (their ITL); guidellm ITL",
            **dist(c.tpot[ok & ~np.isnan(c.tpot)]),
        },
        "itl_per_request_chunk_mean_ms": {
            "defined_as": "per request mean gap between content chunks; percentiles across requests",
            "used_by": "LLMPerf-style per-request ITL",
            **dist(chunk_mean[ok & ~np.isnan(chunk_mean)]),
        },
        "itl_chunk_pooled_ms": {
            "defined_as": "every gap between content chunks, pooled across requests (a chunk of k tokens is one gap)",
            "used_by": "vllm bench serve, SGLang bench_serving; goodbench ITL when every chunk carries one token",
            **(
                {k: v for k, v in itl.items() if k != "ci"} if c.itl is c.gaps else dist(c.gaps[c.gap_mask(c.ok & sel)])
            ),
        },
        "tpot_incl_ttft_ms": {
            "defined_as": "per request E2E / output_tokens (the first token's wait included)",
            "used_by": "guidellm time per output token",
            **dist(incl[ok & ~np.isnan(incl)]),
        },
    }
