"""DistServe's max goodput rate: the highest arrival rate whose SLO attainment stays >= a target, found
by bracketing (doubling/halving) then geometric bisection, each decision backed by enough requests."""

from __future__ import annotations

import asyncio
import json
import math
import os
from dataclasses import replace

from ..arrivals import ArrivalSpec, offsets as arrival_offsets
from ..client.openai import ClientConfig, resolve_endpoint
from ..client.target import resolve_model
from ..engine.cluster import ClusterSpec, simulate_layout
from ..engine.config import EngineConfig
from ..errors import TargetError, UsageError
from ..metrics import summarize
from ..metrics.stats import wilson
from ..records import RunMeta, RunResult
from ..rundir import RunDir
from ..runner import Plan, Progress, RunOptions, run_plan
from .grid import cell_config, layout_spec
from .live import start_server
from .sweep import SweepSetup


class _Search:
    """The probes taken so far and the bracket [good, bad] they establish."""

    def __init__(self, evaluate, target: float, max_probes: int, on_probe):
        self.evaluate, self.target, self.max_probes, self.on_probe = evaluate, target, max_probes, on_probe
        self.probes: list[dict] = []

    @property
    def room(self) -> bool:
        return len(self.probes) < self.max_probes

    def probe(self, rate: float, scale: int = 1) -> dict:
        k, n = self.evaluate(rate, scale)
        lo, hi = wilson(k, n)
        p = {"rate": rate, "requests": n, "attainment": k / n if n else 0.0, "lo": lo, "hi": hi,
             "pass": n > 0 and k / n >= self.target}
        self.probes.append(p)
        if self.on_probe:
            self.on_probe(p)
        return p

    def bracket(self, start: float):
        """Double from start while passing (or halve while failing) until the target is crossed."""
        good = bad = None
        p = self.probe(start)
        if p["pass"]:
            good = p
            while self.room:
                p = self.probe(good["rate"] * 2)
                if not p["pass"]:
                    return good, p
                good = p
        else:
            return self.halve(p, 1, start / 64)
        return good, bad

    def halve(self, bad, scale: int, floor: float):
        """Halve the rate from a failing probe until one passes (or the floor or the probe budget)."""
        while self.room and bad["rate"] > floor:
            p = self.probe(bad["rate"] / 2, scale)
            if p["pass"]:
                return p, bad
            bad = p
        return None, bad

    def bisect(self, good, bad, scale: int, rel_tol: float):
        while good and bad and self.room and bad["rate"] / good["rate"] > 1 + rel_tol:
            p = self.probe(math.sqrt(good["rate"] * bad["rate"]), scale)
            if p["pass"]:
                good = p
            else:
                bad = p
        return good, bad

    def clear(self, good, bad) -> bool:
        return good["lo"] >= self.target and bad["hi"] < self.target

    def recheck(self, good, bad, scale: int):
        """Probe a bracket end whose interval straddles the target again with more requests; fall back
        when a decision is overturned."""
        if good["lo"] < self.target:
            p = self.probe(good["rate"], scale)
            if not p["pass"]:  # disproved: fall back to the best passing rate below it
                bad = p
                below = [q for q in self.probes if q["pass"] and q["rate"] < p["rate"]]
                good = max(below, key=lambda q: (q["rate"], q["requests"])) if below else None
            else:
                good = p
        if good and bad and bad["hi"] >= self.target and self.room:
            p = self.probe(bad["rate"], scale)
            if p["pass"]:
                good = p
                above = [q for q in self.probes if not q["pass"] and q["rate"] > p["rate"]]
                bad = min(above, key=lambda q: (q["rate"], -q["requests"])) if above else None
            else:
                bad = p
        return good, bad


def find_max_rate(evaluate, target: float = 0.9, start: float = 1.0, rel_tol: float = 0.05,
                  max_probes: int = 24, on_probe=None, max_scale: int = 4) -> dict:
    """Highest arrival rate whose SLO attainment stays >= target.

    evaluate(rate, scale) -> (met, issued), scale multiplying the number of requests. Bracket by
    doubling/halving from `start`, then bisect (geometrically) until the bracket is within rel_tol.
    If the Wilson interval at either bracket end still straddles the target, that end is probed again
    with 2x, then 4x (max_scale) the requests, so that each decision rests on enough samples;
    `conclusive` says whether, in the end, the interval at the passing end lies above the target and
    the one at the failing end below it."""
    s = _Search(evaluate, target, max_probes, on_probe)
    good, bad = s.bisect(*s.bracket(start), 1, rel_tol)
    scale = 1
    while good and bad and scale < max_scale and s.room and not s.clear(good, bad):
        scale *= 2  # a decision at a bracket end is not clear yet: probe it again with more requests
        good, bad = s.recheck(good, bad, scale)
        if good is None and bad is not None:  # the passing end was disproved and nothing below passed: look lower
            good, bad = s.halve(bad, scale, start / 64)
        good, bad = s.bisect(good, bad, scale, rel_tol)
    return {"target": target, "max_rate": good["rate"] if good else None,
            "bracket": [good["rate"] if good else 0.0, bad["rate"] if bad else None],
            "conclusive": bool(good and bad and s.clear(good, bad)), "probes": s.probes}


def _scaled(requests, scale: int):
    if scale <= 1:
        return list(requests)
    return [replace(r, id=f"{r.id}.{k}") for k in range(scale) for r in requests]


def _at_rate(arrival: ArrivalSpec, rate: float) -> ArrivalSpec:
    """The workload's process at another rate (Poisson for processes without a rate)."""
    return replace(arrival, kind="poisson" if arrival.kind in ("closed", "workload", "trace") else arrival.kind,
                   rate=rate)


def rate_evaluator(engine_cfg: EngineConfig, requests, arrival: ArrivalSpec, slo: dict, seed: int,
                   layout: ClusterSpec | None = None):
    """evaluate(rate) for find_max_rate: the workload at `rate` (same requests, same seed) simulated on
    one instance or on a layout of instances (replicas, prefill/decode)."""
    layout = layout or ClusterSpec()

    def evaluate(rate: float, scale: int = 1):
        reqs = _scaled(requests, scale)
        offs = arrival_offsets(_at_rate(arrival, rate), n=len(reqs), seed=seed)
        recs, _ = simulate_layout(layout, engine_cfg, reqs, offs)
        s = summarize(RunResult(RunMeta("probe", mode="simulate", slo=slo), recs), slo=slo, ci=False)
        return s.get("slo_met") or 0, s["requests"]["issued"]

    return evaluate


def live_rate_evaluator(base_url: str, requests, arrival: ArrivalSpec, slo: dict, seed: int, out_dir: str,
                        endpoint: str = "/v1/completions", model: str | None = None, api_key: str | None = None):
    """evaluate(rate) for find_max_rate against a real endpoint: each probe is a real-time run of the
    same requests at a Poisson (or the workload's) rate, kept as a run directory under out_dir."""
    name = model or asyncio.run(resolve_model(base_url, api_key))
    ccfg = ClientConfig(base_url=base_url, endpoint=endpoint, model=name, api_key=api_key)

    def evaluate(rate: float, scale: int = 1):
        a = _at_rate(arrival, rate)
        reqs = _scaled(requests, scale)
        plan = Plan(reqs, arrival_offsets(a, n=len(reqs), seed=seed), a)
        run_id = f"probe-{rate:.4f}" + (f"-x{scale}" if scale > 1 else "")
        rd = RunDir.open(out_dir, RunMeta(run_id=run_id, label=a.label, slo=slo, mode="open", requested_rate=rate,
                                          target={"base_url": base_url, "endpoint": endpoint, "model": name}))
        # a probe the server clearly cannot keep up with stops early: what it did not send counts as missed
        run_plan(plan, ccfg, rd, RunOptions(slo=slo, scrape_metrics=False, stop_when_saturated=True, grace_s=1.0),
                 None, None, Progress())
        s = rd.finish(slo=slo, ci=False)
        return s.get("slo_met") or 0, max(s["requests"]["issued"], len(reqs))

    return evaluate


def per_gpu(r: dict, layout: ClusterSpec, cfg: EngineConfig) -> dict:
    """DistServe's headline for one cell: its layout, GPUs in all, and max goodput rate per GPU."""
    gpus = sum(layout.gpus(cfg).values())
    mr = r.get("max_rate")
    return {"layout": layout.label(), "gpus": gpus, "max_rate_per_gpu": mr / gpus if mr else None}


def search_max_rates(s: SweepSetup, target: float, max_probes: int, base_url: str | None = None,
                     live: bool = False, server_cmd: str | None = None, server_timeout: float = 600.0,
                     on_start=None, on_probe=None, on_result=None) -> list[dict]:
    """Per cell (or once against base_url): the max goodput rate; writes max_rate.json in s.out_dir."""
    if s.plan.sessions or s.plan.spec is not None and s.plan.spec.generator == "trace":
        raise UsageError("--find-max-rate scales an arrival rate: sessions and traces keep their own timing "
                         "(use --trace-speedup or the session arrival rate instead)")
    os.makedirs(s.out_dir)
    plan, spec = s.plan, s.spec
    endpoint = resolve_endpoint(None, spec.endpoint)
    results = []
    for c in [None] if base_url else s.cells:
        label = base_url if c is None else c.label
        if on_start:
            on_start(label)
        probes_dir = os.path.join(s.out_dir, "probes", label.replace("/", "_").replace(":", "_").replace(",", "_"))
        layout = None if c is None else layout_spec(c.layout, s.cluster)
        proc = None
        try:
            if base_url:
                evaluate = live_rate_evaluator(base_url, plan.requests, plan.arrival, s.slo, spec.seed, probes_dir,
                                               endpoint)
            elif live or server_cmd:
                os.makedirs(probes_dir, exist_ok=True)
                proc = start_server(cell_config(s.base, c), server_cmd, os.path.join(probes_dir, "server.log"),
                                    server_timeout, layout)
                evaluate = live_rate_evaluator(proc.base_url, plan.requests, plan.arrival, s.slo, spec.seed,
                                               probes_dir, endpoint)
            else:
                evaluate = rate_evaluator(cell_config(s.base, c), plan.requests, plan.arrival, s.slo, spec.seed,
                                          layout)
            r = find_max_rate(evaluate, target=target, start=plan.arrival.mean_rate or 1.0, on_probe=on_probe,
                              max_probes=max_probes)
        except TargetError as e:
            r = {"error": f"server failed to start: {e}"}
        finally:
            if proc is not None:
                proc.close()
        r["cell"] = label
        if layout is not None:
            r.update(per_gpu(r, layout, cell_config(s.base, c)))
        results.append(r)
        if on_result:
            on_result(r)
    with open(os.path.join(s.out_dir, "max_rate.json"), "w", encoding="utf-8") as f:
        json.dump({"meta": s.meta, "results": results}, f, indent=2, default=str)
    return results
