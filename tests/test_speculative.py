"""Speculative decoding (issue 45, part 2): the engine's drafts, acceptance and step cost; the chunks a
served or simulated stream carries; the summary's `speculative` block from vLLM's counters."""

from __future__ import annotations

import asyncio
import time

import pytest
from aiohttp.test_utils import TestServer

import goodbench as gb
from goodbench.client.config import ClientConfig
from goodbench.client.lean import LeanClient
from goodbench.engine import specfit
from goodbench.engine.config import EngineConfig
from goodbench.engine.core import Engine
from goodbench.engine.costmodel import CostModel
from goodbench.engine.kvcache import Seq
from goodbench.engine.serve.server import RUNNER_OPTIONS, EngineServer, ServeOptions
from goodbench.engine.speculative import (
    DRAFT_PASS_S,
    SPEC_STEP_S,
    SpecDecode,
    acceptance_from_counters,
)
from goodbench.errors import UsageError
from goodbench.metrics import speculative as specm
from goodbench.prometheus import parse
from goodbench.records import RequestSpec

EAGLE = {"speculative_method": "eagle3", "num_speculative_tokens": 3, "speculative_acceptance": "0.8,0.7,0.6"}


# ---------------------------------------------------------------- the knobs
@pytest.mark.parametrize(
    "kw, words",
    [
        ({"num_speculative_tokens": 3}, "needs --speculative-method"),
        ({"speculative_method": "medusa", "num_speculative_tokens": 3}, "not one of"),
        ({"speculative_method": "ngram", "num_speculative_tokens": 3}, "no public default acceptance"),
        ({"speculative_method": "draft_model", "num_speculative_tokens": 2, "speculative_acceptance": "0.7"}, "needs"),
        ({**EAGLE, "speculative_acceptance": "0.8,1.5"}, "not a probability"),
        ({**EAGLE, "speculative_acceptance": "high"}, "not a number"),
        ({**EAGLE, "scheduler": "static"}, "continuous-batching"),
        ({**EAGLE, "num_speculative_tokens": 17}, "num-speculative-tokens"),
    ],
)
def test_a_speculative_config_vllm_would_refuse_is_refused_before_the_run(kw, words):
    with pytest.raises(UsageError, match=words):
        EngineConfig(**kw).resolved()


def test_rates_repeat_their_last_and_mtp_has_a_published_default():
    assert SpecDecode.from_knobs("eagle3", 4, "0.8,0.6").rates == (0.8, 0.6, 0.6, 0.6)
    assert SpecDecode.from_knobs("mtp", 1, None).rates == (0.85,)
    assert SpecDecode.from_knobs(None, 0, None) is None and SpecDecode.from_knobs("eagle3", 0, "0.5") is None
    assert SpecDecode.from_knobs("eagle3", 3, "0.8,0.7,0.6").expected_tokens() == pytest.approx(1 + 0.8 + 0.56 + 0.336)


def test_counters_give_back_the_per_position_rates():
    assert acceptance_from_counters(1000, [800, 560, 336]) == pytest.approx((0.8, 0.7, 0.6))
    assert acceptance_from_counters(0, [0, 0]) == ()


# ---------------------------------------------------------------- the engine
def _drain(cfg: EngineConfig, n: int, prompt: int, out: int) -> Engine:
    eng = Engine(cfg)
    for i in range(n):
        eng.add(Seq(f"r{i}", prompt, out))
    while eng.has_work:
        eng.step()
    return eng


def test_acceptance_is_drawn_per_position_reproducibly_and_every_token_is_emitted():
    a = _drain(EngineConfig(**EAGLE), 40, 200, 300)
    b = _drain(EngineConfig(**EAGLE), 40, 200, 300)
    sc = a.stats.spec
    assert (sc.drafts, sc.accepted) == (b.stats.spec.drafts, b.stats.spec.accepted)  # a hash, not a stream
    assert a.stats.generation_tokens == 40 * 300  # capped at max_tokens, nothing lost
    assert sc.accepted == sum(sc.per_pos) and sc.draft_tokens == 3 * sc.drafts
    rates = acceptance_from_counters(sc.drafts, sc.per_pos[:3])
    assert rates == pytest.approx((0.8, 0.7, 0.6), abs=0.03)


def _speedup(batch: int, prompt: int, out: int) -> float:
    """Decode throughput with EAGLE-3 over without, `batch` requests from start to end."""
    t = []
    for kw in (EAGLE, {}):
        eng = _drain(EngineConfig(**kw), batch, prompt, out)
        t.append(eng.stats.busy_s)
    return t[1] / t[0]


def test_speculation_pays_less_as_the_batch_grows_from_the_cost_alone():
    """Nothing says 'large batches gain less': a memory-bound step verifies the drafts almost free, a
    compute-bound one pays for each of them (the public finding comes out of the step's pricing)."""
    small, big = _speedup(1, 128, 256), _speedup(512, 128, 256)
    assert small > 1.4 and big < small - 0.3


def test_a_drafter_model_costs_time_and_ngram_costs_only_the_host_terms():
    batch = 8
    eng = {
        m: Engine(EngineConfig(speculative_method=m, num_speculative_tokens=3, speculative_acceptance="0.7"))
        for m in ("ngram", "eagle3")
    }
    for e in eng.values():
        for i in range(batch):
            e.add(Seq(i, 100, 50))
        e.step()  # the prefills
    res = {m: e.step() for m, e in eng.items()}
    assert all(len(r.batch.drafted) == batch and r.batch.spec_tokens == 3 * batch for r in res.values())
    b, cost = res["ngram"].batch, eng["ngram"].cost
    verify = cost.verify_time(b.num_tokens - b.spec_tokens, b.num_seqs, b.spec_tokens)
    assert verify > 0  # the drafts' GEMM and LM-head rows
    ng = cost.batch_time(b) + verify + SPEC_STEP_S
    assert res["ngram"].duration == pytest.approx(ng)
    assert res["eagle3"].duration > ng + 3 * DRAFT_PASS_S


def test_drafts_never_push_a_request_that_fits_out_of_its_kv():
    """A request whose prompt + output is max_model_len (the KV cache, here) finishes as without drafts: vLLM
    trims drafts at max_model_len, or the last steps would preempt the request and fail it."""
    cfg = EngineConfig(num_gpu_blocks=4, block_size=16, max_model_len=64, **EAGLE)
    eng = _drain(cfg, 1, 40, 24)
    assert eng.stats.generation_tokens == 24 and eng.stats.preemptions == 0


@pytest.mark.parametrize("n", [1, 2, 4, 16, 64, 256])
def test_verifying_drafts_never_makes_a_step_cheaper(n):
    cost = Engine(EngineConfig(**EAGLE)).cost
    assert all(cost.verify_time(n, n, s) >= 0 for s in (1, 3, n, 3 * n))


def test_the_host_terms_are_the_fit_to_their_source():
    x, c = specfit.fit()
    assert x == pytest.approx(DRAFT_PASS_S, rel=0.01) and c == pytest.approx(SPEC_STEP_S, rel=0.01)


# ---------------------------------------------------------------- simulated runs
def test_a_simulated_run_streams_a_steps_accepted_tokens_as_one_chunk(tmp_path):
    w = gb.load_workload(None, num_prompts=40, request_rate=20, random_input_len=200, random_output_len=100)
    run = gb.simulate(w, EngineConfig(**EAGLE), result_dir=str(tmp_path))
    recs = [r for r in run.records() if r.status == "ok"]
    assert all(sum(r.chunk_tokens) == r.output_tokens for r in recs)
    assert max(max(r.chunk_tokens) for r in recs) == 4 and recs[0].chunk_tokens[0] == 1  # the prefill's token
    sp = run.summary["speculative"]
    assert sp["observed_by"] == "the simulated engine" and sp["per_position"][0] == pytest.approx(0.8, abs=0.05)
    # the client's view agrees with the counters: chunks after the first carry 1 + accepted tokens
    assert sp["tokens_per_chunk"] == pytest.approx(sp["mean_acceptance_length"], rel=0.05)
    assert "speculative" not in gb.simulate(w, EngineConfig(), result_dir=str(tmp_path)).summary


# ---------------------------------------------------------------- the served engine
def _served(tok):
    cfg = EngineConfig(max_model_len=4096, **EAGLE).resolved()
    return EngineServer(cfg, ServeOptions(), tok, CostModel.for_config(cfg, fixed_step_ms=2.0))


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions", "/v1/responses"])
def test_served_streams_carry_several_tokens_a_chunk_and_metrics_count_them_as_vllm(tok, path):
    specs = [RequestSpec(f"r{i}", "c", f"tell me about {i}", 6, 60) for i in range(4)]
    if "completions" not in path or "chat" in path:
        specs = [RequestSpec(s.id, "c", [{"role": "user", "content": s.prompt}], 6, 60) for s in specs]

    async def go():
        srv = _served(tok)
        server = TestServer(srv.app(), host="127.0.0.1", **RUNNER_OPTIONS)
        await server.start_server()
        try:
            cfg = ClientConfig(base_url=f"http://127.0.0.1:{server.port}", endpoint=path)
            async with LeanClient(cfg, time.monotonic(), tok) as c:
                recs = await asyncio.gather(*(c.send(s, 0.0) for s in specs))
            from goodbench.engine.serve.steploop import render_metrics

            return recs, parse(render_metrics(srv._metric_rows()))
        finally:
            await server.close()

    recs, m = asyncio.run(go())
    assert all(r.status == "ok" and r.output_tokens == 60 for r in recs), recs[0].error
    accepted = m['vllm:spec_decode_num_accepted_tokens_total{model_name="llama-3.1-8b"}']
    seen = sum(r.output_tokens - len(r.chunk_times) for r in recs)  # tokens beyond one per chunk
    if "responses" in path:  # each token its own event, written together: the client sees the chunks apart
        assert seen == 0
    else:
        assert 0 < accepted - seen <= 3 * len(recs)  # the last step's accepted drafts past max_tokens: not sent
        assert max(max(r.chunk_tokens) for r in recs) == 4
    per_pos = [
        m[f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{model_name="llama-3.1-8b",position="{i}"}}']
        for i in range(3)
    ]
    assert sum(per_pos) == accepted


def test_live_counters_make_the_block_with_per_position_rates():
    rows = [
        {"t": 0, "metrics": parse(_prom(10, 30, 15, (8, 5, 2)))},
        {"t": 5, "metrics": parse(_prom(110, 330, 195, (88, 65, 42)))},
    ]
    b = specm.observed(rows)
    assert (b["drafts"], b["draft_tokens"], b["accepted_tokens"]) == (100, 300, 180)
    assert b["acceptance_rate"] == pytest.approx(0.6) and b["mean_acceptance_length"] == pytest.approx(2.8)
    assert b["per_position"] == pytest.approx([0.8, 0.6, 0.4])
    assert b["conditional_rates"] == pytest.approx([0.8, 0.75, 2 / 3])  # what --speculative-acceptance takes
    assert specm.observed(rows[:1]) is None and specm.observed([]) is None
    assert "acceptance 60.0%" in specm.describe(b)


def _prom(drafts, toks, acc, per):
    lines = [
        f'vllm:spec_decode_num_drafts_total{{engine="0",model_name="m"}} {drafts}',
        f'vllm:spec_decode_num_draft_tokens_total{{engine="0",model_name="m"}} {toks}',
        f'vllm:spec_decode_num_accepted_tokens_total{{engine="0",model_name="m"}} {acc}',
    ]
    lines += [
        f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",model_name="m",position="{i}"}} {v}'
        for i, v in enumerate(per)
    ]
    return "\n".join(lines)


def test_vllms_speculative_config_sets_the_knobs_and_refuses_what_it_does_not_know():
    from goodbench.engine.speculative import from_vllm_config

    got = from_vllm_config(
        '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4, "acceptance": [0.6, 0.5]}'
    )
    assert got == {"speculative_method": "ngram", "num_speculative_tokens": 3, "speculative_acceptance": "0.6,0.5"}
    assert (
        from_vllm_config('{"model": "llama-3.2-1b", "num_speculative_tokens": 2}')["speculative_method"]
        == "draft_model"
    )
    for bad, words in (("{", "not JSON"), ("[1]", "JSON object"), ('{"k": 3}', "unknown key 'k'")):
        with pytest.raises(UsageError, match=words):
            from_vllm_config(bad)
