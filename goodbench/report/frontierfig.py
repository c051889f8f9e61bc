"""pareto.png: output tokens/s per GPU against tokens/s per user, one curve per configuration over its loads, the
frontier of all tokens and of good tokens (requests meeting the SLO), the SLO's interactivity floor, and a caption
that says which configuration wins where (analysis/frontier.py)."""

from __future__ import annotations

import os
import textwrap

from .figures import _plt, _save
from .tables import short


def pareto_plot(rows: list[dict], floor: float | None, caption: str, out_dir: str, title: str) -> str | None:
    pts = [r for r in rows if r.get("tok_s_per_user") is not None and r.get("output_tok_s_per_gpu") is not None]
    if not pts:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.5, 5.6))
    for cfg in dict.fromkeys(r["config"] for r in pts):
        cur = sorted((r for r in pts if r["config"] == cfg), key=lambda r: r["concurrency_or_rate"])
        ax.plot([r["tok_s_per_user"] for r in cur], [r["output_tok_s_per_gpu"] for r in cur], marker="o", ms=4,
                lw=1.2, alpha=0.8, label=short(cfg))  # fmt: skip
        for r in cur:
            ax.annotate(r["load"], (r["tok_s_per_user"], r["output_tok_s_per_gpu"]), fontsize=6, xytext=(3, 2),
                        textcoords="offset points", alpha=0.7)  # fmt: skip
    for key, flag, style, label in (
        ("output_tok_s_per_gpu", "on_frontier", "-", "frontier (all tokens)"),
        ("good_output_tok_s_per_gpu", "on_good_frontier", "--", "frontier of good tokens (SLO met)"),
    ):
        front = sorted((r for r in pts if r.get(flag) and r.get(key) is not None), key=lambda r: r["tok_s_per_user"])
        if front:
            ax.plot([r["tok_s_per_user"] for r in front], [r[key] for r in front], style, color="black", lw=2.2,
                    label=label, zorder=1)  # fmt: skip
    if floor:
        ax.axvline(floor, color="tab:red", ls=":", lw=1.5, label=f"SLO floor: {floor:.0f} tok/s per user (1/TPOT)")
    ax.set_xlabel("interactivity: tokens/s per user (median 1/TPOT)")
    ax.set_ylabel("throughput: output tokens/s per GPU")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    fig.text(0.01, 0.01, "\n".join(textwrap.wrap(caption, 118)), fontsize=7, va="bottom")
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return _save(fig, plt, os.path.join(out_dir, "pareto.png"))


def runs_frontier(views, out_dir: str) -> str | None:
    """`goodbench report` of several runs: each run a point, a configuration's runs (the same engine, or the same
    server and model) a curve over their loads; pareto.png (None with fewer than two runs that know their GPUs)."""
    from ..metrics.frontier import mark
    from .frontier import frontier_caption

    rows = []
    for v in views:
        s, eng, tgt = v.summary, v.meta.get("engine") or {}, v.meta.get("target") or {}
        if s.get("tok_s_per_user") is None or s.get("output_tok_s_per_gpu") is None:
            continue
        config = (
            f"{eng.get('gpu')} tp{eng.get('tensor_parallel_size')} budget={eng.get('max_num_batched_tokens')}"
            if eng
            else f"{tgt.get('base_url', '')} {tgt.get('model', '')}"
        )
        rows.append({"config": config, "load": s.get("label") or v.label, "concurrency_or_rate": s.get("achieved_rate") or 0,
                     "tok_s_per_user": s["tok_s_per_user"], "output_tok_s_per_gpu": s["output_tok_s_per_gpu"],
                     "good_output_tok_s_per_gpu": s.get("good_output_tok_s_per_gpu")})  # fmt: skip
    if len(rows) < 2:
        return None
    mark(rows)
    slo = next((v.summary.get("slo") for v in views if v.summary.get("slo")), None)
    floor = 1000.0 / slo["tpot"] if slo and slo.get("tpot") else None
    return pareto_plot(
        rows, floor, frontier_caption(rows, floor), out_dir, "these runs: throughput per GPU vs interactivity"
    )
