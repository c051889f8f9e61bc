"""The engine in virtual time: a plan (workloads.plan.Plan) through one instance or a layout of
instances (engine/layout.py), orders of magnitude faster than real time, with no sockets.

    simulate(cfg, plan)                       one instance (instance.py)
    simulate(cfg, plan, ClusterSpec(...))     replicas or prefill/decode instances (cluster.py)

Open loops, closed loops and multi-turn sessions run the same way on both (arrivals.py)."""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import UsageError
from ...records import RequestRecord
from ..config import EngineConfig
from ..core import Engine
from ..costmodel import CostModel
from ..layout import ClusterSpec
from ..router import front_end_for
from .arrivals import arrivals_for
from .cluster import ClusterSim
from .instance import instance_stats, run_instance
from .recorder import prompt_hashes

__all__ = ["Simulated", "simulate"]


@dataclass
class Simulated:
    """A simulation's records (one per request sent) and its engines' counters (steps, preemptions,
    largest step, prefix-cache queries and hits; with several instances, per instance too)."""

    records: list[RequestRecord]
    stats: dict


def simulate(
    cfg: EngineConfig,
    plan,
    layout: ClusterSpec | None = None,
    *,
    cost: CostModel | None = None,
    trace_path: str | None = None,
    max_virtual_s: float | None = None,
    fast: bool = True,
    step_scale: float = 1.0,
) -> Simulated:
    """The plan's requests through the engine in virtual time. layout: several instances (None or one
    instance: simulate's own loop). cost: a cost model to use instead of the config's (tests,
    calibration). trace_path: write each step to a JSONL step trace (one instance only). step_scale:
    every step time times this (a sweep asks what its verdicts would be at the engine's error)."""
    own = (cost or CostModel.for_config(cfg.resolved())).scaled(step_scale)
    many = layout is not None and layout.many  # the front end is the (base) config's, on every layout
    front = front_end_for(layout.router, many, own.front_end) if many else own.front_end
    arr = arrivals_for(plan, front, (layout.prefill if layout.disaggregated else layout.replicas) if many else 1)
    if layout is not None and layout.many:
        if trace_path:
            raise UsageError("--step-trace is for one instance; drop it with --replicas / --disaggregate")
        if max_virtual_s is not None:
            raise UsageError("max_virtual_s is for one instance")
        sim = ClusterSim(layout, cfg.resolved(), plan.requests, cost, step_scale)
        sim.prime(getattr(plan, "primes", ()))
        return Simulated(sim.run(arr), sim.stats())
    eng = Engine(cfg, own)
    for p in getattr(plan, "primes", ()):  # a priming phase before the clock: its prefixes are cached
        eng.kv.prime(prompt_hashes(p, eng.cfg.block_size))
    recs = run_instance(eng, plan.requests, arr, trace_path=trace_path, max_virtual_s=max_virtual_s, fast=fast)
    return Simulated(recs, instance_stats(eng))
