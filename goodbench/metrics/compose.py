"""The one summary composer: records (or columns) + the run's metadata + the server's scraped metrics
-> summary.json. Every path calls it: the end of `goodbench run`, `simulate`, sweep cells, the locust
master, `gb.summarize`, the report. What it needs besides the records is kept in the run directory
(run.json's meta, server_metrics.jsonl), so recomputing a summary gives the one the run wrote. Pure.

Blocks beyond metrics.summary.summarize's, by what the run has:
  live runs (meta.mode open/closed)   server_timing (server /metrics histograms), prefix_cache (counters),
                                      client_lag (meta.client_lag), engine_lateness (goodbench's engine)
  simulated runs (meta.engine_stats)  simulation (steps, preemptions, speed-up, notes), prefix_cache
                                      (the engine's own counts), engine_uncertainty (how sure the cost
                                      model is in the run's regime), cost (meta.gpus and meta.prices)"""

from __future__ import annotations

import numpy as np

from ..engine.uncertainty import engine_uncertainty
from ..records import RunMeta
from .cost import completed_output_tokens, cost_summary, delivered_output_tokens
from .derived import RequestMetrics, measured_arrays
from .energy import energy_block, energy_cost, simulated_block
from .frontier import frontier_block
from .lora import observed as lora_observed
from .media import media_block
from .prefix import observed_block, prefix_block, verify_target
from .saturation import waiting_series
from .servertiming import server_timing, step_lateness
from .speculative import client_view, observed, simulated, with_classes
from .summary import summarize

LIVE_MODES = ("open", "closed")


def compose(
    result,
    *,
    rows: list[dict] = (),
    slo: dict | None = None,
    ci: bool = True,
    errors: tuple[str, ...] | None = None,
    prepared: RequestMetrics | None = None,
    telemetry: list[dict] | None = None,
) -> dict:
    """summary.json for a RunResult or RunArrays (its meta says what kind of run it was). rows: the
    server's scraped metrics (server_metrics.jsonl); slo: judge against this SLO instead of the run's;
    ci=False skips intervals, variants and HOL attribution (sweep cells, rate probes); errors: a few
    failed requests' error texts; prepared: RequestMetrics of the result already built by the caller;
    telemetry: gpu_telemetry.jsonl's rows (a run that sampled GPU power: the energy block)."""
    meta: RunMeta = result.meta
    c = prepared if prepared is not None else RequestMetrics(measured_arrays(result))
    rows = list(rows)
    live = meta.mode in LIVE_MODES
    engine = step_lateness(rows, meta.engine is not None) if live else None
    s = summarize(result, slo=slo, ci=ci, prepared=c, queue=waiting_series(rows), errors=errors, engine=engine)
    if live:
        s["server_timing"] = server_timing(rows, s.get("ttft_ms"))
        s.update(observed_block(rows, meta.expected_prefix_reuse))
        lora = lora_observed(rows)
        if lora:
            s["lora"] = lora
        if meta.client_lag is not None:  # the load generator's self-check (client/lag.py)
            s["client_lag"] = meta.client_lag
        if engine is not None:
            s["engine_lateness"] = engine
    if meta.engine_stats is not None:
        s.update(_simulated(s, meta))
    spec = observed(rows) if live else simulated((meta.engine_stats or {}).get("speculative"))
    if spec:
        s["speculative"] = with_classes(spec | client_view(c.out, c.nchunks, c.ok, c.cols.class_of()))
    if meta.target_hit_rate is not None:  # a controlled hit rate: the run checks the one it states
        by_usage = (s.get("replicas") or {}).get("hit_rate")
        s["prefix_cache"] = verify_target(s.get("prefix_cache"), meta.target_hit_rate, by_usage, meta.priming)
    media = media_block(c.cols, c.ttft, c.ok)
    if media:
        s["media"] = media
    s.update(frontier_block(c, s["slo"], meta.gpus, s["duration_s"]))
    if meta.gpu_telemetry:
        s["energy"] = _energy(c, s["slo"], telemetry or []) | {"judged": bool(s["slo"])}
    elif (meta.engine_stats or {}).get("energy"):
        good = delivered_output_tokens(c, s["slo"])
        s["energy"] = simulated_block(meta.engine_stats["energy"], s["duration_s"], completed_output_tokens(c), good)
        s["energy"]["judged"] = bool(s["slo"])  # good tokens met an SLO (else: every completed request's)
    if s.get("energy") and meta.electricity:
        s["energy"] |= energy_cost(s["energy"], meta.electricity)
    if meta.gpus:
        s.update(cost_summary(c, s["slo"], meta.gpus, meta.prices or {}, s))
    return s


def _energy(c: RequestMetrics, slo: dict | None, telemetry: list[dict]) -> dict:
    """The energy block over the measured window: the first measured send to the last token."""
    sent, last = c.sent[~np.isnan(c.sent)], c.last[~np.isnan(c.last)]
    if not sent.size or not last.size:
        return energy_block([], 0.0, 0.0, 0, 0)
    out = completed_output_tokens(c)
    return energy_block(telemetry, float(np.nanmin(sent)), float(last.max()), out, delivered_output_tokens(c, slo))


def _simulated(s: dict, meta: RunMeta) -> dict:
    """The simulation block and the simulated engine's prefix-cache reuse."""
    st = meta.engine_stats
    wall = st.get("wall_s")
    sim = st | {"speedup_vs_real_time": s["duration_s"] / wall if wall else None, "notes": st.get("notes") or []}
    out = {"simulation": sim, "engine_uncertainty": engine_uncertainty(meta.engine, st)}
    q, h = st.get("prefix_cache_queries"), st.get("prefix_cache_hits")
    on = bool((meta.engine or {}).get("enable_prefix_caching", True))
    reuse = prefix_block(h / q if q and on else None, meta.expected_prefix_reuse, "the simulated engine", on)
    return out | ({"prefix_cache": reuse} if reuse else {})
