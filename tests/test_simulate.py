import warnings

import numpy as np
import pytest

from goodbench.arrivals import ArrivalSpec, offsets
from goodbench.engine.config import EngineConfig
from goodbench.engine.costmodel import CostModel
from goodbench.engine.virtual import simulate
from goodbench.engine.virtual.recorder import text_block_hashes
from goodbench.errors import GoodbenchWarning
from goodbench.metrics import summarize
from goodbench.records import RequestSpec, RunMeta, RunResult
from goodbench.workloads import Plan, build_plan
from goodbench.workloads.catalog import load_workload


def sim(reqs, offs=None, cfg=None, step_ms=None, users=0, **kw):
    """The requests through simulate(): at offsets, or by `users` closed-loop users; step_ms: every step
    takes exactly that long."""
    cfg = (cfg or EngineConfig()).resolved()
    cost = CostModel.for_config(cfg, fixed_step_ms=step_ms) if step_ms else None
    plan = Plan.closed_loop(reqs, users) if users else Plan.at(reqs, offs)
    return simulate(cfg, plan, cost=cost, **kw).records


def fixed(step_ms=10.0, **kw):
    return {"cfg": EngineConfig(**kw), "step_ms": step_ms}


def summary(recs, slo=None):
    return summarize(RunResult(RunMeta("s", mode="simulate", slo=slo), recs))


def test_fixed_step_gives_exact_ttft_tpot():
    reqs = [RequestSpec(f"r{i}", "a", "x", 100, 20) for i in range(5)]
    recs = sim(reqs, np.arange(5) * 1.0, **fixed(10.0))  # one at a time
    for r in recs:
        assert r.first_token_at - r.sent_at == pytest.approx(0.010)
        assert r.chunk_times[-1] - r.sent_at == pytest.approx(0.200)
        assert len(r.chunk_times) == 20 and r.status == "ok"
    s = summary(recs)
    assert s["tpot_ms"]["p50"] == pytest.approx(10.0) and s["itl_ms"]["max"] == pytest.approx(10.0)


def test_chunked_prefill_takes_ceil_prompt_over_budget_steps():
    reqs = [RequestSpec("r", "a", "x", 5000, 3)]
    rec = sim(reqs, np.zeros(1), **fixed(10.0, max_num_batched_tokens=2048))[0]
    assert rec.first_token_at == pytest.approx(0.030)  # 2048 + 2048 + 904


def random_requests(n: int, seed: int, max_out: int) -> list[RequestSpec]:
    """n requests with prompts of 4-1,500 tokens and 2-max_out output tokens."""
    rng = np.random.default_rng(seed)
    lens = zip(rng.integers(4, 1500, n), rng.integers(2, max_out, n))
    return [RequestSpec(f"r{i}", "a", "x", int(p), int(o)) for i, (p, o) in enumerate(lens)]


def test_fast_decode_path_is_exact():
    reqs = random_requests(400, 0, 400)
    offs = offsets(ArrivalSpec(rate=15.0), n=400, seed=1)
    for cfg in (
        EngineConfig(gpu="h100-sxm"),
        EngineConfig(gpu="l40s", num_gpu_blocks=500),
        EngineConfig(gpu="a100-80g-pcie", max_num_batched_tokens=256, scheduler="decode-first"),
    ):
        fast = sim(reqs, offs, cfg, fast=True)
        slow = sim(reqs, offs, cfg, fast=False)
        for a, b in zip(fast, slow):
            assert len(a.chunk_times) == len(b.chunk_times)
            assert np.allclose(a.chunk_times, b.chunk_times, rtol=0, atol=1e-9)


def test_async_scheduling_holds_a_request_arriving_mid_step_one_step_more():
    """vLLM >= 0.14 schedules step k+1 while step k runs: a request that arrives during step k misses
    k+1 and is prefilled in k+2; on an idle engine it starts at once, as without async scheduling."""
    reqs = [RequestSpec("a", "a", "x", 10, 50), RequestSpec("b", "a", "x", 10, 5)]
    offs = np.array([0.0, 0.025])  # b lands in the middle of a's third step [20, 30) ms
    sync = sim(reqs, offs, **fixed(10.0))
    held = sim(reqs, offs, **fixed(10.0, async_scheduling=True))
    assert sync[1].first_token_at - sync[1].sent_at == pytest.approx(0.015)  # the end of [30, 40)
    assert held[1].first_token_at - held[1].sent_at == pytest.approx(0.025)  # the end of [40, 50)
    assert held[0].first_token_at == pytest.approx(0.010)  # idle engine: no wait
    assert np.allclose(held[0].chunk_times, sync[0].chunk_times, rtol=0, atol=1e-12)  # decodes: scheduled ahead
    assert held[1].chunk_times[1] - held[1].chunk_times[0] == pytest.approx(0.010)


def test_async_scheduling_fast_path_is_exact_and_closed_loops_finish():
    reqs = random_requests(300, 2, 300)
    offs = offsets(ArrivalSpec(rate=12.0), n=300, seed=4)
    cfg = EngineConfig(gpu="h100-sxm", async_scheduling=True)
    fast, slow = sim(reqs, offs, cfg, fast=True), sim(reqs, offs, cfg, fast=False)
    for a, b in zip(fast, slow):
        assert np.allclose(a.chunk_times, b.chunk_times, rtol=0, atol=1e-9)
    sync = sim(reqs, offs, EngineConfig(gpu="h100-sxm"))
    waits = [a.first_token_at - b.first_token_at for a, b in zip(fast, sync)]
    assert np.median(waits) > 0  # under load most requests land mid-step and wait one more
    closed = sim(reqs[:40], cfg=cfg, users=8)
    assert all(r.status == "ok" and len(r.chunk_times) == q.max_tokens for r, q in zip(closed, reqs))


def test_deterministic():
    reqs = [RequestSpec(f"r{i}", "a", "x", 300, 30) for i in range(50)]
    offs = offsets(ArrivalSpec(rate=20.0), n=50, seed=3)
    a = sim(reqs, offs)
    b = sim(reqs, offs)
    assert [r.chunk_times for r in a] == [r.chunk_times for r in b]


def test_closed_loop_keeps_concurrency():
    reqs = [RequestSpec(f"r{i}", "a", "x", 50, 10) for i in range(12)]
    recs = sim(reqs, users=3, **fixed(10.0))
    assert len(recs) == 12
    starts = sorted(r.sent_at for r in recs)
    assert starts[:3] == [0, 0, 0] and starts[3] == pytest.approx(0.1)  # next user request after 10 steps


def test_too_long_request_is_an_error_record():
    recs = sim([RequestSpec("r", "a", "x", 990, 20)], np.zeros(1), **fixed(10.0, max_model_len=1000))
    assert recs[0].status == "http_error" and "max_model_len" in recs[0].error


def test_text_prefix_hashes_share_leading_blocks():
    a = text_block_hashes("same system prompt " * 40 + "question one", 200, 16)
    b = text_block_hashes("same system prompt " * 40 + "a different question", 205, 16)
    shared = sum(x == y for x, y in zip(a, b))
    assert 8 <= shared < len(a)


def test_hol_blocking_and_its_cure_on_the_default_tier(tok):
    """The packaged hol-stress on the default engine (llama-3.1-8b, H100, budget 8192): its 20,000-token
    prompt is split by chunked prefill, so the short streams' worst stall shrinks and the max_itl clause
    holds; unchunked, the streams decoding when a long prompt lands stall for the whole prefill."""
    spec = load_workload("hol-stress")
    plan = build_plan(spec, tok)
    res = {}
    for name, kw in (("off", {"enable_chunked_prefill": False}), ("default", {})):
        res[name] = summary(simulate(EngineConfig(**kw), plan).records, spec.slo)
    short_max = {k: r["per_class"]["short"]["itl_ms"]["max"] for k, r in res.items()}
    assert short_max["off"] > spec.slo["max_itl"] > short_max["default"] and short_max["off"] / short_max["default"] > 2
    assert res["default"]["slo_attainment"] >= 0.95 > res["off"]["slo_attainment"]


def test_continuous_beats_static_batching_on_long_tailed_outputs():
    rng = np.random.default_rng(0)
    outs = np.clip(rng.lognormal(np.log(60), 1.2, 400), 4, 1500).astype(int)
    reqs = [RequestSpec(f"r{i}", "a", "x", 200, int(o)) for i, o in enumerate(outs)]
    thr = {}
    for sched in ("static", "vllm"):
        s = summary(sim(reqs, np.zeros(len(reqs)), EngineConfig(gpu="a100-80g-sxm", max_num_seqs=64, scheduler=sched)))
        thr[sched] = s["output_throughput"]
    assert thr["vllm"] / thr["static"] > 2.5


def test_a_reasoning_share_delays_the_first_answer_token(tmp_path):
    from goodbench import api

    w = tmp_path / "r.toml"
    w.write_text(
        'endpoint = "chat"\nnum_requests = 20\n[arrival]\nrate = 5\n[[class]]\nname = "think"\n'
        "input = 64\noutput = 40\nreasoning = 0.5\n"
    )
    s = api.simulate(str(w), EngineConfig(fixed_step_ms=10), result_dir=str(tmp_path)).summary
    assert s["reasoning_tokens"] == 20 * 20
    assert s["ttfo_ms"]["p50"] == pytest.approx(s["ttft_ms"]["p50"] + 20 * 10, abs=1)
    bad = tmp_path / "b.toml"
    bad.write_text("[[class]]\nreasoning = 0.5\n")
    from goodbench.errors import InputError

    with pytest.raises(InputError, match="need endpoint"):
        api.load_workload(str(bad))


LANES = """endpoint = "completions"
num_requests = 300
seed = 1
[arrival]
rate = 9
[slo]
ttft = 400
[[class]]
name = "query"
weight = 0.7
input = 96
output = 32
priority = 0
[[class]]
name = "rag"
weight = 0.3
input = 12000
output = 64
priority = 1
"""


def test_priority_lanes_protect_the_short_lane_when_the_engine_honours_them(tmp_path):
    from goodbench import api

    w = tmp_path / "lanes.toml"
    w.write_text(LANES)
    runs = {}
    for policy in ("fcfs", "priority"):
        with warnings.catch_warnings():  # fcfs on purpose: the warning that lanes need priority is expected
            warnings.simplefilter("ignore", GoodbenchWarning)
            runs[policy] = api.simulate(
                str(w), EngineConfig(gpu="l40s", scheduling_policy=policy), result_dir=str(tmp_path)
            )
    lane = {p: r.summary["per_priority"]["0"]["slo_attainment"] for p, r in runs.items()}
    assert set(runs["fcfs"].summary["per_priority"]) == {"0", "1"}
    assert lane["priority"] > lane["fcfs"] + 0.05, lane


def test_a_workload_needing_priority_on_a_fcfs_engine_is_told_before_and_after(tmp_path):
    import goodbench as gb

    wl = gb.load_workload("priority-lanes", num_prompts=120)
    with pytest.warns(gb.GoodbenchWarning, match="needs scheduling_policy = priority but the simulated engine runs"):
        fcfs = gb.simulate(wl, result_dir=str(tmp_path)).summary
    assert fcfs["priority_honoured"] is False and any("priority lanes in order" in w for w in fcfs["warnings"])
    ok = gb.simulate(wl, gb.EngineConfig(scheduling_policy="priority"), result_dir=str(tmp_path)).summary
    assert ok["priority_honoured"] is True and not any("priority lanes" in w for w in ok["warnings"])
