"""Step-time jitter (engine/jitter.py): a profile keeps how its server's steps scattered, and a
simulation with it scatters its steps so, reproducibly, on the fast decode path as on single steps."""

import copy
import math
import re
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import run_cli
from test_calibrate import KNOBS
from test_profile import TERMS_GIVEN

import goodbench as gb
from goodbench.analysis import calibrate
from goodbench.analysis.calrun import RunData, decode_steps
from goodbench.api.enginefiles import load_profile
from goodbench.arrivals import ArrivalSpec, offsets
from goodbench.engine import jitter
from goodbench.engine.config import EngineConfig
from goodbench.engine.core import Engine
from goodbench.engine.costmodel import profile_model
from goodbench.engine.kvcache import Seq
from goodbench.engine.profile import Profile, render_profile
from goodbench.engine.virtual import simulate
from goodbench.errors import InputError
from goodbench.records import RequestSpec
from goodbench.workloads import Plan

KNOBS_ENGINE = {"num_gpu_blocks": 4000, "block_size": 16, "max_num_seqs": 16, "max_num_batched_tokens": 512}
KNOBS_FLAGS = [f"--{k.replace('_', '-')}={v}" for k, v in KNOBS.items()]
SPREAD = tuple(float(v) for v in np.percentile(np.random.default_rng(0).lognormal(0, 0.1, 50_000), jitter.PERCENTILES))


def test_draws_are_uniform_reproducible_and_differ_by_salt():
    u = np.array([jitter.unit(0, i) for i in range(20_000)])
    assert u.min() >= 0 and u.max() < 1
    assert np.allclose(np.percentile(u, [10, 50, 90]), [0.1, 0.5, 0.9], atol=0.01)
    assert abs(np.corrcoef(u[:-1], u[1:])[0, 1]) < 0.02  # one step's draw says nothing of the next's
    assert jitter.unit(0, 7) == jitter.unit(0, 7) != jitter.unit(1, 7)


def test_a_factor_reads_the_spread_at_its_draw():
    assert jitter.factor((), 0, 3) == 1.0
    f = np.array([jitter.factor(SPREAD, 0, i) for i in range(20_000)])
    assert SPREAD[0] <= f.min() and f.max() <= SPREAD[-1]
    assert np.median(f) == pytest.approx(1.0, abs=0.005)
    assert np.percentile(f, 90) == pytest.approx(SPREAD[89], rel=0.01)


def test_the_spread_is_measured_only_from_enough_gaps():
    assert jitter.measure(np.ones(jitter.MIN_GAPS - 1)) == ()
    r = np.r_[np.random.default_rng(1).lognormal(0, 0.2, 1000), 0.0, np.nan]  # a coalesced read, a hole
    q = jitter.measure(r)
    assert len(q) == len(jitter.PERCENTILES) and list(q) == sorted(q) and q[0] >= jitter.FLOOR
    assert q[49] == pytest.approx(np.median(r[np.isfinite(r)]), rel=0.01)


def test_a_profile_keeps_its_spread_and_refuses_a_bad_one(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text(render_profile(Profile(dict(TERMS_GIVEN), step_jitter=SPREAD), "2026-01-01", "0.0"))
    assert load_profile(str(path)).step_jitter == pytest.approx(SPREAD, abs=1e-4)
    good = list(SPREAD)
    wrong = [good[::-1], [0.0] + good[1:], good[:-1], good[:-1] + [float("inf")], good[:-1] + [float("nan")]]
    for bad in [str(x) for x in wrong] + ['"wide"']:
        path.write_text(path.read_text().split("[jitter]")[0] + f"[jitter]\nstep_factor_percentiles = {bad}\n")
        with pytest.raises(InputError, match=r"\[jitter\] step_factor_percentiles"):
            load_profile(str(path))


def _sim(spread, reqs, offs, fast=True, **knobs):
    cfg = EngineConfig(**{**KNOBS, "enable_prefix_caching": False, **knobs}).resolved()
    cost = profile_model(cfg, Profile(dict(TERMS_GIVEN), step_jitter=spread))
    return simulate(cfg, Plan.at(reqs, offs), cost=cost, fast=fast).records


@pytest.mark.parametrize(
    "knobs, longest, rate",
    # the adaptive policy's budget matters only to prompts longer than its floor (128 tokens)
    [
        ({}, 100, 2.0),
        ({"adaptive_chunk_target_ms": 36.0}, 1200, 0.7),
        # a floor below the requests decoding: a step over the target can leave the budget below them
        ({"adaptive_chunk_target_ms": 36.0, "adaptive_chunk_floor": 4}, 1200, 0.7),
    ],
    ids=["fixed budget", "adaptive", "adaptive, low floor"],
)
@pytest.mark.parametrize("spread", [SPREAD, ()], ids=["scattered", "model time"])
def test_the_fast_decode_path_draws_what_single_steps_draw(monkeypatch, spread, knobs, longest, rate):
    """Long outputs: decode runs long enough that arrivals cut them, and the fast path must stop each
    one where single steps would let the arrival in (and tell an adaptive policy each step's time)."""
    rng = np.random.default_rng(2)
    lens = zip(rng.integers(4, longest, 150), rng.integers(50, 400, 150))
    reqs = [RequestSpec(f"r{i}", "a", "x", int(p), int(o)) for i, (p, o) in enumerate(lens)]
    offs = offsets(ArrivalSpec(rate=rate), n=150, seed=3)
    runs, real = [], Engine.decode_run
    monkeypatch.setattr(Engine, "decode_run", lambda self, *a: runs.append(real(self, *a)) or runs[-1])
    fast = _sim(spread, reqs, offs, **knobs)
    assert sum(r is not None for r in runs) > 100  # the fast path ran
    slow = _sim(spread, reqs, offs, fast=False, **knobs)
    for a, b in zip(fast, slow):
        assert len(a.chunk_times) == len(b.chunk_times)
        assert np.allclose(a.chunk_times, b.chunk_times, rtol=0, atol=1e-9)


def test_a_decode_run_tells_an_adaptive_policy_each_steps_time_as_single_steps_do():
    """Four requests decoding, their steps (about 31 ms) over a 30 ms target: every step lowers the
    budget, whether taken singly or in a closed-form run."""
    cfg = EngineConfig(**{**KNOBS, "adaptive_chunk_target_ms": 30.0}).resolved()
    engine = Engine(cfg, profile_model(cfg, Profile(dict(TERMS_GIVEN), step_jitter=SPREAD)))
    for i in range(4):
        engine.add(Seq(i, 10, 50, arrival=0.0))
    engine.step()  # the four prompts in one step: now all decode
    engine.sched.budget = engine.adaptive.budget = 512
    twin = copy.deepcopy(engine)
    ends, _ = engine.decode_run(3, math.inf, 0.0)
    singles = [twin.step().duration for _ in range(3)]
    assert np.allclose(np.diff(np.r_[0.0, ends]), singles, rtol=0, atol=1e-12)
    assert engine.sched.budget == twin.sched.budget < 512


def test_a_scattered_simulation_reproduces_and_differs_from_the_model_times():
    reqs = [RequestSpec(f"r{i}", "a", "x", 50 + 5 * i, 40) for i in range(60)]
    offs = np.arange(60) * 0.3
    a, b, plain = _sim(SPREAD, reqs, offs), _sim(SPREAD, reqs, offs), _sim((), reqs, offs)
    assert all(x.chunk_times == y.chunk_times for x, y in zip(a, b))
    assert all(x.chunk_times != y.chunk_times for x, y in zip(a, plain))


def test_like_requests_on_an_idle_server_spread_as_the_steps_do():
    """A 64-token prompt every second (each finds the server idle): without jitter every TTFT is the
    same; with it they spread around it as the steps' factors do, their median where it was."""
    reqs = [RequestSpec(f"r{i}", "a", "x", 64, 8) for i in range(1000)]
    offs = np.arange(1000.0)
    ttft = lambda recs: np.array([r.first_token_at - r.sent_at for r in recs])  # noqa: E731
    plain, spread = ttft(_sim((), reqs, offs)), ttft(_sim(SPREAD, reqs, offs))
    assert np.ptp(plain) < 1e-12
    step = plain[0] - TERMS_GIVEN["frontend_s"]  # the prefill step: all the jitter touches
    assert np.median(spread) == pytest.approx(plain[0], rel=0.01)
    assert np.percentile(spread, 90) - plain[0] == pytest.approx(step * (SPREAD[89] - 1), rel=0.15)


def test_calibrate_measures_the_spread_of_a_server_whose_steps_scatter(tmp_path):
    """A run on a server whose steps scatter by a known spread: `goodbench calibrate` keeps that spread
    (a simulated server's gaps are its steps, nothing added by a client) and prints it."""
    truth = tmp_path / "truth.toml"
    truth.write_text(render_profile(Profile(dict(TERMS_GIVEN), KNOBS_ENGINE, step_jitter=SPREAD), "2026", "0.0"))
    run = gb.simulate(
        gb.load_workload(
            None, dataset_name="random", random_input_len=200, random_output_len=60, num_prompts=120, request_rate=2.0
        ),
        gb.EngineConfig(calibration=str(truth)),
        result_dir=str(tmp_path),
        run_id="a",
    )
    basis = run.summary["engine_uncertainty"]["basis"]  # a simulation says its steps scatter, and how far
    assert f"x{SPREAD[9]:.2f} to x{SPREAD[89]:.2f}, 10th to 90th percentile" in basis, basis
    r = run_cli("calibrate", run.dir, "--out", str(tmp_path / "fit.toml"), *KNOBS_FLAGS)
    assert r.returncode == 0, r.stderr
    got = load_profile(str(tmp_path / "fit.toml")).step_jitter
    lo, hi = re.search(r"steps scatter as the server's did: x([\d.]+) to x([\d.]+)", r.stdout).groups()
    assert (float(lo), float(hi)) == (round(got[9], 2), round(got[89], 2))
    for p in (10, 25, 75, 90):  # within 2 points: the refitted terms are not exactly the truth's
        assert got[p - 1] == pytest.approx(SPREAD[p - 1], abs=0.02), p
    assert "decode-only gaps" not in r.stdout


def test_calibrate_says_when_the_runs_are_too_short_to_measure_the_spread(tmp_path):
    run = gb.simulate(
        gb.load_workload(None, dataset_name="random", random_input_len=200, random_output_len=4, num_prompts=8),
        gb.EngineConfig(gpu="l40s"),
        result_dir=str(tmp_path),
    )
    cal = gb.calibrate([run.dir], gb.EngineConfig(gpu="l40s"), out=str(tmp_path / "fit.toml"))
    assert cal.profile.step_jitter == () and "[jitter]" not in (tmp_path / "fit.toml").read_text()
    assert any("decode-only gaps" in n and "model time exactly" in n for n in cal.notes), cal.notes


FLAT = Profile(dict.fromkeys(TERMS_GIVEN, 0.0) | {"step_s": 0.01})  # every step 10 ms


def _steps(gaps, idx=None):
    """Rows as calrun.decode_steps gives them: (gap, decoding, context, flat index)."""
    idx = np.arange(len(gaps)) if idx is None else np.asarray(idx)
    return np.column_stack([gaps, np.ones(len(gaps)), np.full(len(gaps), 100.0), idx])


def test_two_chunks_read_at_once_are_one_span_of_two_steps():
    """A gap near 0 is the client reading two chunks at once: it and the gap before it (2 steps' time)
    count as two steps of their mean; one with no gap before it is left out; a hole is skipped."""
    gaps = np.full(200, 0.01)
    gaps[10], gaps[11] = 0.02, 0.0  # steps 10 and 11 read together
    gaps[50] = np.nan
    idx = np.arange(200)
    idx[100:] += 1000  # another request's gaps: its first gap has none before it ...
    gaps[100] = 0.0  # ... so this joined one is left out
    r = calibrate._step_ratios(_steps(gaps, idx), FLAT)
    assert len(r) == 198 and np.allclose(r, 1.0)


@pytest.mark.parametrize(
    "pattern",
    [[0.01, 0.02, 0.0, 0.01], [0.04, 0.0, 0.0, 0.0, 0.01]],  # 25% of gaps joined; 60%, four chunks a read
    ids=["a quarter", "most"],
)
def test_a_run_whose_client_read_chunks_together_gives_no_scatter(pattern):
    gaps = np.tile(pattern, 300)
    assert (gaps == 0).mean() > jitter.COALESCED
    assert len(calibrate._step_ratios(_steps(gaps), FLAT)) == 0
    fewer = np.tile([0.01] * 9 + [0.02, 0.0], 100)  # 9% joined: kept, each pair two steps of its mean
    assert np.allclose(calibrate._step_ratios(_steps(fewer), FLAT), 1.0)


def test_calibrate_names_a_run_left_out_of_the_scatter():
    """Of several runs, one whose client read chunks together gives no scatter, and calibrate says which."""
    clean = SimpleNamespace(path="clean", steps=_steps(np.full(300, 0.01)))
    paired = SimpleNamespace(path="paired", steps=_steps(np.tile([0.02, 0.0], 150)))
    terms = dict(FLAT.terms)
    (note,) = calibrate.read_together([clean, paired], terms)
    assert "leaves out paired:" in note and "clean" not in note
    assert calibrate.read_together([clean, clean], terms) == []


def test_decode_steps_are_the_steps_the_engine_took():
    """calrun.decode_steps, from a simulated run's token times alone, finds each decode-only step's
    requests decoding and their context as the engine had them."""
    rng = np.random.default_rng(5)
    reqs = [RequestSpec(str(i), "a", "x", int(p), int(o)) for i, (p, o) in enumerate(rng.integers(8, 300, (60, 2)))]
    cfg = EngineConfig(**KNOBS, enable_prefix_caching=False).resolved()
    run = RunData("sim", reqs, np.sort(rng.uniform(0, 20, 60)), None, None, 0.0, None, {}, {})
    rep = calibrate.simulate_run(run, cfg, dict(TERMS_GIVEN), follow=True)
    starts, ends, _, phi = rep.follower.arrays()
    t = rep.times
    steps = decode_steps(t.sent, t.flat, t.start, np.array([q.prompt_tokens for q in reqs], float))
    at = {round(e, 9): k for k, e in enumerate(ends)}
    k = np.array([at[round(t.flat[int(i)], 9)] for i in steps[:, 3]])
    assert len(steps) > 500
    assert np.array_equal(steps[:, 1], phi[k, 3])  # requests decoding
    assert np.array_equal(steps[:, 2], phi[k, 4])  # their context tokens
    assert np.allclose(steps[:, 0], ends[k] - starts[k])  # each gap is its step
