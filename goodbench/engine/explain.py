"""`goodbench engine explain`: one step's time broken down by op group (linear layers, routed experts, attention,
all-reduces, host), how close the linear layers come to their roofline, the experts a MoE step touches, and how
sure the engine is in that regime. Pure."""

from __future__ import annotations

from .config import EngineConfig
from .costmodel import CostModel
from .hardware import get_gpu
from .moe import routing, spread
from .opmodel import gemm_pricing
from .uncertainty import engine_uncertainty


def _roofline(cfg: EngineConfig, n: int) -> float | None:
    """The linear layers' roofline for n tokens on the tier (None: a calibration profile has no tier)."""
    if cfg.calibration or n < 1:
        return None
    m = cfg.shape()
    peak, bw, wbytes, _, _ = gemm_pricing(get_gpu(cfg.gpu), cfg.dtype == "fp8")
    params = m.layers * m.params_per_layer / cfg.tensor_parallel_size
    return max(2 * n * params / peak, wbytes * params / bw)


def _touched(cfg: EngineConfig, n: int) -> dict | None:
    """A MoE step's expected distinct experts per layer, of how many (None: a dense model or a profile)."""
    m = None if cfg.calibration else cfg.shape().moe
    if m is None:
        return None
    q = routing(m.experts, m.top_k, cfg.expert_skew)
    return {"touched": float(spread([n], q)[0].sum()), "experts": m.experts, "top_k": m.top_k}


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
    roof = _roofline(cfg, pt + dt)
    total = sum(b.values())
    stats = {"busy_s": total, "mean_batch": seqs, "prefill_share": 1.0 if pt else 0.0, "profile": cm.profile}
    stats |= {"moe": cm.moe} if cm.moe else {}
    tier = {"gpu": cfg.gpu, "tensor_parallel_size": cfg.tensor_parallel_size}
    return {
        "breakdown_s": b,
        "total_s": total,
        "tokens": pt + dt,
        "prefill_tokens": pt,
        "decode_tokens": dt,
        "num_seqs": seqs,
        "linear_vs_roofline": roof / b["linear"] if roof and b["linear"] else None,
        "one_token_linear_s": float(cm.linear[1]),
        "experts_touched": _touched(cfg, pt + dt),
        "frontend_s": cm.frontend_s,
        "frontend_flight_s": cm.frontend_flight_s,
        "frontend_token_s": cm.frontend_token_s,
        "step_jitter": cm.step_jitter,
        "basis": cm.basis,
        "uncertainty": engine_uncertainty(tier, stats),  # how sure: the regime's out-of-sample error
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
