"""Speculative decoding on the real vLLM (CPU build, the tiny model): n-gram drafts (--speculative-config),
the summary's `speculative` block from vLLM's own counters, and the client's chunks agreeing with them
(a step's accepted drafts arrive in one chunk). The random-weight model's greedy output repeats itself,
so the n-gram drafter finds matches in it. EAGLE / draft models need trained draft weights: not run here."""

import json

import pytest
from realvllm import SERVED_NAME, VllmServer

import goodbench as gb

pytestmark = pytest.mark.real_vllm
K = 3
NGRAM = {"method": "ngram", "num_speculative_tokens": K, "prompt_lookup_max": 4, "prompt_lookup_min": 2}


def test_ngram_speculation_on_real_vllm_is_reported_from_its_counters_and_seen_in_the_chunks(tmp_path):
    srv = VllmServer(str(tmp_path), 512, ("--speculative-config", json.dumps(NGRAM)), "ngram").start()
    try:
        spec = gb.load_workload(None, num_prompts=6, concurrency=2, random_input_len=64, random_output_len=200)
        run = gb.run(spec, gb.Target(base_url=srv.base_url, model=SERVED_NAME), result_dir=str(tmp_path))
    finally:
        srv.stop()
    recs = run.records()
    assert all(r.status == "ok" for r in recs), [r.error for r in recs if r.status != "ok"][:2]
    sp = run.summary["speculative"]
    print(json.dumps(sp))
    assert sp["observed_by"] == "the server's vllm:spec_decode_* counters" and sp["drafts"] > 0
    assert sp["accepted_tokens"] == pytest.approx(sum(sp["per_position"]) * sp["drafts"])
    seen = sum(r.output_tokens - len(r.chunk_times) for r in recs)  # tokens beyond one per chunk
    # every accepted draft the client received came with its step's chunk; a last step's drafts past
    # max_tokens were counted by vLLM but not sent
    assert 0 <= sp["accepted_tokens"] - seen <= K * len(recs)
    assert sp["tokens_per_chunk"] > 1.0
