"""DistServe's max goodput rate: the highest offered arrival rate (the probe schedule's own, not the
nominal rate that drew it: a short seeded Poisson draw is not its nominal rate) whose SLO attainment
stays >= a target, found by bracketing (doubling/halving) then geometric bisection, each decision
backed by enough requests, from probes that reached a steady state, and held with 4x the requests.
The probes run on a sweep backend (backends.py): simulated, live servers per cell, or a running one."""

from __future__ import annotations

import json
import math
import os

from .. import gating
from ..engine.config import EngineConfig
from ..engine.layout import ClusterSpec
from ..errors import TargetError, UsageError
from ..limits import CONFIRM_SCALE, STEADY_SHARE, TARGET_ATTAINMENT
from ..metrics.stats import wilson
from .grid import cell_config
from .sweep import SweepSetup

CONFIRMATIONS = 2  # most confirmation probes: one that fails steps the search down, then confirms again
STEP_DOWN = 0.8  # after a failed confirmation, rates step down by this (the failure is usually near the edge)
SAME = 1 - 1e-6  # offered rates closer than this are one rate (schedules of different lengths hit it to rounding)


def probe_passes(met: int, issued: int, target: float) -> bool:
    """A probe's pass/fail, decided here only: attainment >= target on the requests it sent. A live probe
    stopped early is scored on those (the ones cut short count as missed), so one that met the SLO on
    everything it sent never fails. The mark itself is the judge's (gating.attains)."""
    return issued > 0 and (gating.attains(met / issued, target) or met == issued)


def steady(p: dict) -> bool:
    """A probe is conclusive only when its saturation analysis finds a steady-state window covering
    >= STEADY_SHARE of its sends, and it sent them all: a short probe near capacity ends before a queue
    can build, and passes where a longer one fails."""
    share = p.get("steady_share")
    return share is not None and share >= STEADY_SHARE and not p.get("stopped_early")


def _holds(p: dict) -> bool:
    """A probe that passed and reached a steady state: what a rate found must do with more requests."""
    return p["pass"] and p["conclusive"]


def _r(p: dict) -> float:
    """The rate a probe offered (the schedule's own): what the search compares and reports."""
    return p["offered_rate"]


class _Search:
    """The probes taken so far and the bracket [good, bad] they establish. The search steps the rate it
    asks for (`rate`; the evaluators build schedules that offer it); it compares probes of different
    lengths, and reports, by the rate each one's schedule offered (`offered_rate`)."""

    def __init__(self, evaluate, target: float, max_probes: int, on_probe, floor: float):
        self.evaluate, self.target, self.max_probes, self.on_probe = evaluate, target, max_probes, on_probe
        self.floor = floor
        self.reserve = 1 if max_probes > 2 else 0  # kept for the confirmation
        self.probes: list[dict] = []
        self.stepped_down: list[float] = []  # rates whose confirmation failed

    @property
    def room(self) -> bool:
        return len(self.probes) < self.max_probes - self.reserve

    def probe(self, rate: float, scale: int = 1, **mark) -> dict:
        """One probe. The evaluator returns (met, sent) or (met, sent, facts): the rates it offered
        (offered_rate, nominal_rate), the steady-state window's share of its sends (steady_share; an
        evaluator of the rate alone, without a run to analyse, is taken as steady), and a live probe
        stopped early says so (stopped_early, planned)."""
        k, n, *facts = self.evaluate(rate, scale)
        f = dict(facts[0]) if facts else {}
        lo, hi = wilson(k, n)
        p = {
            "rate": rate,
            "offered_rate": f.pop("offered_rate", rate),
            "nominal_rate": f.pop("nominal_rate", rate),
            "scale": scale,
            "requests": n,
            "attainment": k / n if n else 0.0,
            "lo": lo,
            "hi": hi,
            "pass": probe_passes(k, n, self.target),
            "steady_share": f.pop("steady_share", 1.0),
        }
        p.update(f, **mark)
        p["conclusive"] = steady(p)
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
            return self.halve(p, 1)
        return good, bad

    def halve(self, bad, scale: int, ok=lambda p: p["pass"], factor: float = 0.5):
        """Halve the rate (or step it by `factor`) from a failing probe until one passes (or the floor or
        the probe budget)."""
        while self.room and bad["rate"] > self.floor:
            p = self.probe(bad["rate"] * factor, scale)
            if ok(p):
                return p, bad
            bad = p
        return None, bad

    def bisect(self, good, bad, scale: int, rel_tol: float, ok=lambda p: p["pass"]):
        while good and bad and self.room and bad["rate"] / good["rate"] > 1 + rel_tol:
            p = self.probe(math.sqrt(good["rate"] * bad["rate"]), scale)
            if ok(p):
                good = p
            else:
                bad = p
        return good, bad

    def clear(self, good, bad) -> bool:
        return good["conclusive"] and good["lo"] >= self.target and bad["hi"] < self.target

    def best_below(self, rate: float, scale: int = 1):
        """The passing probe with the highest offered rate below `rate`, among those at least `scale`
        times the requests (shorter ones were optimistic when a longer one failed above them)."""
        below = [q for q in self.probes if _holds(q) and _r(q) < rate * SAME and q["scale"] >= scale]
        return max(below, key=lambda q: (_r(q), q["requests"])) if below else None

    def recheck(self, good, bad, scale: int):
        """Probe a bracket end whose interval straddles the target (or a passing end that never reached
        steady state) again with more requests; fall back when a decision is overturned."""
        if good["lo"] < self.target or not good["conclusive"]:
            p = self.probe(good["rate"], scale)
            if not p["pass"]:  # disproved: fall back to the best passing rate below it
                bad, good = p, self.best_below(_r(p))
            else:
                good = p
        if good and bad and bad["hi"] >= self.target and bad["scale"] < scale and self.room:
            p = self.probe(bad["rate"], scale)
            if p["pass"]:
                good = p
                above = [q for q in self.probes if not q["pass"] and _r(q) * SAME > _r(p)]
                bad = min(above, key=lambda q: (_r(q), -q["requests"])) if above else None
            else:
                bad = p
        return good, bad

    def firm_up(self, good, bad, max_scale: int, rel_tol: float):
        """Re-probe the bracket ends with 2x, then up to max_scale x, the requests until they are clear."""
        scale = 1
        while good and bad and scale < max_scale and self.room and not self.clear(good, bad):
            scale *= 2
            good, bad = self.recheck(good, bad, scale)
            if good is None and bad is not None:  # the passing end was disproved and nothing below passed
                good, bad = self.halve(bad, scale)
            good, bad = self.bisect(good, bad, scale, rel_tol)
        return good, bad

    def confirm(self, good, bad, rel_tol: float):
        """Re-probe the found rate with CONFIRM_SCALE x its probe's requests: it holds when that passes
        and is conclusive. One that does not steps down with probes that long (the short ones were
        optimistic): the best shorter passing rate below, then steps of STEP_DOWN, to a rate that holds, then
        bisection up to the failed one; a rate that holds there has held at that length. Otherwise
        the one below is confirmed, up to CONFIRMATIONS probes. Returns (good, bad, confirmed)."""
        self.reserve = 0
        scale = (good["scale"] if good else 1) * CONFIRM_SCALE
        for tries in range(CONFIRMATIONS + 1):
            if good is not None and good["scale"] >= scale and _holds(good):
                return good, bad, True
            if good is None or not self.room or tries == CONFIRMATIONS:
                return good, bad, False
            p = self.probe(good["rate"], scale, confirmation=True)
            if _holds(p):
                return p, bad, True
            self.stepped_down.append(_r(p))
            bad, good = p, self.best_below(_r(p), scale)
            self.reserve = 1
            shorter = self.best_below(_r(p))
            if good is None and shorter is not None and self.room:  # the best shorter pass, at this length
                q = self.probe(shorter["rate"], scale)
                good, bad = (q, bad) if _holds(q) else (None, q)
            if good is None:
                good, bad = self.halve(bad, scale, _holds, STEP_DOWN)
            good, bad = self.bisect(good, bad, scale, rel_tol, _holds)
            self.reserve = 0
            if good is None:  # no probe left to step down with: the best shorter one, unconfirmed
                good = shorter
        return good, bad, False


def _why_inconclusive(s: _Search, good, bad, confirmed: bool, rel_tol: float) -> str | None:
    """Why a search's result is not conclusive (None when it is)."""
    if good is None:
        if any(p["pass"] for p in s.probes):
            return f"no passing probe reached a steady state over {STEADY_SHARE:.0%} of its sends"
        return "no probed rate met the target"
    if not good["conclusive"]:
        share = good.get("steady_share")
        return (
            f"the passing probe reached a steady state over {0 if share is None else share:.0%} of its sends "
            f"(needs {STEADY_SHARE:.0%}): its load had not settled (run more requests)"
        )
    if not confirmed:
        if s.stepped_down:
            return (
                f"{len(s.stepped_down)} rate(s) found did not hold with {CONFIRM_SCALE}x the requests "
                f"({', '.join(f'{r:.2f}' for r in s.stepped_down)} req/s); the rate below is unconfirmed"
            )
        return f"no probe left to confirm the rate with {CONFIRM_SCALE}x the requests (raise --max-probes)"
    if bad is None:
        return "no probed rate missed the target: the bracket has no upper end (raise --max-probes)"
    if _r(bad) / _r(good) > 1 + rel_tol:
        return f"the bracket is wider than {rel_tol:.0%}: the probes ran out (raise --max-probes)"
    if not s.clear(good, bad):
        return "the attainment intervals at the bracket ends do not separate from the target: run more requests"
    return None


def find_max_rate(
    evaluate,
    target: float = TARGET_ATTAINMENT,
    start: float = 1.0,
    rel_tol: float = 0.05,
    max_probes: int = 24,
    on_probe=None,
    max_scale: int = 4,
) -> dict:
    """Highest offered arrival rate whose SLO attainment stays >= target.

    evaluate(rate, scale) -> (met, issued[, facts]), scale multiplying the number of requests, the
    schedule offering `rate` (facts: offered_rate, nominal_rate, steady_share). Bracket by doubling/
    halving from `start`, then bisect (geometrically) until the bracket is within rel_tol. A bracket end
    whose Wilson interval still straddles the target, or a passing end that never reached steady state,
    is probed again with 2x, then 4x (max_scale) the requests. The rate found is then probed again with
    CONFIRM_SCALE x its requests (one probe of max_probes is kept for that); if it fails there the search
    steps down. `max_rate` is the offered rate of the passing end (`nominal_rate` beside it);
    `conclusive` says that end reached steady state, held at 4x the requests, and that the intervals at
    both ends separate from the target; `why_inconclusive` says what is missing otherwise."""
    s = _Search(evaluate, target, max_probes, on_probe, start / 64)
    good, bad = s.bisect(*s.bracket(start), 1, rel_tol)
    good, bad = s.firm_up(good, bad, max_scale, rel_tol)
    good, bad, confirmed = s.confirm(good, bad, rel_tol)
    why = _why_inconclusive(s, good, bad, confirmed, rel_tol)
    return {
        "target": target,
        "max_rate": _r(good) if good else None,
        "offered_rate": _r(good) if good else None,
        "nominal_rate": good["nominal_rate"] if good else None,
        "bracket": [_r(good) if good else 0.0, _r(bad) if bad else None],
        "conclusive": why is None,
        "why_inconclusive": why,
        "confirmed": confirmed,
        "stepped_down_from": s.stepped_down,
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
            r = {"error": f"server failed to start: {e}", "max_rate": None, "offered_rate": None, "nominal_rate": None}
        r["cell"] = label
        if c is not None:
            r.update(per_gpu(r, s.layout(c), cell_config(s.base, c)))
        results.append(r)
        if on_result:
            on_result(r)
    with open(os.path.join(s.out_dir, "max_rate.json"), "w", encoding="utf-8") as f:
        json.dump({"meta": s.meta, "results": results}, f, indent=2, default=str)
    return results
