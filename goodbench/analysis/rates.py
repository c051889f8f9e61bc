"""Rate probes: the sweep's plan at another arrival rate (the same requests and seed), with more
requests when a decision needs them, evaluated on the simulated engine. The live evaluator is in
live.py; the search that calls them, maxrate.py."""

from __future__ import annotations

from dataclasses import replace

from ..arrivals import ArrivalSpec, offsets as arrival_offsets
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


def rate_evaluator(engine_cfg: EngineConfig, plan: Plan, slo: dict, seed: int, layout: ClusterSpec | None = None):
    """evaluate(rate, scale) -> (met, issued) for maxrate.find_max_rate: the plan's requests at `rate`
    simulated on one instance or on a layout of instances (replicas, prefill/decode)."""

    def evaluate(rate: float, scale: int = 1):
        a = at_rate(plan.arrival, rate)
        reqs = scaled(plan.requests, scale)
        out = simulate(engine_cfg, Plan(reqs, arrival_offsets(a, n=len(reqs), seed=seed), a), layout)
        s = summarize(RunResult(RunMeta("probe", mode="simulate", slo=slo), out.records), slo=slo, ci=False)
        return s.get("slo_met") or 0, s["requests"]["issued"]

    return evaluate
