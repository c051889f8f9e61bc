"""The routed experts' time in one MoE layer on one GPU, as a table over the tokens in a step. Pure.

  t(N) = t0 + max(bytes(N) / (BW e_bw), flops(N) / (peak e_c))        on the busiest rank
  bytes(N) = touched experts x one expert's weights (its TP shard, in the experts' format)
  flops(N) = 2 x 3 H I/tp x rows, rows = routed tokens, each touched expert's padded to the kernel's block

Routing: expert i is chosen with probability q_i = min(1, k p_i), p_i ~ (i + 1)^-skew (skew 0 = balanced:
q = k/E, and the expected distinct experts is E (1 - (1 - k/E)^N), the issue's formula). A step's expected
touched experts are sum(1 - (1 - q_i)^N) and its routed tokens N q_i. So a decode step at batch 1 reads k
experts and one at batch 64 nearly all: the step is set by touched experts, not active parameters.
Expert parallelism (whole experts per rank, no TP split) places experts on ranks in a fixed shuffled order
(popularity is unrelated to an expert's id) and the step waits for the busiest rank; TP-sharded experts
(vLLM's default) read every touched expert's 1/tp slice on every rank.

(t0, e_bw, e_c, block) are per GPU architecture and weight format (KERNELS), fitted to AIConfigurator's
measured vLLM fused-MoE latencies (benchmarks/moe_kernels.py; data benchmarks/data/aic_moe.csv) and quoted
there with their error on shapes held out of the fit. Architectures without measured MoE kernels (AMD,
Ada) borrow the nearest measured one's and say so (borrowed_kernels)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .hardware import GPU
from .models import WEIGHT_FORMATS, Model


@dataclass(frozen=True)
class Kernel:
    """A fused-MoE kernel's fitted terms on one architecture and format."""

    t0_s: float  # per MoE layer per step: routing, permutes, launches (measured ~30-60 us where rooflines say ~10)
    e_bw: float  # achieved fraction of the memory bandwidth reading expert weights
    e_c: float  # achieved fraction of the compute dtype's peak in the grouped GEMMs
    block: int = 16  # rows each expert's tokens are padded to
    fit: str = "prior"  # where the numbers come from


PRIOR = Kernel(40e-6, 0.6, 0.5)
# benchmarks/moe_kernels.py --check: median |error| of KERNELS on the rows held out of their fit (other shapes,
# TP > 1, EP > 1, power-law routing), pooled, and the worst (arch, format, row set) median; tests recompute it
KERNEL_HELD_OUT = 0.192
KERNEL_WORST = 0.379
# (arch, format) -> Kernel; `python benchmarks/moe_kernels.py` refits and prints this table from the measured data
KERNELS: dict[tuple[str, str], Kernel] = {  # fmt: skip
    ("ada", "bf16"): Kernel(0, 0.8364, 0.3979, 64, "AIConfigurator vLLM fused MoE on l40s (15 rows)"),
    ("ada", "fp8"): Kernel(0, 0.8791, 0.2491, 64, "AIConfigurator vLLM fused MoE on l40s (15 rows)"),
    ("ada", "fp8-block"): Kernel(0, 1, 0.3182, 64, "AIConfigurator vLLM fused MoE on l40s (30 rows)"),
    ("ada", "mxfp4"): Kernel(0, 0.7834, 0.5071, 64, "AIConfigurator vLLM fused MoE on l40s (15 rows)"),
    ("blackwell", "bf16"): Kernel(1.05e-05, 0.835, 0.4025, 64, "AIConfigurator vLLM fused MoE on b200, b300, gb200 (45 rows)"),
    ("blackwell", "fp8"): Kernel(1.15e-05, 0.7521, 0.3355, 64, "AIConfigurator vLLM fused MoE on b200, b300, gb200 (45 rows)"),
    ("blackwell", "fp8-block"): Kernel(2.74e-05, 1, 0.1722, 64, "AIConfigurator vLLM fused MoE on b200, b300, gb200 (90 rows)"),
    ("blackwell", "mxfp4"): Kernel(2.12e-05, 0.597, 0.2757, 64, "AIConfigurator vLLM fused MoE on b200, b300, gb200 (45 rows)"),
    ("blackwell", "nvfp4"): Kernel(1.8e-05, 1, 0.2244, 64, "AIConfigurator vLLM fused MoE on b200, b300, gb200 (90 rows)"),
    ("blackwell-gddr", "bf16"): Kernel(0, 0.7922, 0.3703, 64, "AIConfigurator vLLM fused MoE on rtx-pro-6000 (15 rows)"),
    ("blackwell-gddr", "fp8"): Kernel(7.1e-06, 0.7616, 0.2643, 64, "AIConfigurator vLLM fused MoE on rtx-pro-6000 (15 rows)"),
    ("blackwell-gddr", "mxfp4"): Kernel(0, 0.7415, 0.5653, 16, "AIConfigurator vLLM fused MoE on rtx-pro-6000 (15 rows)"),
    ("blackwell-gddr", "nvfp4"): Kernel(5.83e-05, 1, 0.3327, 32, "AIConfigurator vLLM fused MoE on rtx-pro-6000 (30 rows)"),
    ("hopper", "bf16"): Kernel(2e-05, 0.8109, 0.4772, 64, "AIConfigurator vLLM fused MoE on h100-sxm, h200 (30 rows)"),
    ("hopper", "fp8"): Kernel(8.13e-05, 0.1514, 0.1202, 32, "AIConfigurator vLLM fused MoE on h100-sxm, h200 (30 rows)"),
    ("hopper", "fp8-block"): Kernel(4.11e-05, 1, 0.2514, 32, "AIConfigurator vLLM fused MoE on h100-sxm, h200 (60 rows)"),
    ("hopper", "mxfp4"): Kernel(4.1e-05, 0.6596, 0.6247, 64, "AIConfigurator vLLM fused MoE on h100-sxm, h200 (30 rows)"),
}  # fmt: skip
BORROW = {"cdna3": "hopper", "cdna4": "blackwell", "ada": "hopper", "ampere": "hopper", "blackwell-gddr": "blackwell"}


def kernel(gpu: GPU, fmt: str) -> tuple[Kernel, str | None]:
    """The fitted kernel for this tier and format, and the architecture it was borrowed from (None: measured)."""
    arch = gpu.arch
    if (arch, fmt) in KERNELS:
        return KERNELS[(arch, fmt)], None
    for a in (BORROW.get(arch), "hopper"):
        if a and (a, fmt) in KERNELS:
            return KERNELS[(a, fmt)], a
    return PRIOR, "prior"


def compute_peak(gpu: GPU, fmt: str) -> float:
    """FLOP/s of the dtype the experts' GEMMs run in: FP8 and FP4 on tensor cores that have them, else BF16
    (weight-only kernels: Marlin, Triton w4a16)."""
    dtype = WEIGHT_FORMATS[fmt][1]
    rate = {"fp8": gpu.fp8_tflops, "fp4": gpu.fp4_tflops}.get(dtype) or gpu.bf16_tflops
    return rate * 1e12


def routing(experts: int, top_k: int, skew: float) -> np.ndarray:
    """q_i: the probability that one token picks expert i (sums to top_k unless capped at 1)."""
    p = np.arange(1, experts + 1, dtype=float) ** -skew
    return np.minimum(1.0, top_k * p / p.sum())


def placement(experts: int, ep: int) -> np.ndarray:
    """Which EP rank holds each expert (in popularity order): a fixed shuffle, contiguous blocks of ids."""
    order = np.random.default_rng(0).permutation(experts)
    return order // (experts // ep)


def spread(n, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[N, E] arrays: the probability each expert is touched by a step of n tokens, and its expected tokens."""
    n = np.asarray(n, dtype=float)
    touched = -np.expm1(np.outer(n, np.log1p(-np.minimum(q, 1 - 1e-12))))
    return touched, np.outer(n, q)


def busiest(touched, load, hidden: int, ffn: int, gpu: GPU, fmt: str, shard: int, ranks: np.ndarray, k: Kernel):
    """Seconds of the routed experts on the busiest rank, given [N, E] touched and load (no t0)."""
    onehot = np.eye(int(ranks.max()) + 1)[ranks]  # [E, ranks]
    per_expert = 3 * hidden * ffn / shard
    nbytes = (touched @ onehot) * per_expert * WEIGHT_FORMATS[fmt][0] / 8
    flops = ((load + touched * (k.block - 1) / 2) @ onehot) * 2 * per_expert
    return np.maximum(nbytes / (gpu.bandwidth * k.e_bw), flops / (compute_peak(gpu, fmt) * k.e_c)).max(axis=1)


def expert_time(n, model: Model, gpu: GPU, fmt: str, tp: int, ep: bool, skew: float, k: Kernel) -> np.ndarray:
    """Seconds of one MoE layer's routed experts on the busiest GPU for each step size in n (0 -> 0)."""
    m = model.moe
    touched, load = spread(n, routing(m.experts, m.top_k, skew))
    shard = 1 if ep else tp  # TP splits each expert's intermediate size; EP keeps experts whole
    ranks = placement(m.experts, tp) if ep and tp > 1 else np.zeros(m.experts, dtype=int)
    t = busiest(touched, load, model.hidden, m.expert_ffn, gpu, fmt, shard, ranks, k)
    return np.where(np.asarray(n) > 0, k.t0_s + t, 0.0)


def expert_bytes(n, model: Model, dtype: str, skew: float) -> np.ndarray:
    """Bytes of expert weights every MoE layer of a step of n tokens reads, over all GPUs (the energy model)."""
    m = model.moe
    fmt = model.expert_format(dtype)
    touched, _ = spread(n, routing(m.experts, m.top_k, skew))
    per_expert = 3 * model.hidden * m.expert_ffn * WEIGHT_FORMATS[fmt][0] / 8
    return model.moe_layers * touched.sum(axis=1) * per_expert


def moe_table(n, model: Model, gpu: GPU, dtype: str, tp: int, ep: bool, skew: float) -> tuple[np.ndarray, str, dict]:
    """Every MoE layer's routed experts over n (seconds), the basis (the kernel's fit and any borrowing) and
    {format, borrowed} for engine_uncertainty."""
    fmt = model.expert_format(dtype)
    k, borrowed = kernel(gpu, fmt)
    t = model.moe_layers * expert_time(n, model, gpu, fmt, tp, ep, skew, k)
    basis = f"{fmt} experts: {k.fit}" + (f", borrowed from {borrowed}" if borrowed else "")
    return t, basis, {"format": fmt, "borrowed": borrowed}
