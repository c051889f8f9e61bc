"""Mixture-of-Experts in the engine: shapes (built-in and from a Hugging Face config.json), the routed experts'
cost by touched experts, MLA's and sliding windows' KV, expert parallelism, the kernel fit's held-out error."""

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import ROOT

from goodbench.api.enginefiles import load_model_file, resolve_engine
from goodbench.engine.config import EngineConfig
from goodbench.engine.costmodel import CostModel
from goodbench.engine.explain import explain
from goodbench.engine.hardware import GPUS, get_gpu
from goodbench.engine.models import MODELS, get_model
from goodbench.engine.moe import KERNEL_HELD_OUT, KERNEL_WORST, KERNELS, kernel, routing, spread
from goodbench.errors import InputError, UsageError

HF = os.path.join(ROOT, "tests", "data", "hfconfigs")


def test_touched_experts_follow_the_balanced_formula():
    """E (1 - (1 - k/E)^N): gpt-oss-120b touches 87 % of its experts at 64 tokens and 98 % at 128 (the issue's
    figures); skewed routing touches fewer at small N."""
    m = get_model("gpt-oss-120b").moe
    touched, load = spread([1, 64, 128], routing(m.experts, m.top_k, 0.0))
    frac = touched.sum(axis=1) / m.experts
    assert frac[0] == pytest.approx(4 / 128)
    assert frac[1] == pytest.approx(0.87, abs=0.005) and frac[2] == pytest.approx(0.98, abs=0.005)
    assert load.sum(axis=1) == pytest.approx([4, 256, 512])
    skewed, _ = spread([64], routing(m.experts, m.top_k, 1.2))
    assert skewed.sum() < touched[1].sum()


def test_group_limited_routing_touches_as_many_experts_as_the_formula_says():
    """DeepSeek-V3 picks each token's 8 experts within its top 4 of 8 groups: within a token the picks cluster,
    but each expert's chance is still k/E and tokens pick independently, so the expected experts a step touches
    (all the engine prices) are the formula's. Sampled: 4,000 steps per size, within 1 % (the sampling error is
    a tenth of that)."""
    m = get_model("deepseek-v3").moe
    assert (m.groups, m.topk_groups) == (8, 4)
    rng, per_group, sizes = np.random.default_rng(7), m.experts // m.groups, [1, 4, 16, 64, 256]
    want = spread(sizes, routing(m.experts, m.top_k, 0.0))[0].sum(axis=1)
    for n, w in zip(sizes, want):
        steps = 4000 if n <= 64 else 400
        groups = np.argsort(rng.random((steps, n, m.groups)), axis=2)[..., : m.topk_groups]  # each token's groups
        within = np.argsort(rng.random((steps, n, m.topk_groups * per_group)), axis=2)[..., : m.top_k]
        experts = groups[..., None] * per_group + np.arange(per_group)  # [steps, n, 4, 32]: the allowed experts
        picked = np.take_along_axis(experts.reshape(steps, n, -1), within, axis=2)
        assert (np.diff(np.sort(picked, axis=2), axis=2) > 0).all()  # 8 distinct experts a token
        touched = np.array([np.unique(s).size for s in picked.reshape(steps, -1)])
        assert touched.mean() == pytest.approx(w, rel=0.01), n


def test_a_moe_step_is_set_by_touched_experts_not_active_parameters():
    """Batch 1 reads 4 of 128 experts, batch 64 nearly all: the experts' time grows ~9x from 1 to 64 decodes
    while a dense 8B's linear layers barely move."""
    moe = resolve_engine(EngineConfig(model="gpt-oss-120b", gpu="h200"))
    dense = resolve_engine(EngineConfig(model="llama-3.1-8b", gpu="h200"))
    e1, e64 = (explain(moe, [], [(c, 1000)])["breakdown_s"]["moe_experts"] for c in (1, 64))
    d1, d64 = (explain(dense, [], [(c, 1000)])["breakdown_s"]["linear"] for c in (1, 64))
    assert e64 / e1 > 5 and d64 / d1 < 1.3
    r = explain(moe, [], [(64, 1000)])
    assert r["experts_touched"]["touched"] == pytest.approx(111.2, abs=0.2)
    assert "moe_experts" not in explain(dense, [], [(1, 1000)])["breakdown_s"]


def test_built_in_shapes_match_their_published_sizes():
    """Parameter counts as the model cards give them, and DeepSeek's MLA latent: 68.6 KiB per token."""
    want = {"gpt-oss-20b": 20.9, "gpt-oss-120b": 116.8, "qwen3-30b-a3b": 30.5, "qwen3-235b-a22b": 235.1}
    want |= {"deepseek-v3": 671.0, "qwen3-32b": 32.8, "llama-3.3-70b": 70.6}
    for name, b in want.items():
        assert MODELS[name].params_total / 1e9 == pytest.approx(b, abs=0.15), name
    ds = get_model("deepseek-v3")
    assert ds.kv_bytes_per_token() / 1024 == pytest.approx(68.625)
    assert ds.kv_bytes_per_token(tp=8) == ds.kv_bytes_per_token(tp=1)  # replicated: TP buys no KV capacity
    oss = get_model("gpt-oss-120b")
    assert oss.kv_bytes_per_token() == 18 * 2 * 8 * 64 * 2  # only the full-attention half grows with context


@pytest.mark.parametrize(
    "file,name",
    [
        ("openai--gpt-oss-120b.json", "gpt-oss-120b"),
        ("openai--gpt-oss-20b.json", "gpt-oss-20b"),
        ("Qwen--Qwen3-30B-A3B.json", "qwen3-30b-a3b"),
        ("Qwen--Qwen3-235B-A22B.json", "qwen3-235b-a22b"),
        ("deepseek-ai--DeepSeek-V3.json", "deepseek-v3"),
        ("Qwen--Qwen3-32B.json", "qwen3-32b"),
        ("meta-llama--Meta-Llama-3.1-70B.json", "llama-3.1-70b"),
    ],
)
def test_a_config_json_reads_as_the_built_in_shape(file, name):
    m, b = load_model_file(os.path.join(HF, file)), MODELS[name]
    for f in ("layers", "hidden", "heads", "kv_heads", "vocab", "moe", "mla", "sliding_window", "sliding_layers"):
        assert getattr(m, f) == getattr(b, f), f
    assert m.params_total == b.params_total and m.dtype == b.dtype


def test_a_config_json_runs_through_the_cli(tmp_path):
    cfg = os.path.join(HF, "openai--gpt-oss-20b.json")
    r = subprocess.run(
        [sys.executable, "-m", "goodbench", "engine", "explain", "--engine-model", cfg, "--gpu", "h100-sxm",
         "--decode", "16x500"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "experts touched per MoE layer" in r.stdout and "moe_experts" in r.stdout


@pytest.mark.parametrize(
    "change,key",
    [
        ({"architectures": ["FalconForCausalLM"]}, "architectures"),
        ({"num_local_experts": None}, "num_local_experts"),
        ({"quantization_config": {"quant_method": "bitsandbytes"}}, "quantization_config.quant_method"),
        ({"num_hidden_layers": "36"}, "num_hidden_layers"),
    ],
)
def test_a_config_json_it_cannot_price_is_refused_naming_the_key(tmp_path, change, key):
    with open(os.path.join(HF, "openai--gpt-oss-120b.json")) as f:
        d = json.load(f)
    d |= change
    d = {k: v for k, v in d.items() if v is not None}
    p = tmp_path / "config.json"
    p.write_text(json.dumps(d))
    with pytest.raises(InputError) as e:
        load_model_file(str(p))
    assert str(e.value).startswith(f"{p}: {key}:") and "\n" not in str(e.value)


def test_expert_parallel_needs_a_moe_model_whose_experts_divide():
    with pytest.raises(UsageError, match="enable-expert-parallel"):
        EngineConfig(model="llama-3.1-8b", tensor_parallel_size=2, enable_expert_parallel=True).resolved()
    with pytest.raises(UsageError, match="enable-expert-parallel"):
        EngineConfig(model="qwen3-30b-a3b", enable_expert_parallel=True).resolved()
    ok = EngineConfig(model="qwen3-30b-a3b", gpu="h200", tensor_parallel_size=4, enable_expert_parallel=True)
    assert ok.resolved().enable_expert_parallel


def test_expert_parallel_waits_for_the_busiest_rank():
    """Whole experts per rank: under skewed routing the hot rank holds the step back, so EP is dearer than
    TP-sharded experts at large steps, and skew makes EP dearer still."""
    base = dict(model="qwen3-30b-a3b", gpu="h200", tensor_parallel_size=4)
    t = {}
    for ep in (False, True):
        for skew in (0.0, 1.2):
            cm = CostModel.for_config(EngineConfig(**base, enable_expert_parallel=ep, expert_skew=skew))
            t[ep, skew] = float(cm.experts[4096])
    assert t[True, 1.2] > t[True, 0.0]
    assert t[True, 1.2] / t[False, 1.2] > t[True, 0.0] / t[False, 0.0]


def test_mla_chunked_prefill_re_reads_the_context():
    """DeepSeek's prefill up-projects every context token on every chunk: a chunk late in a long prompt costs
    more than the same chunk's attention alone would on a GQA model's terms."""
    ds = resolve_engine(EngineConfig(model="deepseek-v3", gpu="h200", tensor_parallel_size=8))
    early = explain(ds, [(2048, 0)], [])["breakdown_s"]["attention_prefill"]
    late = explain(ds, [(2048, 30000)], [])["breakdown_s"]["attention_prefill"]
    cm = CostModel.for_config(ds)
    assert cm.pf_up_s > 0 and late > early
    assert ds.dtype == "fp8"  # the checkpoint's FP8 as the default dtype


def test_weights_per_gpu_must_fit():
    with pytest.raises(UsageError, match="does not fit"):
        EngineConfig(model="deepseek-v3", gpu="h100-sxm", tensor_parallel_size=8).resolved()
    assert EngineConfig(model="deepseek-v3", gpu="h200", tensor_parallel_size=8).resolved().num_gpu_blocks > 0
    oss = EngineConfig(model="gpt-oss-120b", gpu="h100-sxm").resolved()  # MXFP4 experts: ~61 GiB on one H100
    assert oss.memory()["weights"] / 2**30 == pytest.approx(61, abs=2)


def test_every_new_tier_prices_a_moe_step_and_says_when_it_borrows():
    for name in ("b300", "gb200", "gb300", "mi325x", "mi355x", "h20", "rtx-pro-6000"):
        g = get_gpu(name)
        assert g.tdp_w and g.arch and g.source
        cfg = resolve_engine(EngineConfig(model="gpt-oss-20b", gpu=name))
        r = explain(cfg, [(512, 0)], [(8, 1000)])
        assert 0 < r["total_s"] < 1
        _, borrowed = kernel(g, "mxfp4")
        assert ("no measured mxfp4 MoE kernel" in r["uncertainty"]["basis"]) == bool(borrowed)
    assert kernel(get_gpu("mi355x"), "mxfp4")[1] == "blackwell" and kernel(get_gpu("h200"), "mxfp4")[1] is None
    assert all(g.fp4_tflops is None for g in GPUS.values() if g.arch in ("hopper", "ampere", "ada", "cdna3"))


def test_kernel_fit_error_on_held_out_rows_is_what_the_engine_says():
    """benchmarks/moe_kernels.py --check recomputes the held-out error engine_uncertainty quotes."""
    r = subprocess.run(
        [sys.executable, os.path.join(ROOT, "benchmarks", "moe_kernels.py"), "--check"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if x.startswith("pooled"))
    held = float(line.split("held out ")[1].split("%")[0]) / 100
    assert held == pytest.approx(KERNEL_HELD_OUT, abs=0.0015)
    worst = next(x for x in r.stdout.splitlines() if x.startswith("worst held-out"))
    assert float(worst.split(": ")[1].rstrip("%")) / 100 == pytest.approx(KERNEL_WORST, abs=0.0015)
    assert len(KERNELS) >= 15


def test_decode_stays_linear_in_context_for_moe():
    """The closed-form decode runs rely on a decode-only step being affine in its summed context."""
    cm = CostModel.for_config(resolve_engine(EngineConfig(model="gpt-oss-120b", gpu="h200")))
    t = [cm.step_time(0, 16, ctx, 0, 0, 16) for ctx in (16_000, 32_000, 48_000)]
    assert np.diff(t)[0] == pytest.approx(np.diff(t)[1])


def test_public_moe_check_recomputes_the_documented_errors():
    """benchmarks/moe_e2e.py: the out-of-sample figures docs/engine.md quotes (a drift guard: a change to the
    engine that moves them must update the docs with them)."""
    r = subprocess.run(
        [sys.executable, os.path.join(ROOT, "benchmarks", "moe_e2e.py")], capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0, r.stderr
    pooled = {
        line.split()[0]: float(line.split("pooled ")[1].split("%")[0])
        for line in r.stdout.splitlines()
        if " pooled " in line
    }
    assert pooled == pytest.approx({"TPOT": 29.9, "TTFT": 83.8, "throughput": 33.2}, abs=0.15)
    with open(os.path.join(ROOT, "docs", "engine.md"), encoding="utf-8") as f:
        doc = f.read()
    assert "TPOT 29.9 % (n = 15), TTFT 83.8 % (n = 4), throughput 33.2 % (n = 11)" in doc


def test_gpu_moe_benchmark_skips_without_a_gpu_and_compares_a_file(tmp_path):
    script = os.path.join(ROOT, "benchmarks", "gpu_moe.py")
    if importlib.util.find_spec("torch") is None:  # with torch (and maybe a GPU) it would measure for minutes
        r = subprocess.run([sys.executable, script, "--out", str(tmp_path / "x.csv")], capture_output=True, text=True)
        assert r.returncode == 0 and "nothing measured" in r.stdout
    f = tmp_path / "m.csv"
    rows = ["model,tokens,touched,seconds,spread,kernel"]
    rows += [f"gpt-oss-120b,{n},{t},{s},0.01,grouped_mm" for n, t, s in ((1, 4, 1e-4), (64, 111, 9e-4))]
    f.write_text("\n".join(rows) + "\n")
    r = subprocess.run([sys.executable, script, "--compare", str(f), "--gpu", "h200"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "111 /  111.2" in r.stdout and "measured x  9.00" in r.stdout


def test_a_quantized_dense_config_is_priced_in_its_format_or_refused(tmp_path):
    with open(os.path.join(HF, "meta-llama--Meta-Llama-3.1-70B.json")) as f:
        base = json.load(f)
    p = tmp_path / "config.json"
    p.write_text(json.dumps(base | {"quantization_config": {"quant_method": "fp8"}}))
    assert load_model_file(str(p)).dtype == "fp8"
    p.write_text(json.dumps(base | {"quantization_config": {"quant_method": "awq", "bits": 4}}))
    with pytest.raises(InputError, match="quantization_config.quant_method: awq 4-bit dense layers"):
        load_model_file(str(p))
    p.write_text(json.dumps(base | {"num_key_value_heads": None, "max_position_embeddings": None}))
    m = load_model_file(str(p))  # null means the default, as transformers reads it
    assert m.kv_heads == m.heads and m.max_position == 131072
