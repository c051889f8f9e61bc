"""DistServe's max goodput rate: the highest arrival rate whose SLO attainment stays >= a target, found
by bracketing (doubling/halving) then geometric bisection, each decision backed by enough requests.
The probes run on a sweep backend (backends.py): simulated, live servers per cell, or a running one."""

from __future__ import annotations

import json
import math
import os

from ..engine.config import EngineConfig
from ..engine.layout import ClusterSpec
from ..errors import TargetError, UsageError
from ..limits import TARGET_ATTAINMENT
from ..metrics.stats import wilson
from .grid import cell_config
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
        """One probe. The evaluator returns (met, sent) or (met, sent, facts): a live probe stopped early
        says so (stopped_early, planned); it is scored on the requests it sent, so one that met the SLO
        on everything it sent never fails."""
        k, n, *facts = self.evaluate(rate, scale)
        lo, hi = wilson(k, n)
        p = {
            "rate": rate,
            "requests": n,
            "attainment": k / n if n else 0.0,
            "lo": lo,
            "hi": hi,
            "pass": n > 0 and (k / n >= self.target or k == n),
        }
        if facts:
            p.update(facts[0])
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


def find_max_rate(
    evaluate,
    target: float = TARGET_ATTAINMENT,
    start: float = 1.0,
    rel_tol: float = 0.05,
    max_probes: int = 24,
    on_probe=None,
    max_scale: int = 4,
) -> dict:
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
    return {
        "target": target,
        "max_rate": good["rate"] if good else None,
        "bracket": [good["rate"] if good else 0.0, bad["rate"] if bad else None],
        "conclusive": bool(good and bad and s.clear(good, bad)),
        "probes": s.probes,
    }


def per_gpu(r: dict, layout: ClusterSpec, cfg: EngineConfig) -> dict:
    """DistServe's headline for one cell: its layout, GPUs in all, and max goodput rate per GPU."""
    gpus = sum(layout.gpus(cfg).values())
    mr = r.get("max_rate")
    return {"layout": layout.label(), "gpus": gpus, "max_rate_per_gpu": mr / gpus if mr else None}


def search_max_rates(
    s: SweepSetup, backend, target: float, max_probes: int, on_start=None, on_probe=None, on_result=None
) -> list[dict]:
    """Per cell (or once, for a backends.External server): the max goodput rate on the backend; writes
    max_rate.json in s.out_dir."""
    if s.plan.sessions or s.spec.generator == "trace":
        raise UsageError(
            "--find-max-rate scales an arrival rate: sessions and traces keep their own timing "
            "(use --trace-speedup or the session arrival rate instead)"
        )
    os.makedirs(s.out_dir)
    external = getattr(backend, "base_url", None)
    results = []
    for c in [None] if external else s.cells:
        label = external if c is None else c.label
        if on_start:
            on_start(label)
        probes_dir = os.path.join(s.out_dir, "probes", label.replace("/", "_").replace(":", "_").replace(",", "_"))
        try:
            with backend.evaluator(s, c, probes_dir) as evaluate:
                r = find_max_rate(
                    evaluate,
                    target=target,
                    start=s.plan.arrival.mean_rate or 1.0,
                    on_probe=on_probe,
                    max_probes=max_probes,
                )
        except TargetError as e:
            r = {"error": f"server failed to start: {e}"}
        r["cell"] = label
        if c is not None:
            r.update(per_gpu(r, s.layout(c), cell_config(s.base, c)))
        results.append(r)
        if on_result:
            on_result(r)
    with open(os.path.join(s.out_dir, "max_rate.json"), "w", encoding="utf-8") as f:
        json.dump({"meta": s.meta, "results": results}, f, indent=2, default=str)
    return results
