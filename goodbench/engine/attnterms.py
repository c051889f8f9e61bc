"""Attention's per-unit costs for a model shape on one GPU: what the cost model multiplies by the decode
context, the decoding requests and the prefill work. Pure.

- GQA: decode reads each context token's K and V (its heads' share on this rank) at the bandwidth.
- MLA (DeepSeek): decode attends in the latent (absorbed: 2 (kv_lora + rope + kv_lora) FLOPs per head per context
  token), which turns compute-bound with many heads per rank, so a context token costs the slower of its bytes and
  its FLOPs; prefill up-projects every context token's latent to per-head K and V on every chunk (2 kv_lora
  heads (nope + v) FLOPs per token per layer): a chunked prefill re-reads its whole context, so chunk size matters
  more than for GQA.
- Sliding-window layers (gpt-oss): a decode reads at most the window per request, whatever its context."""

from __future__ import annotations

from .models import Model


def attention_terms(m: Model, tp: int, peak: float, bw: float, kv_bytes: float) -> dict:
    """Seconds per unit: ctx (per decode-context token, all full layers), window (per decoding request:
    its sliding layers' windows), pf (per unit of prefill attention work, sum n (p + (n + 1) / 2)), up (per
    prefill context token: MLA's up-projection; 0 for GQA). ctx and window are before the fitted kv_read."""
    heads = m.heads // tp
    per_token = m.kv_values(tp) * kv_bytes / bw  # one context token's KV in one layer
    ctx, up = per_token, 0.0
    a = m.mla
    if a is not None:
        ctx = max(per_token, 2 * heads * (2 * a.kv_lora_rank + a.rope_dim) / peak)
        up = 2 * a.kv_lora_rank * heads * (a.nope_dim + a.v_dim) * m.layers / peak
    return {
        "ctx": ctx * m.kv_layers,
        "window": per_token * m.sliding_layers * m.sliding_window,
        "pf": 4 * heads * m.attn_head_dim * m.kv_layers / peak,
        "up": up,
    }
