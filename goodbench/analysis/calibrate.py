"""`goodbench calibrate`: the step-time model (engine/profile.py) fitted to runs made against your own
server, so what-ifs (chunk size, rate, workload) use your server's step times instead of a tier's.

Each run is replayed on the engine exactly as it was sent (every request at its measured send time,
with its prompt and generated token counts) under the server's knobs (the engine flags; its KV
capacity from vLLM's `cache_config_info` when the run scraped /metrics). The profile's terms are fitted
by Gauss-Newton on every request's TTFT and TPOT (log ratio, Huber-weighted), with the exact local
Jacobian from following the replay's clock (engine/virtual/clock.py); with the server's histograms,
its mean queue + prefill time (front end excluded) is one more target, which separates the front end
from the engine. A term the runs cannot see (no prefill attention worth the name, say) stays near 0.
With several runs each is also predicted by a fit made without it (leave-one-run-out). Unless told,
the fit is made with and without async scheduling and keeps the one that explains the runs better
(fit_scheduling).

The profile's front end (engine/frontend.py) is a constant per request plus a cost per request in
flight at its send and per prompt token: a server whose HTTP process shares a CPU with its engine slows
as the load grows (docs/real-vllm.md measured it). The histograms also measure each run's mean front
end (the client's TTFT less the server's queue + prefill); where the profile's mean front end on a run
is far from that, calibrate says so: TTFT predicted at another load is then off by up to the difference."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ..engine import jitter
from ..engine.config import EngineConfig
from ..engine.core import Engine
from ..engine.costmodel import profile_model
from ..engine.frontend import front_features
from ..engine.profile import SERVER_KEYS, STEP_TERMS, TERMS, Profile, prompt_coverage
from ..engine.virtual.arrivals import arrivals_for
from ..engine.virtual.clock import ClockFollower, derivatives, step_wait, times_of
from ..engine.virtual.instance import run_instance
from ..errors import InputError
from ..workloads.plan import Plan
from .calrun import MIN_GAPS, RunData, decode_gaps, errors, held_out_errors, load_run, observed_stats, one_server
from .calspec import held_out, note, profile_keys, speculation

HUBER = 0.2  # relative errors beyond 20% count linearly, not squared (a request the replay queues differently)
# pull towards 0 per term, in units of its scale: the per-step terms are free; context and prefill
# attention (second-order on most runs, and able to mimic a per-token cost) must earn their place
RIDGE = (1e-3, 1e-3, 1e-3, 1e-3, 1.0, 1.0, 1e-3, 1e-3, 1e-3)
KNEES = (16, 128, 1024)  # starting floor/token knees (tokens): the floor is piecewise, so start from several
ITERATIONS = 12
MIN_FLOOR = 0.01  # the least a step's floor may be, as a fraction of the runs' median ITL


ASYNC_MARGIN = 0.05  # async scheduling is kept where it lowers the fit's objective by this much (of 1) ...
MIN_GAIN = 1e-3  # ... and by at least this (one residual at 4.5%): runs fitted exactly differ by rounding

FRONT_END_GAP = 0.5  # a run's measured front end this far (relative) from the fitted constant is reported
FRONT_END_MIN_S = 0.005  # ... and at least this far: a few ms is noise on any client


def _gap_residuals(run: RunData, t, dflat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per number of requests decoding: log(simulated / observed median decode-only gap), weighted by the
    square root of the gaps behind the smaller count (the batch-size dependence TPOTs average away)."""
    gaps, batch, idx = decode_gaps(t.sent, t.flat, t.start)
    r, j = [], []
    for b, (obs, n) in run.gaps.items():
        sel = np.flatnonzero(batch == b)
        if len(sel) < MIN_GAPS or not obs > 0:  # a zero median: chunks read together, not a step's time
            continue
        order = sel[np.argsort(gaps[sel], kind="stable")]
        mids = order[[(len(order) - 1) // 2, len(order) // 2]]  # the median: one element, or the middle two
        med = float(gaps[mids].mean())
        if not med > 0:
            continue
        dmed = (dflat[idx[mids]] - dflat[idx[mids] - 1]).mean(axis=0)
        w = np.sqrt(min(n, len(sel)))
        r.append(w * np.log(med / obs))
        j.append(w * dmed / med)
    return np.array(r), np.array(j).reshape(len(r), len(TERMS))


def replay_config(base: EngineConfig, runs: list[RunData]) -> EngineConfig:
    """The server's knobs: the flags given, the KV capacity the server reported where the flags did
    not set one; prefix caching off (records keep no prompt text to match prefixes on)."""
    kv = next((r.kv for r in runs if r.kv), {})
    cfg = replace(base, enable_prefix_caching=False, calibration=None)
    if cfg.num_gpu_blocks is None and kv:
        cfg = replace(cfg, num_gpu_blocks=kv["num_gpu_blocks"] * kv["block_size"] // cfg.block_size)
    return cfg.resolved()


@dataclass(frozen=True)
class Replay:
    """A run replayed: its times, the clock follower (or None), and per request its front end: the
    delay before the engine and that delay's derivative by the front end's terms (one row each)."""

    times: object
    follower: object
    delay: np.ndarray
    dfront: np.ndarray

    @property
    def arrive(self) -> np.ndarray:
        """Each request's arrival at the engine: its send time plus its front end."""
        return self.times.sent + self.delay


def simulate_run(run: RunData, cfg: EngineConfig, terms: dict, follow: bool = False, spread: tuple = ()) -> Replay:
    """The run replayed with these terms, its steps scattered by this spread (engine/jitter.py; none: every
    step its model time). A draw is fixed per step, so a scattered step is still affine in the terms
    and the clock follower's Jacobian exact."""
    cost = profile_model(cfg, Profile(terms, step_jitter=spread))
    fol = ClockFollower(cost) if follow else None
    engine = Engine(cfg, cost)
    plan = Plan.at(run.requests, run.offsets)
    arr = arrivals_for(plan, cost.front_end)
    recs = run_instance(engine, run.requests, arr, on_step=fol)
    if any(r.first_token_at is None for r in recs):
        raise InputError(
            f"{run.path}: the replay could not serve every request under these engine knobs "
            "(a prompt longer than --max-model-len, or more KV than --num-gpu-blocks): pass the server's knobs"
        )
    ok = np.array([int(r.id) for r in recs], dtype=np.int64)  # load_run names request k str(k)
    load = np.asarray(arr.load, dtype=float)[ok]
    prompt = np.asarray(arr.prompts, dtype=float)[ok]
    dfront = np.column_stack([np.broadcast_to(np.asarray(x, float), load.shape) for x in front_features(load, prompt)])
    return Replay(times_of(recs), fol, cost.front_end.delay(load, prompt), dfront)


def _residuals(
    run: RunData, cfg: EngineConfig, terms: dict, spread: tuple = ()
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(log sim/observed per request TTFT and TPOT, the decode gaps and the server's engine time; their
    Jacobian by TERMS; which residuals are robust, Huber-weighted: all but the server's engine time, a
    mean the server measured, which holds however the requests scatter)."""
    rep = simulate_run(run, cfg, terms, follow=True, spread=spread)
    t = rep.times
    dsent, dflat = derivatives(rep.follower, t, closed=False, front=(rep.arrive, rep.dfront))
    ttft, dttft = t.ttft, dflat[t.start[:-1]] - dsent
    seen = np.isfinite(run.ttft)  # observed times load_run kept (nan: none to fit)
    has, tpot = t.per_token(t.flat)
    dtpot = t.per_token(dflat)[1]
    fit = np.isfinite(run.tpot[has])
    many = has.copy()
    many[has] = fit
    tpot, dtpot = tpot[fit], dtpot[fit]
    r = [np.log(ttft[seen] / run.ttft[seen]), np.log(tpot / run.tpot[many])]
    j = [dttft[seen] / ttft[seen, None], dtpot / tpot[:, None]]
    gr, gj = _gap_residuals(run, t, dflat)
    r.append(gr)
    j.append(gj)
    if run.server_engine_s:  # the server's own queue + prefill mean: separates the front end from the engine
        wait, dwait = step_wait(rep.follower, rep.arrive)  # before the server's queue clock starts
        d = np.zeros(len(TERMS))
        d[len(STEP_TERMS) :] = rep.dfront.mean(axis=0)
        d[: len(STEP_TERMS)] = dwait.mean(axis=0)
        sim = ttft.mean() - rep.delay.mean() - wait.mean()
        w = np.sqrt(len(ttft))  # the server's mean over n requests counts as n requests
        r.append(np.array([w * np.log(sim / run.server_engine_s)]))
        j.append(w * ((dttft.mean(axis=0) - d) / sim)[None, :])
    res = np.concatenate(r)
    robust = np.ones(len(res), bool)
    if run.server_engine_s:
        robust[-1] = False  # a mean the server measured: never down-weighted as an outlier
    return res, np.vstack(j), robust


def _decode_step(runs: list[RunData]) -> float:
    """What a decode step takes on these runs: a run's ITL p50, or its median TPOT where that is 0 (a busy
    server sent tokens several to a chunk)."""
    return float(np.nanmedian([r.itl_p50 if r.itl_p50 > 0 else np.nanmedian(r.tpot) for r in runs]))


def _ttft_slope(runs: list[RunData]) -> float:
    """The runs' TTFT per prompt token (least squares over every request's; 0 where it cannot be told)."""
    p = np.concatenate([[q.prompt_tokens for q in r.requests] for r in runs]).astype(float)
    t = np.concatenate([r.ttft for r in runs])
    ok = np.isfinite(t)
    if ok.sum() < 2 or np.ptp(p[ok]) == 0:
        return 0.0
    return max(float(np.polyfit(p[ok], t[ok], 1)[0]), 0.0)


def _starts(runs: list[RunData]) -> list[dict]:
    """Starting points from the runs themselves: most of a decode step is the floor, up to each of KNEES
    tokens, or up to where the runs' TTFT slope per prompt token says a token's cost starts; and one with
    no floor to speak of, most of it the per-step term (a step's time affine in its tokens, as on a CPU,
    where a few tokens already fill the cores). A floor start whose per-token cost falls below every
    step's tokens loses that term's gradient for good (prefill attention then mimics it, quadratic where
    the truth is linear: seen on the reference engine's L40S), so the slope start is the one that keeps it."""
    itl = _decode_step(runs)
    tokens = [0.7 * itl / knee for knee in KNEES] + [_ttft_slope(runs)]
    shapes = [(0.2, 0.7, t) for t in tokens if t > 0] + [(0.9, MIN_FLOOR, 0.7 * itl / KNEES[1])]
    return [
        dict.fromkeys(TERMS, 0.0)
        | {"step_s": fixed * itl, "floor_s": floor * itl, "token_s": token, "decode_request_s": 0.01 * itl}
        for fixed, floor, token in shapes
    ]


def _scale(start: dict, runs: list[RunData]) -> np.ndarray:
    """Each term's scale: what makes it contribute about one decode step on these runs."""
    itl = _decode_step(runs)
    ctx = float(np.median([np.median([q.prompt_tokens + q.max_tokens / 2 for q in r.requests]) for r in runs]))
    work = float(np.median([np.median([q.prompt_tokens**2 / 2 for q in r.requests]) for r in runs]))
    prompt = float(np.median([np.median([q.prompt_tokens for q in r.requests]) for r in runs]))
    return np.array(
        [itl, itl, start["token_s"], itl / 10, itl / (10 * ctx), itl / max(work, 1.0), itl, itl / 4, itl / prompt]
    )


def _objective(r: np.ndarray, robust: np.ndarray) -> float:
    a = np.abs(r)
    return float(np.sum(np.where((a <= HUBER) | ~robust, 0.5 * a * a, HUBER * (a - 0.5 * HUBER))))


def _system(runs: list[RunData], cfg: EngineConfig, terms: dict, spread: tuple = ()):
    """Every run's residuals, Jacobian rows and robust marks, stacked."""
    res, jac, robust = zip(*(_residuals(run, cfg, terms, spread) for run in runs))
    return np.concatenate(res), np.vstack(jac), np.concatenate(robust)


def _gn(runs: list[RunData], cfg: EngineConfig, terms: dict, spread: tuple = ()) -> tuple[dict, float]:
    """Gauss-Newton with Huber weights and bounds (every term >= 0) from `terms`: (terms, objective)."""
    from scipy.optimize import lsq_linear

    scale = _scale(terms, runs)
    theta = np.array([terms[k] for k in TERMS])
    # every term >= 0, and a step costs at least a hundredth of a decode step's scale: a step that costs
    # nothing is no engine's (the replay cannot advance its clock), and the fit may wander there when a
    # front end can explain the TTFTs (seen on the real vLLM with a CPU hog beside it)
    lowest = np.zeros(len(TERMS))
    lowest[TERMS.index("floor_s")] = MIN_FLOOR * scale[TERMS.index("floor_s")]
    r, jac, robust = _system(runs, cfg, terms, spread)
    obj = _objective(r, robust)
    for _ in range(ITERATIONS):
        w = np.where(robust, np.sqrt(np.minimum(1.0, HUBER / np.maximum(np.abs(r), 1e-12))), 1.0)
        a = np.vstack([w[:, None] * jac * scale, np.diag(RIDGE)])
        b = np.concatenate([-w * r, -np.array(RIDGE) * theta / scale])
        z = lsq_linear(a, b, bounds=((lowest - theta) / scale, np.inf)).x
        for step in (1.0, 0.5, 0.25, 0.1):  # a step that does not lower the objective is shortened
            new = np.maximum(theta + step * z * scale, lowest)
            nt = dict(zip(TERMS, new.tolist()))
            nr, njac, robust = _system(runs, cfg, nt, spread)
            if _objective(nr, robust) < obj:
                break
        else:
            break
        moved = np.max(np.abs(new - theta) / scale)
        theta, r, jac, obj, terms = new, nr, njac, _objective(nr, robust), nt
        if moved < 1e-3:
            break
    return terms, obj


def _best_fit(runs: list[RunData], cfg: EngineConfig) -> tuple[dict, float]:
    """(terms, objective): the best of the fits from a few starting points."""
    return min((_gn(runs, cfg, start) for start in _starts(runs)), key=lambda fit: fit[1])


def fit_terms(runs: list[RunData], cfg: EngineConfig) -> dict:
    """The profile's terms fitted to these runs (the best of a few starting points)."""
    return _best_fit(runs, cfg)[0]


def _shared_objective(runs: list[RunData], cfg: EngineConfig, terms: dict) -> float:
    """The fit's objective over the residuals every replay of these runs has alike: each request's TTFT
    and TPOT and the server's mean (the decode-gap bins a replay fills, and so counts, differ)."""
    total = 0.0
    for run in runs:
        res, _, robust = _residuals(run, cfg, terms)
        k = int(np.isfinite(run.ttft).sum() + np.isfinite(run.tpot).sum())  # they come first
        keep = np.r_[np.arange(k), [len(res) - 1] if run.server_engine_s else []].astype(int)
        total += _objective(res[keep], robust[keep])
    return total


@dataclass(frozen=True)
class Scheduling:
    """What the fit assumed about async scheduling, and how it was decided."""

    held: bool
    how: str
    unsure: bool = False  # the runs could not tell: assumed off


def fit_scheduling(runs: list[RunData], base: EngineConfig) -> tuple[EngineConfig, dict, Scheduling]:
    """(replay knobs, terms, the scheduling assumed). With the knob given, the fit under it. Without,
    the fit both ways, keeping async scheduling only where it explains the runs better by ASYNC_MARGIN
    (and more than MIN_GAIN): the step it adds to a request that arrives mid-step (none to one that
    finds the engine idle) is not a constant the front end can mimic, so runs whose load comes and goes
    tell the two apart (docs/engine.md). The server's version cannot: vLLM's CPU backend has none at any
    version, and from about 0.10 (issues of 0.10.2 and 0.11 discuss it) a GPU server may turn it on or
    off by flag."""
    if base.async_scheduling is not None:
        cfg = replay_config(base, runs)
        how = "async scheduling: given" + ("" if base.async_scheduling else " off")
        return cfg, fit_terms(runs, cfg), Scheduling(base.async_scheduling, how)
    fits = {}  # a replay that cannot serve every request (prompt or KV too big) fails either way
    for held in (False, True):
        cfg = replay_config(replace(base, async_scheduling=held), runs)
        terms = fit_terms(runs, cfg)
        fits[held] = (cfg, terms, _shared_objective(runs, cfg, terms))
    off, on = fits[False][2], fits[True][2]
    gain = max(ASYNC_MARGIN * max(off, on), MIN_GAIN)
    held, unsure = off - on > gain, abs(off - on) <= gain
    told = "the runs cannot tell; assumed" if unsure else "told from the runs"
    servers = sorted({r.server for r in runs if r.server})
    said = f"; the server says it is {', '.join(servers)}" if servers else ""
    how = (
        f"async scheduling {'on' if held else 'off'} ({told}: the fit's objective {off:.3g} without, {on:.3g} "
        f"with{said}; --async-scheduling or --no-async-scheduling fits it as you say)"
    )
    return fits[held][0], fits[held][1], Scheduling(held, how, unsure)


def _step_ratios(steps: np.ndarray, prof: Profile) -> np.ndarray:
    """One run's decode-only gaps over the profile's time for their steps, over their median. A gap under
    jitter.FLOOR of its step is the client reading two chunks at once: it and the gap before it (one
    request's, as consecutive indices say) are one span of two steps, each of which gets the span's
    ratio; one with no such gap before it is left out. Empty when more than jitter.COALESCED of the
    gaps were so read (the gaps are the client's reads, not the server's steps)."""
    gap, decoding, ctx, idx = steps.T
    model = prof.step_time(decoding, decoding, ctx)
    ok = np.isfinite(gap) & (model > 0)
    gap, model, idx = gap[ok], model[ok], idx[ok]
    joined = gap < jitter.FLOOR * model
    if not len(gap) or joined.mean() > jitter.COALESCED:
        return np.zeros(0)
    first = ~joined | (np.diff(idx, prepend=-2) != 1)  # a span starts at a gap not joined to the one before
    span = np.cumsum(first) - 1
    whole = ~joined[first]  # a span that starts with a joined gap has no step before it: left out
    ratio = np.repeat((np.bincount(span, gap) / np.bincount(span, model))[whole], np.bincount(span)[whole])
    return ratio / np.median(ratio) if len(ratio) else ratio


def read_together(runs: list[RunData], terms: dict) -> list[str]:
    """A note naming the runs whose gaps the scatter left out (_step_ratios: the client's reads)."""
    prof = Profile(terms)
    left = [r.path for r in runs if r.steps is not None and len(r.steps) and not len(_step_ratios(r.steps, prof))]
    why = f"the client read tokens several at a time in more than {jitter.COALESCED:.0%} of its decode-only gaps"
    return [f"the steps' scatter leaves out {', '.join(left)}: {why} (a busy client or machine)"] * bool(left)


def step_spread(runs: list[RunData], terms: dict) -> tuple:
    """How the server's decode steps scattered around what these terms price them at (engine/jitter.py):
    every run's _step_ratios, their percentiles (the fit sets the level; the spread is the scatter
    about it). () when too few gaps remain."""
    prof = Profile(terms)
    ratios = [_step_ratios(r.steps, prof) for r in runs if r.steps is not None and len(r.steps)]
    return jitter.measure(np.concatenate(ratios or [np.zeros(0)]))


def fit_scattered(runs: list[RunData], cfg: EngineConfig, terms: dict | None = None) -> tuple[dict, tuple]:
    """(terms, spread): the fit (from `terms` where given, else from every start), the scatter about it,
    then the fit again from there with its replays scattered so (engine/jitter.py), and the scatter about
    that: a scattered step is slower on average than its model time, and the runs' TPOTs are averages."""
    terms = fit_terms(runs, cfg) if terms is None else terms
    spread = step_spread(runs, terms)
    if not spread:
        return terms, spread
    terms = _gn(runs, cfg, terms, spread)[0]
    return terms, step_spread(runs, terms) or spread


def predicted_stats(run: RunData, cfg: EngineConfig, terms: dict, spread: tuple = ()) -> dict:
    """TTFT, ITL and TPOT p50 of the run replayed with these terms and step spread, as a simulation with
    the profile gives them, and its mean time outside the server's queue + prefill (the front end and
    the wait for the step in progress at the engine)."""
    rep = simulate_run(run, cfg, terms, follow=True, spread=spread)
    t = rep.times
    tpot = t.per_token(t.flat)[1]
    gaps = np.diff(t.flat)
    keep = np.ones(len(gaps), bool)
    keep[t.start[1:-1] - 1] = False
    return {
        "ttft_p50_ms": float(np.median(t.ttft)) * 1000,
        "itl_p50_ms": float(np.median(gaps[keep])) * 1000,
        "tpot_p50_ms": float(np.median(tpot)) * 1000,
        "front_end_ms": float(rep.delay.mean() + step_wait(rep.follower, rep.arrive)[0].mean()) * 1000,
    }


def front_end_notes(runs: list[RunData], fitted_s: list[float]) -> list[str]:
    """A line for each run whose measured mean front end is far from the profile's on that run."""
    out = []
    for r, f in zip(runs, fitted_s):
        m = r.front_end_s
        if m is None or abs(m - f) <= max(FRONT_END_GAP * max(m, f), FRONT_END_MIN_S):
            continue
        out.append(
            f"{r.path}: the server's histograms put its front end at {m * 1e3:.1f} ms per request (the client's "
            f"TTFT less the server's queue + prefill), the profile's at {f * 1e3:.1f} ms on this run (with the "
            "wait for the step in progress, which the server's queue time leaves out): the "
            "profile's front end (a constant, a cost per request in flight, a cost per prompt token) does not "
            "follow this server's here, so TTFT predicted at another load can be off by up to the difference "
            "(calibrate on runs at the loads you will predict)"
        )
    return out


@dataclass
class Calibration:
    """The fitted profile and, per run, what was measured, what the fit predicts (in sample) and, with
    several runs, what a fit without that run predicts (out of sample); notes on what the profile cannot
    follow (a front end that moves with load); what it assumed about async scheduling and why."""

    profile: Profile
    rows: list[dict]
    out_of_sample: bool
    notes: list[str] = field(default_factory=list)
    scheduling: str = ""  # what the fit assumed about async scheduling, and why


def calibrate_runs(paths: list[str], base: EngineConfig, on_stage=None) -> Calibration:
    """Fit a profile to the runs; with two or more, each run is also predicted by a fit without it.
    The profile's ttft_pct, itl_pct and tpot_pct are those predictions' errors (held_out_errors), and its
    step_time_pct the larger of ITL's and TPOT's (what a step's time is off by)."""
    one_server(paths)
    runs = [load_run(p) for p in paths]
    say = on_stage or (lambda text: None)
    both = " (with and without async scheduling)" if base.async_scheduling is None else ""
    given = base
    base, spec = speculation(runs, base)  # a speculating server's runs replay with its acceptance
    say(f"fitting the step-time model to {len(runs)} run(s), {sum(len(r.requests) for r in runs)} requests{both} ...")
    cfg, terms, sched = fit_scheduling(runs, base)
    say("measuring how the server's steps scatter, and fitting again with them ...")
    terms, spread = fit_scattered(runs, cfg, terms)
    rows = []
    for i, run in enumerate(runs):
        obs = observed_stats(run)
        row = {
            "run": run.path,
            "requests": len(run.requests),
            "observed": obs,
            "fitted": predicted_stats(run, cfg, terms, spread),
        }
        row["fit_error"] = errors(obs, row["fitted"])
        if run.front_end_s is not None:
            row["front_end_ms"] = {"measured": run.front_end_s * 1e3, "fitted": row["fitted"]["front_end_ms"]}
        if len(runs) > 1:
            say(f"leave-one-run-out: fitting without {run.path} ...")
            others = runs[:i] + runs[i + 1 :]
            ocfg = held_out(cfg, others, given)
            row["loro"] = predicted_stats(run, ocfg, *fit_scattered(others, ocfg))
            row["loro_error"] = errors(obs, row["loro"])
        rows.append(row)
    pct, basis = held_out_errors(rows)
    engine = {
        **{k: getattr(cfg, k) for k in SERVER_KEYS},
        "num_gpu_blocks": cfg.num_gpu_blocks,
        "block_size": cfg.block_size,
        "max_num_batched_tokens": cfg.max_num_batched_tokens,
        "max_num_seqs": cfg.max_num_seqs,
        "enable_chunked_prefill": cfg.enable_chunked_prefill,
        "async_scheduling": cfg.async_scheduling,
        **profile_keys(cfg),
    }
    prompts = [q.prompt_tokens for r in runs for q in r.requests]
    step = max(pct["itl"], pct["tpot"])
    prof = Profile(terms, engine, step, basis, tuple(paths), coverage=prompt_coverage(prompts), step_jitter=spread)
    prof = replace(prof, ttft_pct=pct["ttft"], itl_pct=pct["itl"], tpot_pct=pct["tpot"])
    notes = note(spec, cfg) + _notes(runs, [row["fitted"]["front_end_ms"] / 1e3 for row in rows], prof, sched)
    return Calibration(prof, rows, len(runs) > 1, notes, sched.how)


def _notes(runs: list[RunData], fitted_fe: list[float], prof: Profile, sched: Scheduling) -> list[str]:
    """What the profile cannot follow: a front end that moves with load, a scatter too thinly measured
    or measured without a run, an async-scheduling verdict the runs could not make."""
    notes = front_end_notes(runs, fitted_fe)
    if prof.step_jitter:
        notes += read_together(runs, prof.terms) if len(runs) > 1 else []
    else:
        gaps = sum(len(r.steps) for r in runs if r.steps is not None)
        notes.append(
            f"the runs' {gaps} decode-only gaps do not measure how the server's steps scatter (fewer than "
            f"{jitter.MIN_GAPS}, or the client read tokens several at a time in more than {jitter.COALESCED:.0%} of "
            "them: a busy server or client): the profile's steps take their model time exactly, and a TTFT p50 that "
            "lands at the top of a group of like requests can come out a few percent fast (runs of a few minutes at "
            "a load the server keeps up with measure the scatter)"
        )
    if sched.unsure:
        notes.append(
            "the runs cannot tell whether the server builds each step while the one before runs (async "
            "scheduling: vLLM 0.14 and later on GPUs by default, not its CPU backend), so the fit assumes not; for "
            "such a server calibrate again with --async-scheduling, or its extra step is priced as front end "
            "(runs whose load comes and goes, some requests finding the server idle, tell the two apart)"
        )
    return notes
