"""Step time from a step's composition (docs/engine.md). Pure.

  T = L [GEMMs(N) + element-wise(N)]            measured operator curves (opmodel.py, from Vidur)
    + 2 L allreduce(N h 2 bytes) + L t_tp        TP > 1: measured collectives (PCIe: latency + ring bytes
                                                 at the link rate / a fitted efficiency), a per-layer term
    + GEMM_head(R)                               LM head, one row per scheduled request
    + max(F_attn_pf k_pf / P, KV_pf k_kv / BW)   prefill attention
    + KV_dec k_kv / BW + L t_attn D BW_ref / BW  decode attention: context bytes, and a per-request cost
    + t_step + t_req R                           host: scheduling, input preparation, sampling, output
  N tokens in the step, R requests scheduled, D of them decoding, L layers, h hidden size, BW the
  tier's memory bandwidth (BW_ref the H100 SXM's: t_attn is fitted there, opmodel.request_scale).

The operator curves are measured (Vidur); the eleven terms of StepConstants are fitted to public
end-to-end vLLM measurements (engine/virtual/calibration.csv; `python -m goodbench.engine.virtual.
calreport --refit` refits them and a test fails if SHIPPED drifts). `goodbench calibrate` fits a
profile (engine/profile.py) to a user's own server instead: profile_model.

Every term is a table over N or R, or linear in the decode context: a decode-only step is linear in
its summed context, which the simulator's closed-form decode runs rely on (engine/core.py)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from . import jitter
from .attnterms import attention_terms
from .config import EngineConfig
from .frontend import FrontEnd
from .hardware import get_gpu
from .moe import expert_bytes, moe_table
from .opmodel import (
    allreduce_time,
    elementwise_time,
    fast_fabric,
    gemm_pricing,
    gemm_sides,
    gemm_time,
    pcie_ring_bytes_s,
    request_scale,
)
from .power import PowerModel, power_model
from .profile import Profile
from .vision import PREP_IMAGE_S, PREP_PIXEL_S


@dataclass(frozen=True)
class StepConstants:
    """The fitted terms. kv_read, prefill_attn, fp8_mem, fp8_mem_hbm, fp8_compute and tp_pcie_bw are
    inverse efficiencies (1 = the roofline). FP8 GEMMs have two: the weight reads (1 = half the BF16
    bytes at the BF16 kernels' measured efficiency), fp8_mem on GDDR tiers (Ada) and fp8_mem_hbm on
    HBM ones (Hopper, Blackwell, MI300X: other kernels, fitted to other sources), and fp8_compute on the FP8
    tensor-core rate (1 = the FP8 peak at that efficiency); a step's GEMMs pay whichever side binds."""

    step_s: float  # host time per step
    request_s: float  # host time per scheduled request per step
    kv_read: float  # KV bytes (decode, and prefill re-reads) at bandwidth / kv_read
    attn_request_s: float  # decode attention per decoding request per layer, on the H100 SXM (opmodel.request_scale)
    fp8_mem: float  # FP8 weights read at bandwidth / fp8_mem (memory-bound GEMMs: decode), GDDR tiers
    fp8_mem_hbm: float  # the same on HBM tiers (fp8_scale)
    fp8_compute: float  # FP8 tensor-core FLOPs at peak / fp8_compute (compute-bound GEMMs: prefill, big batches)
    tp_layer_s: float  # per layer per step with TP > 1 over NVLink, beyond the measured all-reduces
    tp_layer_pcie_s: float  # the same over PCIe (no NVLink: NCCL over the host bridge)
    tp_pcie_bw: float  # PCIe ring all-reduce: its bytes at the link rate / tp_pcie_bw (opmodel.pcie_ring_time)
    prefill_attn: float  # prefill attention FLOPs at peak / prefill_attn
    frontend_s: float  # once per request: the server's front end between send and the engine (HTTP, tokenizing)


SHIPPED = StepConstants(  # `python -m goodbench.engine.virtual.calreport --refit` (tests/test_calibration.py checks it)
    step_s=0.570191e-3,
    request_s=19.1573e-6,
    kv_read=1.37608,
    attn_request_s=0.58967e-6,
    fp8_mem=1.27776,
    fp8_mem_hbm=1.03425,
    fp8_compute=1.63176,
    tp_layer_s=34.4484e-6,
    tp_layer_pcie_s=3.84492e-6,
    tp_pcie_bw=2.32358,
    prefill_attn=2.42513,
    frontend_s=0.0,  # V1's, fitted at its bound: the V1 sources' TTFTs leave no room for one (docs/engine.md)
)


def fp8_scale(gpu, k: StepConstants) -> tuple[float, float]:
    """(weight-read, tensor-core) inverse efficiencies of FP8 GEMMs on this tier: the weight reads by
    memory (GDDR: Ada's FP8 kernels; HBM: Hopper's, Blackwell's, MI300X's), the FP8 rate shared."""
    return (k.fp8_mem_hbm if gpu.hbm else k.fp8_mem), k.fp8_compute


def _ext(table: np.ndarray, x):
    """table[x], extended past its end along its last slope (vectorised)."""
    last = len(table) - 1
    slope = table[last] - table[last - 1]
    x = np.asarray(x)
    xi = np.clip(x, 0, last).astype(np.int64)
    return np.where(x > last, table[last] + (x - last) * slope, table[xi])


@dataclass(frozen=True, eq=False)
class CostModel:
    """Tables over tokens in the step (linear layers, collectives) and scheduled requests (LM head),
    and per-unit costs for the rest. `basis` says where the numbers come from."""

    linear: np.ndarray  # seconds, index N = tokens in the step
    comm: np.ndarray  # seconds, index N
    head: np.ndarray  # seconds, index R = requests scheduled
    step_s: float
    request_s: float
    ctx_s: float  # per decode-context token read
    decode_request_s: float  # per decoding request (all layers)
    pf_flops_s: float  # per unit of prefill attention work (sum n (p + (n + 1) / 2))
    pf_ctx_s: float  # per prefill context token read
    pf_up_s: float = (
        0.0  # per prefill context token, every chunk: MLA's up-projection of the latent (engine/attnterms.py)
    )
    basis: str = ""
    fixed_step_s: float | None = None  # tests: every step takes exactly this long
    units: dict | None = None  # a tier model's per-unit terms: what each StepConstants term multiplies
    frontend_s: float = 0.0  # the server's front end: a request reaches the engine this long after its send
    frontend_flight_s: float = 0.0  # ... and this much more per request in flight at the send (profiles)
    frontend_token_s: float = 0.0  # ... and per prompt token (profiles)
    prep_image_s: float = 0.0  # a vision-language model's image preprocessing in the front end (FrontEnd.media)
    prep_pixel_s: float = 0.0
    step_jitter: tuple = ()  # profiles: percentiles of a step's time over its model time (engine/jitter.py)
    profile: dict | None = None  # from a calibration profile: {path, step_time_pct} (engine/uncertainty.py)
    experts: np.ndarray | None = None  # MoE: the routed experts' share of `linear`, index N (explain's breakdown)
    moe: dict | None = None  # MoE: {format, borrowed}: how the experts were priced (engine/uncertainty.py)
    power: PowerModel | None = None  # the tier's power (engine/power.py); None: no energy (a profile, no TDP)
    step_bytes: np.ndarray | None = None  # per GPU, index N: the weights a step of N tokens reads
    step_flops: np.ndarray | None = None  # per GPU, index N: 2 N x the active parameters
    kv_bytes_tok: float = 0.0  # per GPU, per context token read (decode and prefill context)
    _tok: list = field(default=None, init=False, repr=False, compare=False)
    _row: list = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "_tok", (self.linear + self.comm).tolist())
        rows = np.arange(len(self.head))
        object.__setattr__(self, "_row", (self.head + self.request_s * rows).tolist())

    @property
    def front_end(self) -> FrontEnd:
        return FrontEnd(
            self.frontend_s, self.frontend_flight_s, self.frontend_token_s, self.prep_image_s, self.prep_pixel_s
        )

    @classmethod
    def for_config(
        cls, cfg: EngineConfig, fixed_step_ms: float | None = None, constants: StepConstants | None = None
    ) -> CostModel:
        """The tier's cost model for this config (its --calibration profile instead, when it names one)."""
        fixed_step_ms = cfg.fixed_step_ms if fixed_step_ms is None else fixed_step_ms
        fixed = fixed_step_ms / 1000 if fixed_step_ms is not None else None
        if cfg.calibration and constants is None:
            cm = profile_model(cfg.resolved(), cfg.profile())
        else:
            k = constants or SHIPPED
            if cfg.step_overhead_ms is not None:
                k = replace(k, step_s=cfg.step_overhead_ms / 1000)
            cm = tier_model(cfg.resolved(), k)
        if cfg.frontend_ms is not None:  # a measured front end instead of the tier's or the profile's
            cm = replace(cm, frontend_s=cfg.frontend_ms / 1000)
        if cfg.frontend_token_us is not None:
            cm = replace(cm, frontend_token_s=cfg.frontend_token_us / 1e6)
        if fixed is None and cfg.shape().vision is not None:  # images are preprocessed before the engine
            cm = replace(cm, prep_image_s=PREP_IMAGE_S, prep_pixel_s=PREP_PIXEL_S)
        if fixed is not None:  # tests: exactly this long per step, and nothing before the engine
            return replace(
                cm, fixed_step_s=fixed, frontend_s=0.0, frontend_flight_s=0.0, frontend_token_s=0.0, step_jitter=()
            )
        return cm

    def step_energy(self, tokens: int, ctx: float, dur: float) -> float:
        """Joules per GPU of one step of `tokens` tokens reading `ctx` context tokens' KV over dur seconds
        (0 without a power model)."""
        p = self.power
        if p is None or tokens <= 0:
            return 0.0 if p is None else p.idle_w * dur
        n = min(tokens, len(self.step_bytes) - 1)
        return p.energy(dur, float(self.step_bytes[n]) + self.kv_bytes_tok * ctx, float(self.step_flops[n]))

    def run_energy(self, r: int, ctx: float, k: int, total_s: float) -> float:
        """Joules per GPU of k decode steps of r requests whose summed context starts at ctx and grows by r a
        step (engine/core.decode_run), over total_s seconds in all (the cap on the run's mean power)."""
        p = self.power
        if p is None:
            return 0.0
        n = min(r, len(self.step_bytes) - 1)
        nbytes = k * (float(self.step_bytes[n]) + self.kv_bytes_tok * ctx) + self.kv_bytes_tok * r * k * (k - 1) / 2
        return p.energy(total_s, nbytes, k * float(self.step_flops[n]))

    def scaled(self, f: float) -> CostModel:
        """Every step time times f (the front end unchanged): the engine at the edge of its error."""
        if f == 1.0:
            return self
        return replace(
            self,
            linear=self.linear * f,
            experts=None if self.experts is None else self.experts * f,
            comm=self.comm * f,
            head=self.head * f,
            step_s=self.step_s * f,
            request_s=self.request_s * f,
            ctx_s=self.ctx_s * f,
            decode_request_s=self.decode_request_s * f,
            pf_flops_s=self.pf_flops_s * f,
            pf_ctx_s=self.pf_ctx_s * f,
            pf_up_s=self.pf_up_s * f,
            fixed_step_s=None if self.fixed_step_s is None else self.fixed_step_s * f,
        )

    def _tokens(self, n):
        return _ext(self.linear, n), _ext(self.comm, n)

    def breakdown(self, prefill_tokens, decode_tokens, decode_ctx, prefill_attn, prefill_ctx, num_seqs) -> dict:
        """Seconds per op group. Works on scalars and on numpy arrays (vectorised decode runs)."""
        n = np.asarray(prefill_tokens) + np.asarray(decode_tokens)
        lin, comm = self._tokens(n)
        attn_pf = np.where(
            np.asarray(prefill_tokens) > 0,
            np.maximum(self.pf_flops_s * np.asarray(prefill_attn), self.pf_ctx_s * np.asarray(prefill_ctx))
            + self.pf_up_s * np.asarray(prefill_ctx),
            0.0,
        )
        out = {"linear": lin}
        if self.experts is not None:
            out["moe_experts"] = _ext(self.experts, n)
            out["linear"] = lin - out["moe_experts"]
        return out | {
            "lm_head": _ext(self.head, num_seqs),
            "attention_prefill": attn_pf,
            "attention_decode": self.ctx_s * np.asarray(decode_ctx) + self.decode_request_s * np.asarray(decode_tokens),
            "allreduce": comm,
            "overhead": self.step_s + self.request_s * np.asarray(num_seqs),
        }

    def step_time(self, prefill_tokens, decode_tokens, decode_ctx, prefill_attn, prefill_ctx, num_seqs):
        if self.fixed_step_s is not None:
            if np.ndim(decode_ctx) == 0:
                return self.fixed_step_s
            return np.full(np.shape(decode_ctx), self.fixed_step_s)
        plain = (int, float)  # the simulator's hot path passes plain numbers: no numpy call per step
        if type(decode_ctx) in plain and type(num_seqs) in plain or np.ndim(decode_ctx) == 0 == np.ndim(num_seqs):
            return self._scalar(prefill_tokens, decode_tokens, decode_ctx, prefill_attn, prefill_ctx, num_seqs)
        total = sum(
            self.breakdown(prefill_tokens, decode_tokens, decode_ctx, prefill_attn, prefill_ctx, num_seqs).values()
        )
        return float(total) if np.ndim(total) == 0 else total

    def _scalar(self, pt, dt, dctx, pattn, pctx, seqs) -> float:
        """step_time for plain numbers, without numpy's per-call overhead (the simulator's hot path)."""
        n = int(pt + dt)
        tok, row = self._tok, self._row
        t = tok[n] if n < len(tok) else float(sum(self._tokens(n)))
        t += row[seqs] if seqs < len(row) else float(_ext(self.head, seqs)) + self.request_s * seqs
        if pt:
            a, b = self.pf_flops_s * pattn, self.pf_ctx_s * pctx
            t += (a if a > b else b) + self.pf_up_s * pctx
        return t + self.ctx_s * dctx + self.decode_request_s * dt + self.step_s

    def batch_time(self, batch) -> float:
        return self.step_time(
            batch.prefill_tokens,
            batch.decode_tokens + batch.padding,
            batch.decode_ctx,
            batch.prefill_attn,
            batch.prefill_ctx,
            batch.num_seqs,
        )

    def verify_time(self, n: int, r: int, s: int) -> float:
        """What s draft tokens add to a step of n tokens and r requests: their GEMM rows and LM-head rows
        (the target's logits at every draft position); their attention reads the context the request's
        own token reads (a decode step is memory-bound on it), so it adds nothing here. Never negative: the
        measured operator curves dip at a few tokens, and more rows are never cheaper."""
        if not s or self.fixed_step_s is not None:
            return 0.0
        lin = float(sum(self._tokens(n + s))) - float(sum(self._tokens(n)))
        return max(0.0, lin + float(_ext(self.head, r + s)) - float(_ext(self.head, r)))

    def pass_time(self, pt, dt, dctx, pattn, pctx, seqs) -> float:
        """One forward pass of this model without the step's host time (a drafter's pass runs inside the
        target's step, whose host work is counted once)."""
        return self.step_time(pt, dt, dctx, pattn, pctx, seqs) - self.step_s - self.request_s * seqs

    def features(self, batch) -> np.ndarray:
        """d(step time)/d(StepConstants) for this step, in the dataclass's field order (calibration:
        a tier model's step time is affine in the constants, the prefill attention's max aside)."""
        u = self.units
        pt, dt, seqs = batch.prefill_tokens, batch.decode_tokens + batch.padding, batch.num_seqs
        if u.get("profile"):
            return _profile_features(self, batch, pt, dt)
        kv_pf = pf = 0.0
        if pt:
            if self.pf_flops_s * batch.prefill_attn >= self.pf_ctx_s * batch.prefill_ctx:
                pf = u["pf"] * batch.prefill_attn
            else:
                kv_pf = u["kv_pf"] * batch.prefill_ctx
        n = pt + dt
        i = min(n, len(u["fp8_mem"]) - 1)
        mem, hbm = u["fp8_mem"][i], u["hbm"]
        tp = u["tp"] if n else 0.0
        nvl = u["nvlink"]
        kv = u["kv"] * batch.decode_ctx + kv_pf + u["window"] * dt
        pcie = float(_ext(u["pcie_bw"], n))
        return np.array(
            [
                1.0,
                seqs,
                kv,
                u["per_request"] * dt,
                mem * (1 - hbm),
                mem * hbm,
                u["fp8_compute"][i],
                tp * nvl,
                tp * (1 - nvl),
                pcie,
                pf,
            ]
        )


def _profile_features(cm: CostModel, batch, pt: int, dt: int) -> np.ndarray:
    """d(step time)/d(profile terms), in profile.TERMS order without frontend_s (calibrate). A step's draft
    tokens are rows of its linear layers (verify_time), so they count in its tokens."""
    n = pt + dt + batch.spec_tokens
    floor, token = (1.0, 0.0) if n and cm.units["floor_s"] >= cm.units["token_s"] * n else (0.0, float(n))
    kv_pf = pf = 0.0
    if pt:
        if cm.pf_flops_s * batch.prefill_attn >= cm.pf_ctx_s * batch.prefill_ctx:
            pf = batch.prefill_attn
        else:
            kv_pf = batch.prefill_ctx
    return np.array([1.0, floor if n else 0.0, token, dt, batch.decode_ctx + kv_pf, pf])


def profile_model(cfg: EngineConfig, prof: Profile) -> CostModel:
    """A calibration profile's terms as a cost model (no tier, no model shape: the fitted terms)."""
    t = prof.terms
    n = np.arange(cfg.max_num_batched_tokens + cfg.max_num_seqs + 2, dtype=float)
    linear = np.maximum(t["floor_s"], t["token_s"] * n)
    linear[0] = 0.0
    return CostModel(
        linear=linear,
        comm=np.zeros_like(n),
        head=np.zeros(cfg.max_num_seqs + 2),
        step_s=t["step_s"],
        request_s=0.0,
        ctx_s=t["context_token_s"],
        decode_request_s=t["decode_request_s"],
        pf_flops_s=t["prefill_attention_s"],
        pf_ctx_s=t["context_token_s"],
        frontend_s=t["frontend_s"],
        frontend_flight_s=t["frontend_flight_s"],
        frontend_token_s=t["frontend_token_s"],
        step_jitter=prof.step_jitter,
        basis=f"calibration profile {prof.path}",
        units={"profile": True, "floor_s": t["floor_s"], "token_s": t["token_s"]},
        profile={
            "path": prof.path,
            "step_time_pct": prof.step_time_pct,
            "ttft_pct": prof.ttft_pct,  # None in older profiles (their step_time_pct pooled TTFT in)
            "error_basis": prof.basis,
            # the 10th and 90th percentiles of its steps' scatter (engine/jitter.py), where it keeps one
            "scatter": list(jitter.deciles(prof.step_jitter)) if prof.step_jitter else None,
        },
    )


def _experts(n, cfg: EngineConfig, m, gpu, tp: int):
    """A MoE model's routed experts over n (engine/moe.py: only those a step's tokens touch are read), their
    basis and how they were priced; (None, "", None) for a dense model."""
    if m.moe is None:
        return None, "", None
    moe, basis, how = moe_table(n, m, gpu, cfg.dtype, tp, cfg.enable_expert_parallel, cfg.expert_skew)
    moe[0] = 0.0
    return moe, basis, how


def _step_work(n, cfg: EngineConfig, m, tp: int, wbytes: float) -> tuple[np.ndarray, np.ndarray]:
    """Per GPU, over n tokens: the bytes of weights a step reads (dense layers, LM head, the experts its tokens
    touch) and its FLOPs (2 n x active parameters): what engine/power.py prices a step's energy from."""
    dense = m.dense_params * wbytes / tp + m.vocab * m.hidden * 2 / tp
    reads = np.full_like(n, dense)
    active = m.dense_params + m.vocab * m.hidden
    if m.moe is not None:
        reads = reads + expert_bytes(n, m, cfg.dtype, cfg.expert_skew) / tp
        active += m.moe_layers * m.moe.top_k * m.moe.expert_params * m.hidden
    reads[0] = 0.0
    return reads, 2 * n * active / tp


def _tp_comm(n, layers: int, hidden: int, gpu, tp: int, k: StepConstants) -> tuple[np.ndarray, np.ndarray]:
    """TP's two all-reduces per layer and its per-layer term over n tokens, and d/d(tp_pcie_bw) (PCIe tiers)."""
    comm, pcie_bw = np.zeros_like(n), np.zeros_like(n)
    if tp > 1:
        extra = k.tp_layer_s if fast_fabric(gpu) else k.tp_layer_pcie_s
        comm = layers * (2 * allreduce_time(n * hidden * 2, gpu, tp, k.tp_pcie_bw) + extra)
        if not fast_fabric(gpu):
            pcie_bw = layers * 2 * pcie_ring_bytes_s(n * hidden * 2, gpu, tp)
    return comm, pcie_bw


def att_kv_bytes(cfg: EngineConfig) -> float:
    """Bytes per KV value."""
    return 1.0 if cfg.kv_cache_dtype == "fp8" else 2.0


def tier_model(cfg: EngineConfig, k: StepConstants, shape=None) -> CostModel:
    """The tier's measured operator curves for the model shape (or `shape` on the same tier and TP: a
    speculative drafter), with the fitted constants k."""
    gpu, m = get_gpu(cfg.gpu), shape or cfg.shape()
    tp, fp8 = cfg.tensor_parallel_size, cfg.dtype == "fp8"
    peak, bw, wbytes, fam, ridge_bw = gemm_pricing(gpu, fp8)
    bf16_peak = gpu.bf16_tflops * 1e12  # the LM head and attention stay BF16
    n = np.arange(cfg.max_num_batched_tokens + cfg.max_num_seqs + 2, dtype=float)
    side = (n, m.params_per_layer / tp, peak, bw, wbytes, fam)
    scale = fp8_scale(gpu, k) if fp8 else (1.0, 1.0)
    gemm = gemm_time(*side, scale=scale, ridge_bw=ridge_bw)
    fp8_mem, fp8_compute = (m.layers * d for d in gemm_sides(*side, scale, ridge_bw)) if fp8 else (0 * n, 0 * n)
    linear = m.layers * (gemm + elementwise_time(n, m.hidden, m.active_ffn / tp, bw, fam))
    moe, experts, how = _experts(n, cfg, m, gpu, tp)
    linear = linear if moe is None else linear + moe
    comm, pcie_bw = _tp_comm(n, m.layers, m.hidden, gpu, tp, k)
    for table in (linear, comm, fp8_mem, fp8_compute, pcie_bw):
        table[0] = 0.0
    rows = np.arange(cfg.max_num_seqs + 2, dtype=float)
    head = gemm_time(np.maximum(rows, 1), m.vocab * m.hidden / tp, bf16_peak, bw, 2.0, fam, count=1, ridge_bw=ridge_bw)
    head[0] = 0.0
    kv_tok = cfg.kv_bytes_per_token() if shape is None else m.kv_bytes_per_token(att_kv_bytes(cfg), tp)
    per_request = m.layers * request_scale(gpu)  # decode's per-request time per unit of attn_request_s
    dtype = f"{cfg.dtype}{' (fp8 KV)' if cfg.kv_cache_dtype == 'fp8' else ''}"
    att = attention_terms(m, tp, bf16_peak, bw, att_kv_bytes(cfg))
    reads, flops = _step_work(n, cfg, m, tp, wbytes)
    return CostModel(
        linear=linear,
        comm=comm,
        head=head,
        step_s=k.step_s,
        request_s=k.request_s,
        ctx_s=k.kv_read * att["ctx"],
        decode_request_s=k.attn_request_s * per_request + k.kv_read * att["window"],
        pf_flops_s=k.prefill_attn * att["pf"],
        pf_ctx_s=k.kv_read * kv_tok / bw,
        pf_up_s=att["up"],
        experts=moe,
        moe=how,
        power=power_model(gpu),
        step_bytes=reads,
        step_flops=flops,
        kv_bytes_tok=kv_tok,
        frontend_s=k.frontend_s,
        basis=f"{gpu.name} {m.name} tp{tp} {dtype}: Vidur operator curves, public-data constants"
        + (f"; {experts}" if experts else ""),
        units=att
        | {
            "kv": att["ctx"],
            "kv_pf": kv_tok / bw,
            "per_request": per_request,
            "tp": m.layers if tp > 1 else 0.0,
            "nvlink": 1.0 if fast_fabric(gpu) else 0.0,
            "fp8_mem": fp8_mem,  # d/d(the weight-read term this tier pays: fp8_scale)
            "hbm": 1.0 if gpu.hbm else 0.0,
            "fp8_compute": fp8_compute,
            "pcie_bw": pcie_bw,
        },
    )
