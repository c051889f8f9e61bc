"""Step time from a step's composition: a per-op-group roofline (docs/engine.md). Pure.

  T = max(F_lin / (P * eta_c(N)), W / (BW * eta_m))          linear layers: compute vs weight streaming
    + max(F_attn_pf / (P * eta_attn), KV_pf / (BW * eta_m))    prefill attention
    + KV_dec / (BW * eta_kv)                                   decode attention reads every context
    + max(F_head / (P * eta_c(R)), W_head / (BW * eta_m))      LM head on one row per scheduled request
    + 2 L (alpha + 2(T-1)/T * N d 2 / B_link)                  tensor-parallel all-reduces
    + t_fixed + t_seq * R                                      launch, scheduling, sampling, detokenising

Calibration (constants below; each says where it comes from). Efficiencies are taken from
operator-level data (Vidur's profiled GEMMs, microsoft/vidur data/profiling, MIT); the per-step and per-request times
are fitted to public end-to-end measurements (calibration.py; fitting the HBM efficiency as well did
not lower the leave-one-out error, so it stays at the operator-level value). Expected error against
real vLLM: about ±10% on decode step time at small batches on H100/A100 (where there is data); decode
attention efficiency is UNVERIFIED and matters at long contexts; larger for GDDR GPUs and MI300X, whose
efficiencies are assumed, not measured.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from .config import EngineConfig
from .hardware import get_gpu, get_model

# Vidur H100 Llama-2-7B TP1 linear layers reach 734-768 TFLOP/s at N >= 1024 (74-78% of 989);
# A100 Llama-3-8B 205-228 of 312 (66-73%). One ceiling for both:
ETA_COMPUTE_MAX = 0.75
# Half-efficiency batch N_half = K * ridge(FLOP/byte): H100 ridge 295 -> 118 tokens, A100 153 -> 61;
# Vidur: H100 reaches 288 TF at N=128 (model 0.75*128/246 = 0.39*989 = 386, weight-bound anyway) and
# 631 TF at 512 (model 603); A100 148 TF at 128 (model 158) and 225 at 512 (model 209).
N_HALF_PER_RIDGE = 0.4
# Weight streaming: Vidur N=1 linear layers give 2.60 TB/s on H100 (0.78 of 3.35), 1.58 on A100 (0.77).
ETA_MEM_HBM = 0.78
ETA_MEM_GDDR = 0.80  # UNVERIFIED: GDDR6 boards typically sustain ~80-85% in STREAM-like kernels
# Paged decode attention: DistServe's A100 fit implies ~1.3 TB/s (0.64). UNVERIFIED on other GPUs.
ETA_KV = 0.65
# FlashAttention-2 forward: ~50-70% of peak on A100/H100 for long sequences; 0.5 is conservative.
ETA_ATTN = 0.5
# All-reduce latency: NCCL H100 DGX ~34 us at 1 MB (vidur all_reduce.csv); vLLM's custom all-reduce is
# faster for small messages. NVLink 12 us, PCIe 30 us per call.
ALLREDUCE_ALPHA_NVLINK_S = 12e-6
ALLREDUCE_ALPHA_PCIE_S = 30e-6
# Fixed per-step time (kernel launches with CUDA graphs, scheduler, input prep) and per-request
# (sampling, detokenising, output processing): fitted to public end-to-end measurements of vLLM V1
# servers (engine/virtual/calibration.csv, `python -m goodbench.engine.virtual.calibration`; a test refits them and
# fails if these drift). Leave-one-out error on the fitted points <= 1% (batch 1-4, H100 and A100-40G);
# a batch-8 A100 PCIe check is 9% slower than this and vLLM's batch-8 CI latency test 16-26% slower
# (docs/engine.md): per-request work at larger batches is probably under-priced.
STEP_FIXED_S = 0.725e-3
PER_SEQ_S = 7.1e-6


@dataclass(frozen=True)
class CostModel:
    peak: float  # FLOP/s
    bw: float  # B/s
    eta_m: float
    n_half: float
    lin_flops_per_token: float  # 2 * matmul params per GPU (all layers)
    weight_bytes: float  # layer weights per GPU
    head_flops_per_row: float
    head_bytes: float
    attn_flops_coef: float  # 4 * heads/T * head_dim * layers
    kv_bytes_per_token: float  # per GPU, all layers
    comm_per_token_s: float  # all-reduce bandwidth term per token, all layers
    comm_fixed_s: float  # all-reduce latency, all layers
    fixed_s: float
    per_seq_s: float
    fixed_step_s: float | None = None  # tests: every step takes exactly this long

    @classmethod
    def for_config(cls, cfg: EngineConfig, fixed_step_ms: float | None = None) -> CostModel:
        fixed_step_ms = cfg.fixed_step_ms if fixed_step_ms is None else fixed_step_ms
        gpu, m = get_gpu(cfg.gpu), get_model(cfg.model)
        tp = cfg.tensor_parallel_size
        fp8 = cfg.dtype == "fp8"
        peak = (gpu.fp8_tflops if fp8 else gpu.bf16_tflops) * 1e12
        wb = 1.0 if fp8 else 2.0
        bw = gpu.mem_bw_tbs * 1e12
        ridge = peak / bw
        comm_tok = comm_fixed = 0.0
        if tp > 1:
            link = gpu.interconnect_gbs * 1e9
            alpha = ALLREDUCE_ALPHA_NVLINK_S if gpu.nvlink else ALLREDUCE_ALPHA_PCIE_S
            comm_fixed = 2 * m.layers * alpha
            comm_tok = 2 * m.layers * (2 * (tp - 1) / tp) * m.hidden * 2 / link
        overhead = cfg.step_overhead_ms / 1000 if cfg.step_overhead_ms is not None else STEP_FIXED_S
        return cls(
            peak=peak,
            bw=bw,
            eta_m=ETA_MEM_HBM if gpu.hbm else ETA_MEM_GDDR,
            n_half=N_HALF_PER_RIDGE * ridge,
            lin_flops_per_token=2 * m.layers * m.params_per_layer / tp,
            weight_bytes=wb * m.layers * m.params_per_layer / tp,
            head_flops_per_row=2 * m.vocab * m.hidden / tp,
            head_bytes=wb * m.vocab * m.hidden / tp,
            attn_flops_coef=4 * (m.heads // tp) * m.head_dim * m.layers,
            kv_bytes_per_token=cfg.kv_bytes_per_token(),
            comm_per_token_s=comm_tok,
            comm_fixed_s=comm_fixed,
            fixed_s=overhead,
            per_seq_s=PER_SEQ_S,
            fixed_step_s=fixed_step_ms / 1000 if fixed_step_ms is not None else None,
        )

    def _eta_c(self, n):
        return ETA_COMPUTE_MAX * n / (n + self.n_half)

    def breakdown(self, prefill_tokens, decode_tokens, decode_ctx, prefill_attn, prefill_ctx, num_seqs) -> dict:
        """Seconds per op group. Works on scalars and on numpy arrays (vectorised decode runs)."""
        n = prefill_tokens + decode_tokens
        nn = np.maximum(n, 1)
        lin = np.maximum(
            self.lin_flops_per_token * n / (self.peak * self._eta_c(nn)), self.weight_bytes / (self.bw * self.eta_m)
        )
        rows = np.maximum(num_seqs, 1)
        head = np.maximum(
            self.head_flops_per_row * rows / (self.peak * self._eta_c(rows)), self.head_bytes / (self.bw * self.eta_m)
        )
        attn_pf = np.maximum(
            self.attn_flops_coef * prefill_attn / (self.peak * ETA_ATTN),
            self.kv_bytes_per_token * prefill_ctx / (self.bw * self.eta_m),
        )
        attn_dec = self.kv_bytes_per_token * decode_ctx / (self.bw * ETA_KV)
        comm = np.where(n > 0, self.comm_fixed_s + self.comm_per_token_s * n, 0.0)
        fixed = self.fixed_s + self.per_seq_s * num_seqs
        return {
            "linear": lin,
            "lm_head": head,
            "attention_prefill": attn_pf,
            "attention_decode": attn_dec,
            "allreduce": comm,
            "overhead": fixed,
        }

    def step_time(self, prefill_tokens, decode_tokens, decode_ctx, prefill_attn, prefill_ctx, num_seqs):
        if self.fixed_step_s is not None:
            if np.ndim(decode_ctx) == 0:
                return self.fixed_step_s
            return np.full(np.shape(decode_ctx), self.fixed_step_s)
        if np.ndim(decode_ctx) == 0:
            return self._scalar(prefill_tokens, decode_tokens, decode_ctx, prefill_attn, prefill_ctx, num_seqs)
        b = self.breakdown(prefill_tokens, decode_tokens, decode_ctx, prefill_attn, prefill_ctx, num_seqs)
        total = (
            b["linear"] + b["lm_head"] + b["attention_prefill"] + b["attention_decode"] + b["allreduce"] + b["overhead"]
        )
        return float(total) if np.ndim(total) == 0 else total

    def _scalar(self, pt, dt, dctx, pattn, pctx, seqs) -> float:
        """step_time for plain numbers, without numpy's per-call overhead (the simulator's hot path)."""
        n = pt + dt
        nn = n if n > 1 else 1
        peak, bwm = self.peak, self.bw * self.eta_m
        wfloor = self.weight_bytes / bwm
        t = self.lin_flops_per_token * n / (peak * ETA_COMPUTE_MAX * nn / (nn + self.n_half))
        total = t if t > wfloor else wfloor
        rows = seqs if seqs > 1 else 1
        t = self.head_flops_per_row * rows / (peak * ETA_COMPUTE_MAX * rows / (rows + self.n_half))
        hfloor = self.head_bytes / bwm
        total += t if t > hfloor else hfloor
        if pt:
            a = self.attn_flops_coef * pattn / (peak * ETA_ATTN)
            b = self.kv_bytes_per_token * pctx / bwm
            total += a if a > b else b
        total += self.kv_bytes_per_token * dctx / (self.bw * ETA_KV)
        if n > 0:
            total += self.comm_fixed_s + self.comm_per_token_s * n
        return total + self.fixed_s + self.per_seq_s * seqs

    def batch_time(self, batch) -> float:
        return self.step_time(
            batch.prefill_tokens,
            batch.decode_tokens + batch.padding,
            batch.decode_ctx,
            batch.prefill_attn,
            batch.prefill_ctx,
            batch.num_seqs,
        )

    def to_dict(self) -> dict:
        return asdict(self)


def explain(cfg: EngineConfig, prefill: list[tuple[int, int]], decodes: list[tuple[int, int]]) -> dict:
    """Breakdown for `goodbench engine explain`: prefill chunks (new tokens, prior context) and
    decode groups (count, context length)."""
    cm = CostModel.for_config(cfg)
    pt = sum(n for n, _ in prefill)
    pa = sum(n * (p + (n + 1) / 2) for n, p in prefill)
    pc = sum(p + n for n, p in prefill)
    dt = sum(c for c, _ in decodes)
    dc = sum(c * (ctx + 1) for c, ctx in decodes)
    seqs = len(prefill) + dt
    b = {k: float(v) for k, v in cm.breakdown(pt, dt, dc, pa, pc, seqs).items()}
    return {
        "breakdown_s": b,
        "total_s": sum(b.values()),
        "tokens": pt + dt,
        "prefill_tokens": pt,
        "decode_tokens": dt,
        "num_seqs": seqs,
        "eta_compute": float(cm._eta_c(max(pt + dt, 1))),
        "weight_floor_s": cm.weight_bytes / (cm.bw * cm.eta_m),
    }


def parse_step(prefill: list[str], decode: list[str]) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """`--prefill N[@CTX]` and `--decode COUNTxCTX` texts -> explain()'s (tokens, context) and (count,
    context) pairs."""
    from ..errors import UsageError

    try:
        pre = [(int(n), int(ctx or 0)) for n, _, ctx in (p.partition("@") for p in prefill)]
        dec = [(int(c), int(ctx or 0)) for c, _, ctx in (d.lower().partition("x") for d in decode)]
    except ValueError:
        raise UsageError("--prefill takes N or N@CTX; --decode takes COUNTxCTX, e.g. 32x1000") from None
    if not pre and not dec:
        raise UsageError("give at least one --prefill or --decode")
    return pre, dec
