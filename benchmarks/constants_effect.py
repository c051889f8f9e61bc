"""What a refit of the cost model's public constants does to a simulated run, and what async scheduling
adds: 300 ShareGPT requests at 4 req/s (seed 0) on several tiers, TTFT p50 / TPOT p50 with the
previous pass's constants (EIGHTH_PASS, issue 20) against the shipped ones, and the shipped ones with
--async-scheduling.

    python benchmarks/constants_effect.py

Deterministic (virtual time); about half a minute."""

from __future__ import annotations

import numpy as np

from goodbench import tokenizer as tokmod
from goodbench.api.common import load_workload
from goodbench.engine.config import EngineConfig
from goodbench.engine.costmodel import SHIPPED, CostModel, StepConstants
from goodbench.engine.virtual import simulate
from goodbench.workloads import build_plan

# issue 20's eighth pass (one FP8 weight-read term for every tier)
EIGHTH_PASS = StepConstants(
    step_s=0.5693e-3,
    request_s=19.39e-6,
    kv_read=1.372,
    attn_request_s=0.599e-6,
    fp8_mem=1.440,
    fp8_mem_hbm=1.440,
    fp8_compute=1.001,
    tp_layer_s=33.94e-6,
    tp_layer_pcie_s=0.0,
    tp_pcie_bw=2.491,
    prefill_attn=2.600,
    frontend_s=0.0,
)
SETUPS = [  # (gpu, model, tp, dtype)
    ("h100-sxm", "llama-3.1-8b", 1, "bf16"),
    ("l40s", "llama-3.1-8b", 1, "bf16"),
    ("h200", "llama-3.1-8b", 1, "bf16"),
    ("a100-40g", "llama-3.1-8b", 1, "bf16"),
    ("a100-80g-sxm", "llama-3.1-8b", 1, "bf16"),
    ("h100-sxm", "llama-3.1-8b", 1, "fp8"),
    ("h200", "llama-3.1-8b", 1, "fp8"),
    ("l40s", "llama-3.1-8b", 1, "fp8"),
    ("h100-sxm", "llama-3.1-70b", 4, "bf16"),
    ("h100-pcie", "llama-3.1-70b", 2, "fp8"),
]


def p50s(cfg: EngineConfig, k: StepConstants, plan) -> tuple[float, float]:
    """(TTFT p50, TPOT p50) in ms."""
    cfg = cfg.resolved()
    recs = simulate(cfg, plan, cost=CostModel.for_config(cfg, constants=k)).records
    ttft = [r.first_token_at - r.sent_at for r in recs if r.first_token_at is not None]
    tpot = [(r.chunk_times[-1] - r.chunk_times[0]) / (len(r.chunk_times) - 1) for r in recs if len(r.chunk_times) > 1]
    return float(np.median(ttft)) * 1e3, float(np.median(tpot)) * 1e3


def main() -> None:
    before = EIGHTH_PASS
    plan = build_plan(load_workload("sharegpt", num_prompts=300, request_rate=4.0), tokmod.load(None, lazy=True))
    print(
        "| setup | TTFT p50, before -> shipped | TPOT p50, before -> shipped | with --async-scheduling: TTFT p50, TPOT p50 |"
    )
    print("|---|---|---|---|")
    for gpu, model, tp, dtype in SETUPS:
        cfg = EngineConfig(gpu=gpu, model=model, tensor_parallel_size=tp, dtype=dtype)
        (t0, p0), (t1, p1) = p50s(cfg, before, plan), p50s(cfg, SHIPPED, plan)
        t2, p2 = p50s(
            EngineConfig(gpu=gpu, model=model, tensor_parallel_size=tp, dtype=dtype, async_scheduling=True),
            SHIPPED,
            plan,
        )
        print(
            f"| {gpu} {model} TP {tp} {dtype} | {t0:.1f} -> {t1:.1f} ms ({t1 / t0 - 1:+.1%}) | "
            f"{p0:.2f} -> {p1:.2f} ms ({p1 / p0 - 1:+.1%}) | {t2:.1f} ms ({t2 / t1 - 1:+.1%}), {p2:.2f} ms ({p2 / p1 - 1:+.1%}) |"
        )


if __name__ == "__main__":
    main()
