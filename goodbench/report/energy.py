"""The energy block in words: one wording for the console's line and the HTML report's."""

from __future__ import annotations


def energy_words(e: dict) -> tuple[str, str]:
    """The energy block in words (the console's line and the HTML report's): what was used, and its basis."""
    if e.get("joules") is None:
        return f"energy: {e.get('note')}", ""
    sure = f" ±{e['uncertainty_pct']:.0f}%" if e.get("uncertainty_pct") is not None else ""
    per, kwh = e.get("joules_per_good_token"), e.get("good_tokens_per_kwh")
    what = "good token" if e.get("judged", True) else "token (no SLO: every completed request's)"
    tokens = f"{per:.3f} J per {what}, {kwh:,.0f} per kWh" if per is not None and kwh is not None else "no good tokens"
    text = (
        f"energy{sure}: {e['joules']:,.0f} J on {e['gpus']} GPU{'s' if e['gpus'] != 1 else ''} over "
        f"{e['window_s']:.1f} s, {e['avg_power_w_per_gpu']:.0f} W per GPU · {tokens}"
    )
    if e.get("energy_usd_per_million_good_tokens") is not None:
        el = e["electricity"]
        text += (
            f" · ${e['energy_usd_per_million_good_tokens']:.3f} of electricity per million good tokens "
            f"(${el['usd_per_kwh']:g}/kWh x facility {el['facility_factor']:g})"
        )
    return text, e["source"] + (f"; {e['note']}" if e.get("note") else "")
