"""Prefix-cache reuse: what the server observed (counter deltas over the run, scraped, or the simulated
engine's own counts) beside what the workload's prefix structure allows (workloads.segments.reuse_ratio)."""

from __future__ import annotations

from ..prometheus import delta


def observed_hit_rate(rows: list[dict]) -> float | None:
    """The hit rate vLLM's counters (prefix_cache_hits / prefix_cache_queries) show over the run."""
    q = delta(rows, "vllm:prefix_cache_queries_total") or delta(rows, "vllm:prefix_cache_queries")
    h = delta(rows, "vllm:prefix_cache_hits_total") or delta(rows, "vllm:prefix_cache_hits")
    return h / q if q and h is not None else None


def prefix_block(
    hit_rate: float | None, expected: float | None, source: str, enabled: bool | None = None
) -> dict | None:
    """summary.json's `prefix_cache` (None when neither number is known). `enabled` is known for the
    simulated engine only: with caching off the workload's reuse is still stated (what was left unused)."""
    if hit_rate is None and (expected is None or not expected):
        return None
    out = {"hit_rate": hit_rate, "expected_hit_rate": expected, "observed_by": source if hit_rate is not None else None}
    return out | ({"enabled": enabled} if enabled is not None else {})


def observed_block(rows: list[dict], expected: float | None) -> dict:
    """summary.json's `prefix_cache` for a live run: the server's counters over the run (scraped rows)
    beside the workload's own reuse; {} when neither is known."""
    block = prefix_block(
        observed_hit_rate(rows), expected, "the server's vllm:prefix_cache_hits / prefix_cache_queries"
    )
    return {"prefix_cache": block} if block else {}


TOLERANCE = 0.05  # prefixes rounded to whole blocks and the chat template's shared tokens move a hit rate a little


def verify_target(pc: dict | None, target: float, by_usage: float | None, priming: dict | None) -> dict:
    """A controlled-hit-rate workload's check: the hit rate its measured requests got (their usage's cached tokens
    where the server said, else the prefix-cache counters) against the rate it states, within TOLERANCE.
    verified None: nothing measured it."""
    pc = dict(pc or {"hit_rate": None, "expected_hit_rate": None, "observed_by": None})
    measured, by = (by_usage, "usage") if by_usage is not None else (pc.get("hit_rate"), "counters")
    if measured is None and pc.get("enabled") is False:
        measured, by = 0.0, "caching off"  # the simulated engine's cache was off: nothing could hit
    ok = None if measured is None else abs(measured - target) <= TOLERANCE
    return pc | {
        "target_hit_rate": target,
        "measured_hit_rate": measured,
        "measured_by": by if measured is not None else None,
        "verified": ok,
        "tolerance": TOLERANCE,
        "primed": priming,
    }


def describe(pc: dict | None) -> str | None:
    """ "hit rate 80.0% (the workload allows 82.0%)", "off (...)", or None where there is nothing to say
    (no block, or unique prompts that nothing could reuse): the console's and the report's words."""
    if not pc or (pc.get("expected_hit_rate") is None and not pc.get("hit_rate")):
        return None
    hr, ex = pc.get("hit_rate"), pc.get("expected_hit_rate")
    head = "off" if pc.get("enabled") is False else "hit rate " + ("-" if hr is None else f"{hr:.1%}")
    return head + ("" if ex is None else f" (the workload allows {ex:.1%})") + _target_words(pc)


def _target_words(pc: dict) -> str:
    """ "; target 50.0%: measured 49.1% (usage) after 2 prefixes primed, verified (±5 pts)" (empty without a
    stated target)."""
    t = pc.get("target_hit_rate")
    if t is None:
        return ""
    m, ok = pc.get("measured_hit_rate"), pc.get("verified")
    if m is None:
        return f"; target {t:.1%}: not measured (the server reports neither cached tokens nor cache counters)"
    verdict = "verified" if ok else "NOT met"
    primed = pc.get("primed") or {}
    said = f" after {primed['requests']} prefixes primed" if primed.get("requests") else ""
    return (
        f"; target {t:.1%}: measured {m:.1%} ({pc['measured_by']}){said}, {verdict} (±{pc['tolerance'] * 100:.0f} pts)"
    )
