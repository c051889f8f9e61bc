"""The frontier's words: its table (console) and the caption that says which configuration wins where (the
figure, the report, frontier.json)."""

from __future__ import annotations

from rich.table import Table

from .tables import short


def frontier_caption(rows: list[dict], floor: float | None) -> str:
    """Which configuration wins where on the good-token frontier (along tokens per user), and the best one
    at the SLO's interactivity floor."""
    front = sorted((r for r in rows if r.get("on_good_frontier")), key=lambda r: r["tok_s_per_user"])
    if not front:
        return "no configuration delivered good tokens: no frontier of good tokens"
    spans, start = [], None
    for i, r in enumerate(front):
        nxt = front[i + 1]["config"] if i + 1 < len(front) else None
        start = start if start is not None else r["tok_s_per_user"]
        if nxt != r["config"]:
            end = r["tok_s_per_user"]
            where = f"at {end:.0f}" if round(start) == round(end) else f"from {start:.0f} to {end:.0f}"
            spans.append(f"{short(r['config'])} {where} tok/s per user")
            start = None
    text = "most good tokens per GPU: " + "; ".join(spans)
    if floor:
        ok = [r for r in rows if r["tok_s_per_user"] is not None and r["tok_s_per_user"] >= floor]
        if ok:
            best = max(ok, key=lambda r: r["good_output_tok_s_per_gpu"] or 0)
            text += (
                f". At the SLO's floor (>= {floor:.0f} tok/s per user): {short(best['config'])} at {best['load']}, "
                f"{best['good_output_tok_s_per_gpu'] or 0:.0f} good tok/s per GPU"
            )
        else:
            text += f". No point reaches the SLO's floor of {floor:.0f} tok/s per user"
    return text


def frontier_table(rows: list[dict]) -> Table:
    """A sweep over loads: each (configuration, load) point, * on the frontier, ** on the good-token frontier."""
    t = Table(
        title="frontier: throughput per GPU vs tokens per user (* on the frontier, + on the good tokens' frontier)"
    )
    for c in (
        "config",
        "load",
        "tok/s per user",
        "out tok/s/GPU",
        "good tok/s/GPU",
        "attain",
        "TTFT p50",
        "TPOT p50",
        "",
    ):
        t.add_column(c, justify="left" if c in ("config", "load", "") else "right")

    def num(v, fmt="{:.1f}"):
        return "-" if v is None else fmt.format(v)

    for r in rows:
        mark = ("*" if r.get("on_frontier") else "") + ("+" if r.get("on_good_frontier") else "")
        t.add_row(
            r["config"], r["load"], num(r["tok_s_per_user"]), num(r["output_tok_s_per_gpu"], "{:.0f}"),
            num(r["good_output_tok_s_per_gpu"], "{:.0f}"), num(r["slo_attainment"], "{:.1%}"), num(r["ttft_p50_ms"]),
            num(r["tpot_p50_ms"], "{:.2f}"), mark,
        )  # fmt: skip
    return t
