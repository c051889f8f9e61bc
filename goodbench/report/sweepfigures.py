"""A sweep's figures: metrics against chunk size per tier, the goodput heatmap, the TTFT-ITL frontier,
goodput and max rate per GPU by instance layout (matplotlib, imported only when a figure is drawn)."""

from __future__ import annotations

import os

from .figures import _plt, _save, declutter

METRICS = (
    ("goodput", "goodput (req/s)"),
    ("ttft_p99_ms", "TTFT p99 (ms)"),
    ("itl_p99_ms", "ITL p99 (ms)"),
    ("itl_p99_over_p50", "ITL p99/p50"),
    ("tpot_p99_ms", "TPOT p99 (ms)"),
)


def sweep_plots(rows: list[dict], out_dir: str) -> list[str]:
    """Sweep pictures: each metric against chunk size with one line per tier (the unchunked baseline
    as a dashed level), a tier x chunk heatmap of goodput, and the TTFT-vs-ITL-p99 trade-off per tier."""
    plt = _plt()
    ok = [r for r in rows if not r.get("error") and r.get("goodput") is not None]
    if not ok:
        return []
    chunked = [r for r in ok if r.get("enable_chunked_prefill", True)]
    gpus = list(dict.fromkeys(r["gpu"] for r in ok))
    paths = [_metrics_vs_chunk(plt, ok, chunked, gpus, out_dir)]
    heat = _goodput_heatmap(plt, chunked, gpus, out_dir)
    if heat:
        paths.append(heat)
    paths.append(_frontier(plt, ok, gpus, out_dir))
    if len({r.get("layout") for r in ok}) > 1:
        paths.append(_per_gpu_by_layout(plt, ok, out_dir))
    return paths


def _per_gpu_by_layout(
    plt,
    ok: list[dict],
    out_dir: str,
    key: str = "goodput_per_gpu",
    ylabel: str = "goodput per GPU (req/s)",
    name: str = "sweep_disaggregation.png",
) -> str:
    """DistServe's headline: goodput per GPU of each layout (colocated replicas, P:D splits) at equal
    GPU count, one bar group per tier and configuration."""
    import numpy as np

    layouts = list(dict.fromkeys(r["layout"] for r in ok))
    groups = list(dict.fromkeys(_group(r) for r in ok))
    fig, ax = plt.subplots(figsize=(max(5.5, 1.2 * len(groups) * len(layouts) / 2 + 2), 4.0))
    width = 0.8 / len(layouts)
    for j, lay in enumerate(layouts):
        vals = [next((r[key] or 0 for r in ok if r["layout"] == lay and _group(r) == g), 0) for g in groups]
        ax.bar(np.arange(len(groups)) + j * width, vals, width, label=lay)
    ax.set_xticks(
        np.arange(len(groups)) + 0.4 - width / 2,
        [g.replace("max_num_batched_tokens=", "budget=") for g in groups],
        fontsize=7,
        rotation=15,
    )
    ax.set_ylabel(ylabel)
    ax.set_title("colocated vs prefill/decode at equal GPU count")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, plt, os.path.join(out_dir, name))


def _group(r: dict) -> str:
    """A cell's label without its layout (the bars of one group differ only in layout)."""
    cell = r["cell"]
    return cell.rsplit(",", 1)[0] if r.get("layout") and cell.endswith("," + r["layout"]) else cell


def max_rate_plot(results: list[dict], out_dir: str) -> str | None:
    """max_rate_per_gpu.png: the max goodput rate at the SLO per GPU, by layout (DistServe's figure);
    None unless the cells differ in layout."""
    ok = [r for r in results if not r.get("error") and r.get("layout")]
    if len({r["layout"] for r in ok}) < 2:
        return None
    return _per_gpu_by_layout(
        _plt(), ok, out_dir, "max_rate_per_gpu", "max goodput rate per GPU (req/s)", "max_rate_per_gpu.png"
    )


def _metrics_vs_chunk(plt, ok: list[dict], chunked: list[dict], gpus: list[str], out_dir: str) -> str:
    from matplotlib.lines import Line2D

    fig, axes = plt.subplots(1, len(METRICS), figsize=(4.2 * len(METRICS), 3.6))
    any_base = False
    for ax, (key, title) in zip(axes, METRICS):
        for gpu in gpus:
            pts = sorted(
                (r["max_num_batched_tokens"], r[key]) for r in chunked if r["gpu"] == gpu and r.get(key) is not None
            )
            if pts:
                (line,) = ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=gpu)
                base = [r[key] for r in ok if r["gpu"] == gpu and r.get("enable_chunked_prefill") is False]
                if base and base[0] is not None:
                    ax.axhline(base[0], color=line.get_color(), linestyle="--", linewidth=1)
                    any_base = True
        ax.set_xscale("log", base=2)
        ticks = sorted({r["max_num_batched_tokens"] for r in chunked})
        ax.set_xticks(ticks, [str(t) for t in ticks], fontsize=7)
        ax.minorticks_off()
        ax.set_xlabel("max_num_batched_tokens")
        ax.set_title(title)
        ax.grid(alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    if any_base:  # a legend entry that shows what the dashed levels are
        handles.append(Line2D([], [], color="gray", linestyle="--", linewidth=1))
        labels.append("unchunked (per tier)")
    axes[0].legend(handles, labels, fontsize=8)
    fig.tight_layout()
    return _save(fig, plt, os.path.join(out_dir, "sweep_metrics.png"))


def _goodput_heatmap(plt, chunked: list[dict], gpus: list[str], out_dir: str) -> str | None:
    import numpy as np

    sizes = sorted({r["max_num_batched_tokens"] for r in chunked})
    if not gpus or not sizes:
        return None
    grid = np.full((len(gpus), len(sizes)), np.nan)
    for r in chunked:
        grid[gpus.index(r["gpu"]), sizes.index(r["max_num_batched_tokens"])] = r["goodput"]
    fig, ax = plt.subplots(figsize=(1.1 * len(sizes) + 2.5, 0.6 * len(gpus) + 1.8))
    im = ax.imshow(grid, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(sizes)), [str(s) for s in sizes])
    ax.set_yticks(range(len(gpus)), gpus)
    lo, hi = np.nanmin(grid), np.nanmax(grid)
    for (i, j), v in np.ndenumerate(grid):
        if not np.isnan(v):
            dark = hi > lo and (v - lo) / (hi - lo) < 0.5  # viridis is dark at the low end
            ax.text(j, i, f"{v:.2f}", ha="center", va="center", color="white" if dark else "black", fontsize=8)
    ax.set_xlabel("max_num_batched_tokens")
    ax.set_title("goodput (req/s)")
    fig.colorbar(im, ax=ax)
    fig.tight_layout()
    return _save(fig, plt, os.path.join(out_dir, "sweep_goodput_heatmap.png"))


def _frontier(plt, ok: list[dict], gpus: list[str], out_dir: str) -> str:
    fig, ax = plt.subplots(figsize=(5.5, 4.2))
    labels = []
    for gpu in gpus:
        pts = sorted(
            (r["itl_p99_ms"], r["ttft_p99_ms"], r["max_num_batched_tokens"])
            for r in ok
            if r["gpu"] == gpu and r.get("itl_p99_ms") is not None and r.get("ttft_p99_ms") is not None
        )
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=gpu)
            labels += [
                ax.annotate(str(n), (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points") for x, y, n in pts
            ]
    ax.set_xlabel("ITL p99 (ms)")
    ax.set_ylabel("TTFT p99 (ms)")
    ax.set_title("TTFT vs ITL trade-off (labels: chunk size)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    declutter(fig, labels)
    return _save(fig, plt, os.path.join(out_dir, "sweep_frontier.png"))
