"""vLLM's own benchmark client measures `goodbench serve` as goodbench does (issue 42), marked `real_vllm`:
`vllm bench serve` from the real_vllm venv (ci/real_vllm/setup.sh) and `goodbench run` send the same
traffic (20 random requests, 32 tokens in, 16 out, 4 at a time) to one `goodbench serve --fixed-step-ms 20`.
Before the fix vLLM's client failed 60 of 60 completions (a leading SSE comment) and read chat TTFT
p50 under one step (the role chunk sent on arrival). No vLLM server runs: only its client."""

import pytest
from realvllm import require_installed
from vllmbench import ROOT, STEP_MS, measure

pytestmark = pytest.mark.real_vllm


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_vllm_bench_serve_measures_the_reference_engine_as_goodbench_does(api, tmp_path):
    require_installed()
    v, g = measure(ROOT, api, str(tmp_path))
    print(f"{api}: vllm bench serve {v} | goodbench {g}")
    assert (v["completed"], v["failed"]) == (20, 0), v["errors"]
    assert (g["completed"], g["failed"]) == (20, 0)
    # every first token comes out of a prefill step: a TTFT under one step is a preamble taken for it
    assert v["ttft_p50_ms"] >= 0.9 * STEP_MS and g["ttft_p50_ms"] >= 0.9 * STEP_MS, (v, g)
    # both clients read the same server. Measured (docs/real-vllm.md, a loaded 2-vCPU machine): TTFT p50s
    # 0.3-0.9 ms apart, ITL p50s within 0.1 ms; the old server's chat read 9.7-11.4 against 37-39 ms
    assert abs(v["ttft_p50_ms"] - g["ttft_p50_ms"]) <= max(8.0, 0.25 * g["ttft_p50_ms"]), (v, g)
    assert abs(v["itl_p50_ms"] - g["itl_p50_ms"]) <= max(2.0, 0.1 * g["itl_p50_ms"]), (v, g)
