"""GPU prices ($ per GPU-hour, on-demand) with a date and a source per tier, and the cost block every
simulated summary carries. Tiers without a sourced price have none: give one with --gpu-price or a
price file rather than trusting an invented number."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UsageError


@dataclass(frozen=True)
class Price:
    gpu: str
    usd_per_hour: float
    date: str
    source: str


PRICES: dict[str, Price] = {
    p.gpu: p
    for p in (
        Price(
            "h100-sxm",
            2.25,
            "2025-12-31",
            "https://aihardwareindex.com/blog/h100-vs-a100-vs-l40s-the-cost-per-token-analysis "
            "(cloud pricing, December 2025)",
        ),
        Price(
            "a100-80g-pcie",
            1.35,
            "2025-12-31",
            "https://aihardwareindex.com/blog/h100-vs-a100-vs-l40s-the-cost-per-token-analysis",
        ),
        Price(
            "l40s",
            0.87,
            "2025-12-31",
            "https://aihardwareindex.com/blog/h100-vs-a100-vs-l40s-the-cost-per-token-analysis",
        ),
        Price(
            "a100-80g-sxm",
            1.99,
            "2026 (early)",
            "https://pricegpu.pages.dev/blog/h100-vs-a100-cloud-price "
            "(typical on-demand range $1.49-2.49: the midpoint)",
        ),
        Price(
            "h200",
            4.00,
            "2026-05",
            "https://www.mercatus-ai.com/blog/cloud-gpu-pricing (specialty providers $3.50-4.50: the midpoint)",
        ),
    )
}


def parse_overrides(text: str | None) -> dict[str, float]:
    """`h100-sxm=2.5,l4=0.8` -> {gpu: usd per GPU-hour}."""
    out: dict[str, float] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        gpu, sep, val = item.partition("=")
        try:
            out[gpu.strip().lower()] = float(val)
            if not sep or out[gpu.strip().lower()] < 0:
                raise ValueError
        except ValueError:
            raise UsageError(f"--gpu-price {item!r}: expected GPU=USD_PER_HOUR, e.g. h100-sxm=2.5") from None
    return out


def price_table(overrides: dict[str, float] | None = None) -> dict[str, float]:
    """$ per GPU-hour per tier: the sourced defaults, then the overrides."""
    return {g: p.usd_per_hour for g, p in PRICES.items()} | dict(overrides or {})


def cost_block(
    gpus: dict[str, int],
    prices: dict[str, float],
    delivered_output_tokens: int,
    goodput: float | None,
    duration_s: float,
) -> dict:
    """`cost` in summary.json. gpus: {tier: count}. Only requests that met the SLO count as delivered:
    usd_per_million_output_tokens = (usd_per_hour x duration_s / 3600) / (output tokens of the requests
    that met the SLO / 1e6); None when a tier has no price or nothing met the SLO."""
    n = sum(gpus.values())
    missing = [g for g in gpus if g not in prices]
    usd_h = None if missing else sum(prices[g] * k for g, k in gpus.items())
    per_m = None
    if usd_h is not None and delivered_output_tokens > 0 and duration_s > 0:
        per_m = usd_h * duration_s / 3600 / (delivered_output_tokens / 1e6)
    return {
        "gpus": n,
        "gpu_tiers": dict(gpus),
        "usd_per_hour": usd_h,
        "usd_per_million_output_tokens": per_m,
        "goodput_per_gpu": goodput / n if goodput is not None and n else None,
        "goodput_per_usd_hour": goodput / usd_h if goodput is not None and usd_h else None,
        "delivered_output_tokens": delivered_output_tokens,
        "unpriced": missing,
    }
