"""Rate probes: the sweep's plan at another arrival rate (the same requests and seed), with more
requests when a decision needs them, evaluated on the simulated engine. The live evaluator is in
live.py; the search that calls them, maxrate.py."""

from __future__ import annotations

from dataclasses import replace

from ..arrivals import ArrivalSpec, at_offered_rate, span_rate
from ..engine.config import EngineConfig
from ..engine.layout import ClusterSpec
from ..engine.virtual import simulate
from ..metrics import summarize
from ..records import RunMeta, RunResult
from ..workloads import Plan


def scaled(requests, scale: int):
    """The requests `scale` times over (fresh ids): a probe that needs more samples."""
    if scale <= 1:
        return list(requests)
    return [replace(r, id=f"{r.id}.{k}") for k in range(scale) for r in requests]


def at_rate(arrival: ArrivalSpec, rate: float) -> ArrivalSpec:
    """The workload's process at another rate (Poisson for processes without a rate)."""
    return replace(
        arrival, kind="poisson" if arrival.kind in ("closed", "workload", "trace") else arrival.kind, rate=rate
    )


def probe_plan(plan: Plan, rate: float, scale: int, seed: int) -> tuple[Plan, dict]:
    """The plan's requests (`scale` times over) on a schedule that offers `rate` over its span, and the
    probe's rates: `offered_rate` (the schedule's own, which the search and its verdict use) and
    `nominal_rate` (the process's rate parameter that drew it)."""
    reqs = scaled(plan.requests, scale)
    a, t = at_offered_rate(at_rate(plan.arrival, rate), rate, len(reqs), seed)
    return Plan(reqs, t, a), {"offered_rate": span_rate(t) or rate, "nominal_rate": a.rate}


def probe_facts(summary: dict, rates: dict) -> tuple[int, int, dict]:
    """(met, issued, facts) from a probe's summary: its rates and the share of its sends inside the
    saturation analysis's steady-state window (None where it could not judge: too few sends)."""
    facts = dict(rates, steady_share=summary.get("saturation", {}).get("steady_share"))
    return summary.get("slo_met") or 0, summary["requests"]["issued"], facts


def rate_evaluator(engine_cfg: EngineConfig, plan: Plan, slo: dict, seed: int, layout: ClusterSpec | None = None):
    """evaluate(rate, scale) -> (met, issued, facts) for maxrate.find_max_rate: the plan's requests
    offered at `rate` (probe_plan), simulated on one instance or on a layout of instances (replicas,
    prefill/decode)."""

    def evaluate(rate: float, scale: int = 1):
        probe, rates = probe_plan(plan, rate, scale, seed)
        out = simulate(engine_cfg, probe, layout)
        s = summarize(RunResult(RunMeta("probe", mode="simulate", slo=slo), out.records), slo=slo, ci=False)
        return probe_facts(s, rates)

    return evaluate
