"""The cost model's fitted terms (costmodel.StepConstants), fitted to public end-to-end measurements.

calpoints.py replays each point of calibration.csv as its source ran it. A step's time is affine in
the constants (costmodel.CostModel.features), so following the clock through a replay gives every
token time's derivative with respect to each constant (`replay_with_jacobian`): one replay yields
the metric and its exact local Jacobian. The fit is Gauss-Newton on log(predicted / measured),
bounded, with a weak pull towards physical priors (so a term no point constrains stays at its
prior), each source weighted 1/sqrt(its points). Host time differs between vLLM's V0 engine and V1,
so V0 sources get their own per-step, per-request and front-end terms (V1 moved the engine core
out of the API server's process); everything on the GPU is shared, and the shipped model uses the
V1 terms. A V0 source that ran multi-step scheduling (vLLM 0.6's
`--num-scheduler-steps n`) schedules, prepares inputs and processes outputs once per n forward
passes: its host terms are divided by n.

Out of sample: `check` points (whole sources) are never fitted; each `fit` source is predicted by a
fit made without it (leave-one-source-out: the full fit's linearisation re-solved without the
source, then the source's points replayed with those constants)."""

from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace

import numpy as np

from ..costmodel import SHIPPED, CostModel, StepConstants
from ..opmodel import PCIE_PRIOR
from ..uncertainty import regimes
from .calpoints import Point, load_points, measured, metric, point_config, regime, run
from .clock import ClockFollower, derivatives

K = len(fields(StepConstants))
ERA = ("step_s", "request_s", "frontend_s")  # the terms each era has its own of (host time)
PER_STEP = ("step_s", "request_s")  # of those, paid once per scheduling round (multi-step)
NAMES = tuple(f.name for f in fields(StepConstants)) + tuple(f"{n}_v0" for n in ERA)
#               step_s request_s kv_read attn_req fp8_mem fp8_hbm fp8_comp tp_layer tp_pcie pcie_bw pf_attn frontend
_SCALE = np.array([1e-3, 1e-5, 1.0, 1e-6, 1.0, 1.0, 1.0, 1e-5, 1e-5, 1.0, 1.0, 1e-2])
_PRIOR = np.array([0.5e-3, 1e-5, 1.25, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0, PCIE_PRIOR, 2.0, 0.0])
_LOWER = np.array([0.0, 0.0, 1.0, 0.0, 0.8, 0.8, 1.0, 0.0, 0.0, 1.0, 1.0, 0.0])
_UPPER = np.array([10e-3, 1e-3, 3.0, 1e-4, 3.0, 3.0, 5.0, 1e-3, 1e-3, 8.0, 5.0, 0.2])
V1_ERA = [NAMES.index(n) for n in ERA]
V0_ERA = [NAMES.index(f"{n}_v0") for n in ERA]
SCALE, PRIOR, LOWER, UPPER = (np.concatenate([a, a[V1_ERA]]) for a in (_SCALE, _PRIOR, _LOWER, _UPPER))  # V0's as V1's
PRIOR_WEIGHT = 1e-4  # per scaled unit: a deviation of one scale from the prior costs as much as a 1% error on one point
V0_STEP, V0_REQ, V0_FRONTEND = V0_ERA
V0_TERMS = (1.76253e-3, 33.1268e-6, 19.6694e-3)  # the fit's V0-era terms, in ERA's order (SHIPPED holds the V1 ones)
ONLINE = ("closed", "poisson")
V0_REMOVED = "2025-10"  # vLLM 0.11.0 (October 2025) removed the V0 engine
JOBS = min(2, os.cpu_count() or 1)  # served over HTTP: the front end is in the client's times


def era(p: Point) -> str:
    """The host terms a point is fitted with: V1 where the source states a V1 vLLM (0.8 or later; the
    shipped model) or, stating none, is dated after vLLM 0.11.0 removed the V0 engine (2025-10); else
    V0 (vLLM <= 0.7, a 2024 release, or neither version nor date stated)."""
    v = p.vllm_version
    if v is not None:
        return "v1" if v >= (0, 8) else "v0"
    return "v1" if p.dated_from(V0_REMOVED) else "v0"


def _per_round(p: Point) -> np.ndarray:
    """What each ERA term is divided by for p: a multi-step run's scheduler steps for the per-step terms."""
    return np.array([p.scheduler_steps if n in PER_STEP else 1.0 for n in ERA])


def constants(theta: np.ndarray, p: Point | None = None) -> StepConstants:
    """The StepConstants a point is priced with: its era's terms (the per-step ones over a multi-step
    run's steps); no front end offline."""
    k = StepConstants(*theta[:K])
    if p is not None and era(p) == "v0":
        k = replace(k, **dict(zip(ERA, (theta[V0_ERA] / _per_round(p)).tolist())))
    if p is not None and p.workload not in ONLINE:
        k = replace(k, frontend_s=0.0)
    return k


def _to_theta(jac: np.ndarray, p: Point) -> np.ndarray:
    """A point's derivative by the StepConstants, placed on the full vector (era terms by era)."""
    out = np.zeros(len(NAMES))
    out[:K] = jac
    if era(p) == "v0":
        out[V0_ERA] = jac[V1_ERA] / _per_round(p)
        out[V1_ERA] = 0.0
    return out


def replay_with_jacobian(p: Point, theta: np.ndarray) -> tuple[float, np.ndarray, dict]:
    """(metric, d metric / d theta, regime) at theta: one replay, following the clock."""
    cost = CostModel.for_config(point_config(p), constants=constants(theta, p))
    follow = ClockFollower(cost)
    recs, engine = run(p, cost, on_step=follow)
    t = measured(recs)
    online = np.full((len(t.sent), 1), 1.0 if p.workload in ONLINE else 0.0)  # the front end's one term
    dsent, dflat = derivatives(follow, t, closed=p.workload == "closed", front=(t.sent + cost.frontend_s, online))
    value = metric(p, t)
    jac = np.zeros(K)
    for k in range(K):
        h = 1e-6 * SCALE[k]  # the records are linear in the constants: a small step is exact
        jac[k] = (metric(p, t.shifted(h * dsent[:, k], h * dflat[:, k])) - value) / h
    return value, _to_theta(jac, p), regime(engine)


@dataclass
class Linear:
    """Every point's replay at one theta: values, Jacobians, regimes."""

    theta: np.ndarray
    values: np.ndarray
    jac: np.ndarray
    regimes: list


def _replay_all(points: list[Point], thetas: list[np.ndarray], jobs: int) -> list:
    """replay_with_jacobian of each point at its theta, over `jobs` processes (the longest first)."""
    if jobs <= 1:
        return [replay_with_jacobian(p, th) for p, th in zip(points, thetas)]
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(jobs) as ex:
        return list(ex.map(replay_with_jacobian, points, thetas, chunksize=1))


def linearise(points: list[Point], theta: np.ndarray, jobs: int = JOBS) -> Linear:
    rows = _replay_all(points, [theta] * len(points), jobs)
    return Linear(theta, np.array([r[0] for r in rows]), np.array([r[1] for r in rows]), [r[2] for r in rows])


def weights(points: list[Point], used: list[int]) -> np.ndarray:
    """1/sqrt(points of its source) for the used points, 0 elsewhere."""
    w = np.zeros(len(points))
    src = [points[i].source_id for i in used]
    for i in used:
        w[i] = 1 / np.sqrt(src.count(points[i].source_id))
    return w


def solve(points: list[Point], lin: Linear, used: list[int]) -> np.ndarray:
    """One Gauss-Newton step from lin.theta on the used points: bounded least squares on the weighted
    log errors plus the prior pull."""
    from scipy.optimize import lsq_linear

    y = np.array([p.value for p in points])
    w = weights(points, used)[used]
    r = w * np.log(lin.values[used] / y[used])
    a = (w / lin.values[used])[:, None] * lin.jac[used] * SCALE  # d log / d (scaled theta)
    lam = np.sqrt(PRIOR_WEIGHT)
    a = np.vstack([a, lam * np.eye(len(NAMES))])
    b = np.concatenate([-r, -lam * (lin.theta - PRIOR) / SCALE])
    lo, hi = (LOWER - lin.theta) / SCALE, (UPPER - lin.theta) / SCALE
    z = lsq_linear(a, b, bounds=(lo, np.maximum(hi, lo + 1e-12))).x
    return np.clip(lin.theta + z * SCALE, LOWER, UPPER)


def fit(
    points: list[Point], start: np.ndarray = PRIOR, iterations: int = 10, tol: float = 1e-2
) -> tuple[np.ndarray, Linear]:
    """Gauss-Newton from `start` over the `fit` points until a step moves every constant by less than
    tol of its scale. Returns the constants and every point's linearisation there."""
    used = [i for i, p in enumerate(points) if p.use == "fit"]
    theta = np.array(start, dtype=float)
    lin = linearise(points, theta)
    for _ in range(iterations):
        new = solve(points, lin, used)
        step = np.max(np.abs(new - theta) / SCALE)
        theta, lin = new, linearise(points, new)
        if step < tol:
            break
    return theta, lin


def signed_error(p: Point, pred: float) -> float:
    """The error in the metric's own terms: predicted / measured - 1 (for throughputs a positive error
    means the engine is too fast; for times, too slow)."""
    return pred / p.value - 1


def out_of_sample(points: list[Point], lin: Linear) -> tuple[list[float], dict]:
    """Each point's out-of-sample prediction: `check` points with the full fit; each `fit` source by
    the fit without it. Returns the predictions and the constants fitted without each source."""
    used = [i for i, p in enumerate(points) if p.use == "fit"]
    loso = {}
    for s in dict.fromkeys(points[i].source_id for i in used):
        loso[s] = solve(points, lin, [i for i in used if points[i].source_id != s])
    held = [i for i in used]
    again = _replay_all([points[i] for i in held], [loso[points[i].source_id] for i in held], JOBS)
    preds = [float(v) for v in lin.values]
    for i, r in zip(held, again):
        preds[i] = r[0]
    return preds, loso


def regimes_of(p: Point, reg: dict) -> list[str]:
    """The regimes a point counts in (engine/uncertainty.regimes: the rule simulated runs are judged by;
    a TTFT of prompts >= 4,096 tokens counts as prefill-heavy too)."""
    return regimes(reg["mean_batch"], reg["prefill_share"], p.tp, ttft_long=p.klass == "ttft" and p.input_len >= 4096)


def shipped_theta() -> np.ndarray:
    """The constants goodbench ships: costmodel.SHIPPED (V1) and the V0 terms."""
    return np.array([getattr(SHIPPED, n) for n in NAMES[:K]] + list(V0_TERMS))


def calibrate(path: str | None = None, start: np.ndarray | None = None, iterations: int = 10) -> dict:
    """Everything from the data file: the fit (Gauss-Newton from `start`, the priors by default), and
    per point the in-sample and out-of-sample predictions and the regimes it counts in. `step` is how
    far one more Gauss-Newton step would move the constants (in scale units): ~0 at the fit."""
    points = load_points(path) if path else load_points()
    theta, lin = fit(points, PRIOR if start is None else start, iterations)
    used = [i for i, p in enumerate(points) if p.use == "fit"]
    step = float(np.max(np.abs(solve(points, lin, used) - theta) / SCALE))
    preds, loso = out_of_sample(points, lin)
    rows = [
        {
            "point": p,
            "fitted": float(lin.values[i]),
            "oos": preds[i],
            "error": signed_error(p, lin.values[i]),
            "oos_error": signed_error(p, preds[i]),
            "regimes": regimes_of(p, lin.regimes[i]),
            "mean_batch": float(lin.regimes[i]["mean_batch"]),
        }
        for i, p in enumerate(points)
    ]
    return {"theta": theta, "rows": rows, "loso": loso, "step": step}
