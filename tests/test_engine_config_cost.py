import pytest

from goodbench.api.enginefiles import resolve_engine
from goodbench.engine.config import EngineConfig
from goodbench.engine.costmodel import CostModel
from goodbench.engine.explain import explain
from goodbench.engine.hardware import GIB, GPUS
from goodbench.engine.models import MODELS, get_model
from goodbench.engine.uncertainty import REGIME_ERROR
from goodbench.errors import InputError, UsageError as ConfigError


def test_vllm_defaults_by_gpu():
    assert (
        EngineConfig(gpu="h100-sxm").resolved().max_num_batched_tokens,
        EngineConfig(gpu="h100-sxm").resolved().max_num_seqs,
    ) == (8192, 1024)
    for g in ("a100-80g-sxm", "a100-80g-pcie", "l40s", "l4"):
        c = EngineConfig(gpu=g).resolved()
        assert (c.max_num_batched_tokens, c.max_num_seqs) == (2048, 256), g
    c = EngineConfig(gpu="h100-sxm").resolved()
    assert c.enable_chunked_prefill and c.block_size == 16 and c.scheduling_policy == "fcfs"


def test_unchunked_budget_is_max_model_len_and_small_budget_is_rejected():
    c = EngineConfig(enable_chunked_prefill=False, max_model_len=8192).resolved()
    assert c.max_num_batched_tokens == 8192
    with pytest.raises(ConfigError, match="must be >= max_model_len"):
        EngineConfig(enable_chunked_prefill=False, max_model_len=8192, max_num_batched_tokens=512).resolved()


def test_model_that_does_not_fit_names_the_memory():
    with pytest.raises(ConfigError) as e:
        EngineConfig(gpu="l4", model="llama-3.1-70b").resolved()
    assert "does not fit" in str(e.value) and "131.4 GiB" in str(e.value)
    EngineConfig(gpu="h100-sxm", model="llama-3.1-70b", tensor_parallel_size=4).resolved()


@pytest.mark.parametrize(
    "kw,msg",
    [
        ({"tensor_parallel_size": 3}, "divide"),
        ({"dtype": "fp8", "gpu": "a100-40g"}, "FP8"),
        ({"gpu": "tpu"}, "unknown GPU"),
        ({"model": "gpt-9"}, "unknown model"),
        ({"max_model_len": 10_000_000}, "exceeds"),
        ({"scheduler": "magic"}, "scheduler"),
    ],
)
def test_invalid_configs(kw, msg):
    with pytest.raises(ConfigError, match=msg):
        EngineConfig(**kw).resolved()


def test_kv_blocks_fill_what_weights_and_activations_leave():
    c = EngineConfig(gpu="h100-sxm", model="llama-3.1-8b").resolved()
    mem = c.memory()
    kv = c.num_gpu_blocks * c.block_size * c.kv_bytes_per_token()
    assert kv <= mem["kv"] < kv + c.block_size * c.kv_bytes_per_token()
    assert c.kv_bytes_per_token() == 2 * 32 * 8 * 128 * 2  # 128 KiB per token for Llama-3.1-8B
    assert 45 * GIB < kv < 60 * GIB


def test_model_shapes():
    m = get_model("llama-3.1-8b")
    assert m.params_total == pytest.approx(8.03e9, rel=0.01)
    assert get_model("llama-3.1-70b").params_total == pytest.approx(70.6e9, rel=0.01)
    assert get_model("llama-3.2-1b").params_total == pytest.approx(1.24e9, rel=0.02)
    assert get_model("qwen2.5-7b").params_total == pytest.approx(7.6e9, rel=0.02)
    assert len(GPUS) >= 12 and len(MODELS) >= 6
    assert all(g.source for g in GPUS.values())


def test_custom_model_file(tmp_path):
    p = tmp_path / "tiny.toml"
    p.write_text('name = "tiny"\nlayers = 2\nhidden = 256\nheads = 4\nkv_heads = 2\nffn = 512\nvocab = 1000\n')
    c = resolve_engine(EngineConfig(model=str(p), gpu="l4"))
    assert c.shape().head_dim == 64 and c.shape().name == "tiny" and c.num_gpu_blocks > 0
    (tmp_path / "bad.toml").write_text("layers = 0\n")
    with pytest.raises(InputError, match="layers"):  # a malformed input file, not a bad flag
        resolve_engine(EngineConfig(model=str(tmp_path / "bad.toml")))


def test_a_decode_step_prices_the_measured_gemm_curve_by_hand():
    """One decode token on an H100: the 4 GEMMs of each of the 32 layers at the Hopper curve's small-N
    efficiency (Vidur H100), plus a per-GEMM latency and the element-wise ops, all from opdata."""
    import numpy as np

    from goodbench.engine.opdata import ELEMENTWISE, GEMM

    cfg = EngineConfig(gpu="h100-sxm", model="llama-3.1-8b").resolved()
    xs, eff, t0, _ = GEMM["hopper"]
    params = 218_103_808  # matmul weights of one layer
    e = np.interp(np.log(1 / 295.2238805970149), np.log(xs), eff)  # N / ridge, ridge = 989e12 / 3.35e12
    a, bh, bf, _ = ELEMENTWISE["hopper"]
    layer = 2 * params / 3.35e12 / e + 4 * t0 + a + (bh * 4096 + bf * 14336) * 2 / 3.35e12
    r = explain(cfg, [], [(1, 1000)])
    assert r["breakdown_s"]["linear"] == pytest.approx(32 * layer, rel=1e-9)
    assert r["breakdown_s"]["allreduce"] == 0.0


def test_large_prefill_is_compute_bound_and_grows_linearly():
    cfg = EngineConfig().resolved()
    a = explain(cfg, [(4096, 0)], [])["breakdown_s"]["linear"]
    b = explain(cfg, [(8192, 0)], [])["breakdown_s"]["linear"]
    assert b / a == pytest.approx(2.0, rel=0.02)
    assert 2 * 4096 * 32 * 218_103_808 / a / 989e12 == pytest.approx(0.66, abs=0.05)  # GEMMs at ~0.76, + element-wise


def test_mid_m_gemms_are_less_efficient_than_the_roofline_says():
    """The measured dip: at the ridge (~300 tokens on an H100) neither weights nor FLOPs saturate."""
    cfg = EngineConfig().resolved()
    t = {n: explain(cfg, [(n, 0)], [])["breakdown_s"]["linear"] for n in (1, 300, 4096)}
    roof = {n: max(2 * n * 32 * 218_103_808 / 989e12, 2 * 32 * 218_103_808 / 3.35e12) for n in t}
    assert roof[300] / t[300] < min(roof[1] / t[1], roof[4096] / t[4096]) - 0.1


def test_decode_attention_scales_with_context_and_tp_adds_allreduce():
    cfg = EngineConfig().resolved()
    cm = CostModel.for_config(cfg)
    a = explain(cfg, [], [(64, 1000)])["breakdown_s"]["attention_decode"]
    b = explain(cfg, [], [(64, 2000)])["breakdown_s"]["attention_decode"]
    assert b - a == pytest.approx(cm.ctx_s * 64 * 1000, rel=1e-9)
    tp = EngineConfig(model="llama-3.1-70b", tensor_parallel_size=4).resolved()
    assert explain(tp, [], [(8, 100)])["breakdown_s"]["allreduce"] > 0


def test_decode_per_request_cost_is_memory_time_so_it_scales_with_the_tiers_bandwidth():
    """attn_request_s is the H100 SXM's; the L40S (864 GB/s) pays 3350/864 of it per request, the
    H200 (4.8 TB/s) less; the context bytes are priced apart (a request at zero context still pays)."""
    from goodbench.engine.costmodel import SHIPPED
    from goodbench.engine.hardware import get_gpu

    def per_request(gpu):
        cfg = EngineConfig(gpu=gpu).resolved()
        ctx_s = CostModel.for_config(cfg).ctx_s  # a decode at context 0 reads its own new token's KV
        one = explain(cfg, [], [(1, 0)])["breakdown_s"]["attention_decode"] - ctx_s
        many = explain(cfg, [], [(64, 0)])["breakdown_s"]["attention_decode"] - 64 * ctx_s
        assert many == pytest.approx(64 * one, rel=1e-9)
        return one

    h100 = per_request("h100-sxm")
    assert h100 == pytest.approx(32 * SHIPPED.attn_request_s, rel=1e-9)
    for gpu in ("l40s", "h200", "a100-80g-sxm"):
        ratio = get_gpu("h100-sxm").mem_bw_tbs / get_gpu(gpu).mem_bw_tbs
        assert per_request(gpu) == pytest.approx(h100 * ratio, rel=1e-9)
    assert per_request("l40s") > 3.5 * h100


def test_nvlink_allreduce_is_cheaper_than_pcie():
    """Measured collectives: NVSwitch (custom all-reduce over NVLink) vs a PCIe ring (measured latency,
    bytes at the link rate / tp_pcie_bw), without the fitted per-layer terms; with them, still slower."""
    from dataclasses import replace

    from goodbench.engine.costmodel import SHIPPED

    def allreduce(gpu, k, tokens=8):
        cfg = EngineConfig(gpu=gpu, model="llama-3.1-70b", tensor_parallel_size=4).resolved()
        return float(CostModel.for_config(cfg, constants=k).breakdown(0, tokens, 0, 0, 0, tokens)["allreduce"])

    bare = replace(SHIPPED, tp_layer_s=0.0, tp_layer_pcie_s=0.0)
    for tokens in (8, 512):
        assert allreduce("h100-pcie", bare, tokens) > 2 * allreduce("h100-sxm", bare, tokens)
    assert allreduce("h100-pcie", SHIPPED) > allreduce("h100-sxm", SHIPPED)
    assert allreduce("l40s", SHIPPED, 512) > 1.5 * allreduce("l40s", SHIPPED, 8)  # grows with the message


def test_fp8_weights_are_priced_by_what_fp8_kernels_achieve():
    """Two sides, not one multiplier: a decode step reads half the bytes at bandwidth / fp8_mem_hbm (an
    HBM tier; fp8_mem on GDDR), a long prefill runs at the FP8 peak / fp8_compute; each moves only its
    own regime."""
    from dataclasses import replace

    from goodbench.engine.costmodel import SHIPPED

    def linear(dtype, k, n, gpu="h100-sxm"):
        cfg = EngineConfig(gpu=gpu, dtype=dtype).resolved()
        return float(CostModel.for_config(cfg, constants=k).breakdown(n, 0, 0, 0, 0, 1)["linear"])

    one = replace(SHIPPED, fp8_mem=1.0, fp8_mem_hbm=1.0, fp8_compute=1.0)
    for n in (1, 4096):
        assert linear("fp8", one, n) < 0.6 * linear("bf16", one, n)  # the roofline: half the bytes, twice the rate
    # the H100 (HBM) reads FP8 weights at its own term; Ada's (GDDR) moves it not
    assert linear("fp8", replace(one, fp8_mem=1.6), 1) == linear("fp8", one, 1)
    assert linear("fp8", replace(one, fp8_mem=1.6), 1, "l40s") > 1.4 * linear("fp8", one, 1, "l40s")
    assert linear("fp8", replace(one, fp8_mem_hbm=1.6), 1, "l40s") == linear("fp8", one, 1, "l40s")
    slow_reads, slow_math = replace(one, fp8_mem_hbm=1.6), replace(one, fp8_compute=1.6)
    assert linear("fp8", slow_reads, 1) > 1.4 * linear("fp8", one, 1)
    assert linear("fp8", slow_reads, 4096) == linear("fp8", one, 4096)
    assert linear("fp8", slow_math, 1) == linear("fp8", one, 1)
    assert linear("fp8", slow_math, 4096) > 1.4 * linear("fp8", one, 4096)


def test_scalar_and_vector_paths_agree():
    import numpy as np

    cm = CostModel.for_config(
        EngineConfig(gpu="a100-80g-sxm", model="llama-3.1-70b", tensor_parallel_size=4).resolved()
    )
    for args in [(0, 64, 64000, 0, 0, 64), (512, 10, 5000, 512 * 256.5, 512, 11), (0, 1, 10, 0, 0, 1)]:
        v = sum(cm.breakdown(*[np.float64(x) for x in args]).values())
        assert cm.step_time(*args) == pytest.approx(float(v), rel=1e-12)
    # past the tables (more tokens than the budget + sequences): extended along the last slope
    n = len(cm.linear) + 100
    assert cm.step_time(n, 0, 0, 0, 0, 1) == pytest.approx(float(sum(cm.breakdown(n, 0, 0, 0, 0, 1).values())))


def test_memory_bound_decode_orders_gpu_tiers_by_bandwidth():
    t = {
        g: explain(EngineConfig(gpu=g).resolved(), [], [(32, 1000)])["total_s"]
        for g in ("b200", "h100-sxm", "a100-80g-sxm", "l40s", "l4")
    }
    assert t["b200"] < t["h100-sxm"] < t["a100-80g-sxm"] < t["l40s"] < t["l4"]


def test_a_user_kv_size_is_a_knob_not_a_resolved_config():
    """num_gpu_blocks set by the user used to be taken for 'already resolved': the budget stayed None."""
    from goodbench.engine.core import Engine
    from goodbench.engine.kvcache import Seq

    eng = Engine(EngineConfig(num_gpu_blocks=500))
    assert eng.cfg.num_gpu_blocks == 500 and eng.cfg.max_num_batched_tokens == 8192
    eng.add(Seq(0, 100, 2))
    assert eng.step() is not None


def test_resolution_is_idempotent():
    for cfg in (
        EngineConfig(),
        EngineConfig(num_gpu_blocks=500),
        EngineConfig(enable_chunked_prefill=False),
        EngineConfig(gpu="a100-80g-pcie", max_model_len=8192),
        EngineConfig(kv_cache_dtype="fp8"),
    ):
        once = cfg.resolved()
        assert once.resolved() == once


def test_explain_prints_the_breakdown_and_its_basis(tmp_path):
    from conftest import run_cli
    from test_profile import write

    r = run_cli("engine", "explain", "--prefill", "4096", "--decode", "32x1000")
    assert r.returncode == 0 and "of their roofline" in r.stdout and "Vidur operator curves" in r.stdout
    pct = 100 * max(REGIME_ERROR["batch 17-64"], REGIME_ERROR["prefill-heavy"])  # 33 requests, a prefill
    assert f"expected error ±{pct:.0f}%" in r.stdout and "out of sample" in r.stdout
    assert "expected TTFT error ±" in r.stdout and "public vLLM TTFTs" in r.stdout
    assert explain(EngineConfig(), [], [(1, 100)])["uncertainty"]["regimes"] == ["batch 1"]
    r = run_cli("engine", "explain", "--calibration", write(tmp_path), "--prefill", "512", "--decode", "8x500")
    assert r.returncode == 0 and "calibration profile" in r.stdout and "roofline" not in r.stdout
    assert "expected TTFT error" not in r.stdout  # a profile fitted its own front end


def test_host_and_attention_terms_stay_sane_at_batch_512():
    """The per-request terms grow with the batch, but not so fast that 512 decode streams on one H100
    fall far below the ~12.5k output tokens/s publicly reported for Llama-3.1-8B (morphllm.com/
    vllm-benchmarks; not replayable, so a band, not a point), nor the step time stop growing."""
    cfg = EngineConfig(gpu="h100-sxm", model="llama-3.1-8b")
    steps = {b: explain(cfg, [], [(b, 500)])["total_s"] for b in (64, 256, 512)}
    assert 8_000 < 512 / steps[512] < 20_000
    assert steps[64] < steps[256] < steps[512] < 2.2 * steps[256]
