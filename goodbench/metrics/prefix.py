"""Prefix-cache reuse: what the server observed (counter deltas over the run, scraped, or the simulated
engine's own counts) beside what the workload's prefix structure allows (workloads.segments.reuse_ratio)."""

from __future__ import annotations


def counter_delta(rows: list[dict], name: str) -> float | None:
    """last - first of a Prometheus counter (summed over its label sets) in server_metrics.jsonl rows."""
    vals = []
    for r in rows:
        found = [v for k, v in (r.get("metrics") or {}).items() if k.split("{")[0] == name]
        if found:
            vals.append(sum(found))
    return vals[-1] - vals[0] if len(vals) >= 2 else None


def observed_hit_rate(rows: list[dict]) -> float | None:
    """The hit rate vLLM's counters (prefix_cache_hits / prefix_cache_queries) show over the run."""
    q = counter_delta(rows, "vllm:prefix_cache_queries_total") or counter_delta(rows, "vllm:prefix_cache_queries")
    h = counter_delta(rows, "vllm:prefix_cache_hits_total") or counter_delta(rows, "vllm:prefix_cache_hits")
    return h / q if q and h is not None else None


def prefix_block(hit_rate: float | None, expected: float | None, source: str, enabled: bool | None = None) -> dict | None:
    """summary.json's `prefix_cache` (None when neither number is known). `enabled` is known for the
    simulated engine only: with caching off the workload's reuse is still stated (what was left unused)."""
    if hit_rate is None and (expected is None or not expected):
        return None
    out = {"hit_rate": hit_rate, "expected_hit_rate": expected, "observed_by": source if hit_rate is not None else None}
    return out | ({"enabled": enabled} if enabled is not None else {})
