"""The cost model's operator times beside what benchmarks/gpu_operators.py measured on real GPUs (the files
in benchmarks/data/gpu-ops-TIER-RUN.csv; the median of a tier's runs is used).

    python benchmarks/gpu_operators_compare.py

Prints, per tier: a decoder layer's four BF16 GEMMs, the model (Vidur's Hopper curve, its dip at the
tier's ridge or, on the profiled die, at the profiled GPU's: opmodel.curve_bandwidth) against the
measurement, by token-count band; FP8 over BF16 measured against the model's ratio; prefill attention's
FLOP rate and decode attention's KV read rate against the fitted prefill_attn, kv_read and
attn_request_s. No GPU needed."""

from __future__ import annotations

import csv
import glob
import math
import os
import statistics
from collections import defaultdict

from goodbench.engine.costmodel import SHIPPED, fp8_scale
from goodbench.engine.hardware import get_gpu
from goodbench.engine.models import get_model
from goodbench.engine.opmodel import (
    PROFILED_TIER,
    curve_bandwidth,
    family,
    gemm_pricing,
    gemm_time,
    on_profiled_die,
    request_scale,
)

DATA = os.path.join(os.path.dirname(__file__), "data")
BANDS = (("decode, 1-64 tokens", 1, 64), ("mid, 96-1,024", 96, 1024), ("prefill, 1,536-8,192", 1536, 8192))


def measured(tier: str) -> dict[tuple, float]:
    """(op, model, tp, dtype, backend, n, ctx) -> median seconds over the tier's runs."""
    runs = defaultdict(list)
    for path in sorted(glob.glob(os.path.join(DATA, f"gpu-ops-{tier}-*.csv"))):
        with open(path, newline="") as fh:
            for r in csv.DictReader(line for line in fh if not line.startswith("#")):
                key = (r["op"], r["model"], int(r["tp"]), r["dtype"], r["backend"], int(r["n"]), int(r["ctx"]))
                runs[key].append(float(r["seconds"]))
    return {k: statistics.median(v) for k, v in runs.items()}


def layer_gemms(meas: dict, dtype: str) -> dict[tuple, float]:
    """(model, tp, n) -> the four GEMMs of one layer, summed; a layer with a failed GEMM is left out."""
    out = defaultdict(float)
    for (op, model, tp, dt, _, n, _), s in meas.items():
        if not op.startswith("attn") and dt == dtype:
            out[(model, tp, n)] += s
    return {k: s for k, s in out.items() if not math.isnan(s)}


def model_gemms(tier: str, model: str, tp: int, n: int, dtype: str, ridge_bw: float | None) -> float:
    """The cost model's four GEMMs of one layer (opmodel.gemm_pricing, as costmodel.tier_model prices
    them); ridge_bw None puts the curve's dip at the tier's own ridge."""
    peak, bw, wbytes, fam, _ = gemm_pricing(get_gpu(tier), dtype == "fp8")
    scale = fp8_scale(get_gpu(tier), SHIPPED) if dtype == "fp8" else (1.0, 1.0)
    params = get_model(model).params_per_layer / tp
    return float(gemm_time(n, params, peak, bw, wbytes, fam, scale=scale, ridge_bw=ridge_bw))


def _band_errors(layers: dict, predict) -> list[str]:
    cells, every = [], []
    for _, lo, hi in BANDS:
        errs = [predict(*k) / s - 1 for k, s in layers.items() if lo <= k[2] <= hi]
        every += errs
        cells.append(f"{statistics.median(errs):+.1%} (|{statistics.median(abs(e) for e in errs):.1%}|)")
    return [f"{statistics.median(abs(e) for e in every):.1%} ({len(every)})", *cells]


def gemm_table(tiers: list[str]) -> None:
    print("BF16 GEMMs of one layer (QKV, O, gate+up, down), model vs measured: median signed error (median |error|)")
    print("| tier | dip at | all: median abs (layers) | " + " | ".join(b[0] for b in BANDS) + " |")
    print("|---|---|---|" + "---|" * len(BANDS))
    for tier in tiers:
        layers = layer_gemms(measured(tier), "bf16")
        g = get_gpu(tier)
        rules = {"the tier's ridge (shipped)": None}
        if on_profiled_die(g):
            rules = {"the tier's ridge": None, "the profiled GPU's ridge (shipped)": curve_bandwidth(g)}
        for rule, rbw in rules.items():
            cells = _band_errors(
                layers, lambda mo, tp, n, rbw=rbw, tier=tier: model_gemms(tier, mo, tp, n, "bf16", rbw)
            )
            print(f"| {tier} | {rule} | " + " | ".join(cells) + " |")


def ratio_errors(tier: str, ridge_bw: float | None) -> dict[int, list[float]]:
    """Per token count: the model's tier / profiled-GPU layer time over the measured one, less 1. Both
    measured with the same software, so this isolates how the curve moves to the tier."""
    base = PROFILED_TIER[family(get_gpu(tier))]
    a, b = layer_gemms(measured(base), "bf16"), layer_gemms(measured(tier), "bf16")
    out = defaultdict(list)
    for k in a.keys() & b.keys():
        ratio = model_gemms(tier, *k, "bf16", ridge_bw) / model_gemms(base, *k, "bf16", None)
        out[k[2]].append(ratio / (b[k] / a[k]) - 1)
    return out


def ratio_table(tiers: list[str]) -> None:
    """For a tier on the profiled GPU's die, measured beside it: where the curve's dip goes."""
    for tier in tiers:
        g = get_gpu(tier)
        if not on_profiled_die(g) or PROFILED_TIER[family(g)] not in tiers:
            continue
        print(
            f"\n{tier} over {PROFILED_TIER[family(g)]}, one layer's BF16 GEMMs, the model's ratio against the measured one:"
        )
        for rule, rbw in (
            ("dip at the tier's ridge", None),
            ("dip at the profiled GPU's (shipped)", curve_bandwidth(g)),
        ):
            errs = ratio_errors(tier, rbw)
            every = [abs(e) for v in errs.values() for e in v]
            by_n = " ".join(f"{n}:{statistics.median(v):+.0%}" for n, v in sorted(errs.items()))
            print(f"  {rule}: median |error| {statistics.median(every):.1%}, max {max(every):.1%}; by tokens {by_n}")


def fp8_table(tiers: list[str]) -> None:
    print("\nFP8 (torch._scaled_mm, per-tensor scales, activations quantised outside the timing) over BF16, one layer:")
    print("| tier | band | measured FP8 / BF16 | model FP8 / BF16 (fp8_mem_hbm, fp8_compute fitted end to end) |")
    print("|---|---|---|---|")
    for tier in tiers:
        meas = measured(tier)
        b16, f8 = layer_gemms(meas, "bf16"), layer_gemms(meas, "fp8")
        rbw = curve_bandwidth(get_gpu(tier))
        for name, lo, hi in BANDS:
            keys = [k for k in f8 if lo <= k[2] <= hi and k in b16]
            got = statistics.median(f8[k] / b16[k] for k in keys)
            mod = statistics.median(
                model_gemms(tier, *k, "fp8", rbw) / model_gemms(tier, *k, "bf16", rbw) for k in keys
            )
            print(f"| {tier} | {name} | {got:.2f} | {mod:.2f} |")


def attention_table(tiers: list[str]) -> None:
    m = get_model("llama-3.1-8b")
    kv_layer = 2 * m.kv_heads * m.head_dim * 2  # bytes per token per layer, BF16
    print("\nAttention, Llama-3.1-8B's shape (32 query heads, 8 KV heads, 128), one layer, torch SDPA kernels:")
    print("| tier | op | kernel | size | measured | as a fraction of peak | the model's |")
    print("|---|---|---|---|---|---|---|")
    for tier in tiers:
        g = get_gpu(tier)
        peak, bw = g.bf16_tflops * 1e12, g.bandwidth
        for (op, _, _, _, backend, n, ctx), s in sorted(measured(tier).items()):
            if op == "attn_prefill" and s == s:
                flops = 4 * m.heads * m.head_dim * n * (n + 1) / 2
                print(
                    f"| {tier} | prefill | {backend} | {n} tokens | {flops / s / 1e12:.0f} TFLOP/s | "
                    f"{flops / s / peak:.0%} | {1 / SHIPPED.prefill_attn:.0%} (prefill_attn) |"
                )
            elif op == "attn_decode" and s == s:
                model_s = SHIPPED.kv_read * n * ctx * kv_layer / bw + SHIPPED.attn_request_s * request_scale(g) * n
                print(
                    f"| {tier} | decode | {backend} | {n} x {ctx} | {n * ctx * kv_layer / s / 1e12:.2f} TB/s | "
                    f"{n * ctx * kv_layer / s / bw:.0%} | {model_s * 1e6:.1f} us vs {s * 1e6:.1f} us measured |"
                )


def main() -> None:
    tiers = sorted(
        {os.path.basename(p)[len("gpu-ops-") :].rsplit("-", 1)[0] for p in glob.glob(f"{DATA}/gpu-ops-*.csv")}
    )
    for tier in tiers:
        envs = []
        for p in sorted(glob.glob(os.path.join(DATA, f"gpu-ops-{tier}-*.csv"))):
            with open(p) as fh:
                envs.append(fh.readline().strip("# \n"))
        print(f"{tier}: {len(envs)} runs; {envs[0]}")
    print()
    gemm_table(tiers)
    ratio_table(tiers)
    fp8_table(tiers)
    attention_table(tiers)


if __name__ == "__main__":
    main()
