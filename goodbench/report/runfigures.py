"""PNG figures for one run or several overlaid (matplotlib, Agg; imported only when a report is asked for).

Each function takes RunViews and an output directory and returns the PNG path, or None when the runs
hold nothing to draw. Big runs are thinned for drawing only (quantile grids for CDFs; a random sample
that always keeps the largest gaps for scatters); every number printed comes from the full data."""

from __future__ import annotations

import os

import numpy as np

from ..metrics.energy import gpu_series
from ..metrics.jobs import critical_path, job_rows
from .figures import _plt, _save, gauge_words, is_fraction, log_ms_axis, series_labels, split_series
from .view import RunView

MAX_POINTS = 60_000
SLO_COLOR = "#cf222e"


def _thin(n: int, keep_top: np.ndarray | None = None, seed: int = 0) -> np.ndarray:
    """Sorted indices of at most ~MAX_POINTS of n points; with keep_top (values), points above the
    values' 99th percentile (estimated from a sample) are kept preferentially: stalls must stay visible.
    Never allocates anything the size of n beyond one boolean pass."""
    if n <= MAX_POINTS:
        return np.arange(n)
    rng = np.random.default_rng(seed)
    pick = rng.choice(n, MAX_POINTS, replace=False) if n < 50 * MAX_POINTS else rng.integers(0, n, MAX_POINTS)
    if keep_top is not None:
        probe = keep_top[rng.integers(0, n, min(n, 1_000_000))]
        top = np.flatnonzero(keep_top > np.quantile(probe, 0.99))
        if top.size > MAX_POINTS // 4:
            top = rng.choice(top, MAX_POINTS // 4, replace=False)
        pick = np.concatenate([pick, top])
    return np.unique(pick)


def _gap_sample(c, req_mask: np.ndarray, k: int = 2_000_000, seed: int = 0) -> np.ndarray:
    """The pooled per-token gaps (ITL, as the summary defines it) of the requests in req_mask, or a
    uniform random sample of k of them on big runs (for drawing a CDF only)."""
    gm = np.repeat(req_mask, c.itl_count)
    if c.itl.size <= k:
        return c.itl[gm]
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, c.itl.size, int(k * 1.2))
    return c.itl[idx[gm[idx]]][:k]


def _cdf_xy(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    v = v[np.isfinite(v) & (v > 0)]
    if v.size > 4000:
        q = np.linspace(0, 1, 4000)
        return np.quantile(v, q), q
    v = np.sort(v)
    return v, np.arange(1, v.size + 1) / v.size


def cdfs(views: list[RunView], out_dir: str) -> str | None:
    """TTFT, TPOT and ITL CDFs on a log time axis, SLO thresholds as red lines."""
    plt = _plt()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    drew = False
    for ax, (name, key) in zip(axes, (("TTFT", "ttft"), ("TPOT", "tpot"), ("ITL", "itl"))):
        for v in views:
            c = v.c
            vals = (_gap_sample(c, c.ok) if key == "itl" else {"ttft": c.ttft, "tpot": c.tpot}[key][c.ok]) * 1000.0
            x, y = _cdf_xy(vals)
            if x.size:
                ax.plot(x, y, label=v.label, linewidth=1.4)
                drew = True
        slo = views[0].summary.get("slo") or {}
        line = slo.get(key) if key != "itl" else slo.get("max_itl")
        if line:
            ax.axvline(line, color=SLO_COLOR, linestyle="--", linewidth=1)
            ax.annotate(
                f"SLO {line:g} ms", (line, 0.03), color=SLO_COLOR, fontsize=8, xytext=(3, 0), textcoords="offset points"
            )
        log_ms_axis(ax, "x")
        ax.set_xlabel(f"{name} (ms, log)")
        ax.set_ylabel("fraction of " + ("gaps" if key == "itl" else "requests"))
        ax.set_ylim(0, 1.01)
        ax.grid(alpha=0.3, which="both")
    if not drew:
        plt.close(fig)
        return None
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, plt, os.path.join(out_dir, "latency_cdfs.png"))


def _class_colors(names) -> dict:
    cmap = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#17becf"]
    return {n: cmap[i % len(cmap)] for i, n in enumerate(names)}


def itl_timeline(views: list[RunView], out_dir: str, long_class: str | None = None) -> str | None:
    """Every ITL gap as a point at its time in the run, coloured by class, with long-prompt arrivals
    marked: where head-of-line stalls show as columns of tall points. One panel per run."""
    from ..metrics.hol import long_class as find_long

    views = [v for v in views if v.c.gaps.size]
    if not views:
        return None
    plt = _plt()
    fig, axes = plt.subplots(len(views), 1, figsize=(14, 3.4 * len(views)), squeeze=False)
    for ax, v in zip(axes[:, 0], views):
        cols, c = v.cols, v.c
        idx = _thin(c.gaps.size, keep_top=c.gaps)
        # the drawn gaps' owners and end times, without full-size arrays: gap j of request r ends at
        # chunk off[r] + (j - goff[r]) + 1
        goff = np.concatenate([[0], np.cumsum(c.gap_count)])
        owner = np.searchsorted(goff, idx, side="right") - 1
        ends = cols.chunk_times[cols.offsets[owner] + (idx - goff[owner]) + 1]
        owner_cls = cols.cls[owner]
        colors = _class_colors(cols.cls_names)
        for code, name in enumerate(cols.cls_names):
            m = owner_cls == code
            if m.any():
                ax.scatter(
                    ends[m],
                    c.gaps[idx[m]] * 1000.0,
                    s=3,
                    alpha=0.5,
                    color=colors[name],
                    label=f"a {name} request",
                    rasterized=True,
                )
        lc = long_class or find_long(cols)
        if lc is not None:
            arrivals = cols.sent[(cols.cls == cols.cls_names.index(lc)) & ~np.isnan(cols.sent)]
            for t in arrivals[:400]:
                ax.axvline(t, color="#444", alpha=0.35, linewidth=0.8)
            ax.plot([], [], color="#444", alpha=0.6, label=f"{lc} prompt sent ({arrivals.size})")
        log_ms_axis(ax, "y")
        ax.set_xlabel("time in run (s)")
        ax.set_ylabel("ITL (ms, log)")
        ax.set_title(v.label, fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper right", markerscale=3, title="gap in", title_fontsize=7)
    fig.tight_layout()
    return _save(fig, plt, os.path.join(out_dir, "itl_timeline.png"))


def vs_prompt(views: list[RunView], out_dir: str) -> str | None:
    """TTFT and E2E against prompt length (server's count when it sent one)."""
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(13, 4))
    drew = False
    for v in views:
        c, cols = v.c, v.cols
        m = np.flatnonzero(c.ok & ~np.isnan(c.first))
        if not m.size:
            continue
        m = m[_thin(m.size)]
        for ax, vals in zip(axes, (c.ttft, c.e2e)):
            ax.scatter(cols.prompt_tokens[m], vals[m] * 1000.0, s=4, alpha=0.5, label=v.label, rasterized=True)
        drew = True
    if not drew:
        plt.close(fig)
        return None
    for ax, name in zip(axes, ("TTFT", "E2E")):
        ax.set_xlabel("prompt tokens")
        ax.set_ylabel(f"{name} (ms, log)")
        log_ms_axis(ax, "y")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8, markerscale=3)
    fig.tight_layout()
    return _save(fig, plt, os.path.join(out_dir, "latency_vs_prompt.png"))


def _window(views: list[RunView]) -> float:
    span = max((v.summary.get("duration_s") or 0) for v in views)
    return max(1.0, span / 60.0)


def timeseries(views: list[RunView], out_dir: str) -> str | None:
    """Throughput, goodput (completions meeting the SLO) and requests in flight over the run, in a
    rolling window."""
    plt = _plt()
    w = _window(views)
    power = any(v.gpus for v in views)
    fig, axes = plt.subplots(4 if power else 3, 1, figsize=(13, 10.5 if power else 8), sharex=True)
    drew = False
    for v in views:
        c = v.c
        done_t = np.where(np.isnan(c.last), c.fin, c.last)
        okm = c.ok & ~np.isnan(done_t)
        if not okm.any():
            continue
        t_end = float(np.nanmax(done_t))
        grid = np.arange(0.0, t_end + w, w / 4)
        comp = np.sort(done_t[okm])
        thr = (np.searchsorted(comp, grid) - np.searchsorted(comp, grid - w)) / w
        (line,) = axes[0].plot(grid, thr, label=v.label)
        meets = c.meets(v.summary.get("slo"))
        if meets is not None:
            good = np.sort(done_t[meets & okm])
            gp = (np.searchsorted(good, grid) - np.searchsorted(good, grid - w)) / w
            axes[1].plot(grid, gp, color=line.get_color(), label=v.label)
        sent = np.sort(c.sent[~np.isnan(c.sent)])
        ended = np.sort(np.where(np.isnan(c.fin), done_t, c.fin)[~np.isnan(c.sent)])
        ended = ended[~np.isnan(ended)]
        axes[2].plot(
            grid, np.searchsorted(sent, grid) - np.searchsorted(ended, grid), color=line.get_color(), label=v.label
        )
        drew = True
    if not drew:
        plt.close(fig)
        return None
    axes[0].set_ylabel(f"completions/s ({w:.2g} s window)")
    axes[1].set_ylabel("goodput (req/s meeting SLO)")
    axes[2].set_ylabel("requests in flight")
    if power:
        _power_panel(axes[3], views)
    axes[-1].set_xlabel("time in run (s)")
    for ax in axes:
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, plt, os.path.join(out_dir, "throughput_goodput_inflight.png"))


def _power_panel(ax, views: list[RunView]) -> None:
    """Each GPU's power draw as sampled (--gpu-telemetry: metrics/energy.gpu_series)."""
    for v in views:
        for gpu, s in gpu_series(v.gpus or []).items():
            pts = [(t, p) for t, p in zip(s["t"], s["power_w"]) if p is not None]
            if pts:
                ax.plot([t for t, _ in pts], [p for _, p in pts], lw=1, label=f"{v.label} {gpu.split('{')[-1][:24]}")
    ax.set_ylabel("GPU power (W)")
    ax.legend(fontsize=6)


def attainment_by_class(views: list[RunView], out_dir: str) -> str | None:
    """SLO attainment per class with Wilson intervals, runs side by side, the 95% target as a line."""
    from ..metrics.stats import wilson

    rows = []
    for v in views:
        s = v.summary
        if s.get("slo_attainment") is None:
            continue
        blocks = {"all": s, **(s.get("per_class") or {})}
        rows.append((v.label, {k: (b["slo_met"], b["requests"]["issued"]) for k, b in blocks.items()}))
    if not rows:
        return None
    plt = _plt()
    classes = list(dict.fromkeys(k for _, d in rows for k in d))
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(classes) * len(rows)), 4))
    width = 0.8 / len(rows)
    for i, (label, d) in enumerate(rows):
        xs, ys, lo, hi = [], [], [], []
        for j, k in enumerate(classes):
            if k in d and d[k][1]:
                good, n = d[k]
                a, b = wilson(good, n)
                xs.append(j + i * width)
                ys.append(good / n * 100)
                lo.append(max(0.0, good / n * 100 - a * 100))
                hi.append(max(0.0, b * 100 - good / n * 100))
        ax.bar(xs, ys, width, yerr=[lo, hi], capsize=3, label=label)
    ax.axhline(95, color=SLO_COLOR, linestyle="--", linewidth=1)
    ax.set_xticks([j + width * (len(rows) - 1) / 2 for j in range(len(classes))], classes)
    ax.set_ylabel("SLO attainment (%), 95% Wilson CI")
    ax.set_ylim(0, 105)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, plt, os.path.join(out_dir, "attainment_by_class.png"))


def schedule_lag(views: list[RunView], out_dir: str) -> str | None:
    """How late the load generator sent each request, against when it was due."""
    late = [v for v in views if np.nanmax(v.c.lag, initial=0.0) > 0]
    if not late:  # every request on time (a simulation): an all-zero panel says nothing
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(13, 3.5))
    drew = False
    for v in late:
        c = v.c
        m = np.flatnonzero(~np.isnan(c.lag))
        if not m.size:
            continue
        m = m[_thin(m.size, keep_top=c.lag[m])]
        ax.scatter(c.sched[m], np.maximum(c.lag[m] * 1000.0, 1e-3), s=3, alpha=0.5, label=v.label, rasterized=True)
        drew = True
    if not drew:
        plt.close(fig)
        return None
    ax.axhline(10, color=SLO_COLOR, linestyle="--", linewidth=1)
    ax.annotate(
        "10 ms: validity limit (p99)", (0, 10), color=SLO_COLOR, fontsize=8, xytext=(3, 3), textcoords="offset points"
    )
    log_ms_axis(ax, "y")
    ax.set_xlabel("scheduled time in run (s)")
    ax.set_ylabel("schedule lag (ms, log)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, markerscale=3)
    fig.tight_layout()
    return _save(fig, plt, os.path.join(out_dir, "schedule_lag.png"))


def engine_steps(views: list[RunView], out_dir: str) -> str | None:
    """The engine's per-step trace (reference engine runs with --step-trace): prefill vs decode tokens
    per step, KV-cache usage, cumulative preemptions (when there were any), and the scraped server
    gauges beneath on the run's clock (counts on the left axis, fractions in % on the right)."""
    gauges = [v for v in views if v.server and _server_series(v.server)]  # histograms alone draw nothing
    withs = [v for v in views if v.steps is not None or v in gauges]
    if not withs:
        return None
    steps = [v for v in withs if v.steps is not None]
    preempted = any(v.steps["preemptions"].sum() > 0 for v in steps)
    panels = (2 + preempted) * bool(steps) + bool(gauges)
    plt = _plt()
    fig, axes = plt.subplots(panels, 1, figsize=(13, 2.6 * panels + 0.6), squeeze=False)
    axes = list(axes[:, 0])
    if steps:
        _step_panels(axes[: 2 + preempted], steps, preempted)
    if gauges:
        _server_panel(axes[-1], gauges)
    for ax in fig.axes:
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, markerscale=4, loc="upper left" if ax in axes else "upper right")
    fig.tight_layout()
    return _save(fig, plt, os.path.join(out_dir, "engine_and_server.png"))


def _step_panels(axes, steps: list[RunView], preempted: bool) -> None:
    for v in steps:
        st = v.steps
        k = _thin(st["start"].size)
        t = st["start"][k]
        axes[0].scatter(t, st["prefill_tokens"][k], s=2, alpha=0.6, label=f"{v.label} prefill", rasterized=True)
        axes[0].scatter(t, st["decode_tokens"][k], s=2, alpha=0.6, label=f"{v.label} decode", rasterized=True)
        axes[1].plot(t, st["kv_usage"][k] * 100, linewidth=1, label=v.label)
        if preempted:
            axes[2].plot(st["start"], np.cumsum(st["preemptions"]), linewidth=1, label=v.label)
    axes[0].set_ylabel("tokens per step")
    axes[1].set_ylabel("KV cache used (%)")
    if preempted:
        axes[2].set_ylabel("preemptions (cumulative)")
    axes[-1].set_xlabel("engine clock (s): the run's clock for simulate, the server's for serve")


def _server_panel(ax, views: list[RunView]) -> None:
    """The server's gauges in words: counts on the left axis, 0..1 fractions as % on a right axis; a
    series' labels only where they tell it from the run's others of its name (engine 0, engine 1)."""
    frac = None
    for v in views:
        if not v.server:
            continue
        t = np.array([r["t"] for r in v.server], float)
        names = _server_series(v.server)
        labels = series_labels(names)
        for name in names:
            y = np.array([r["metrics"].get(name, np.nan) for r in v.server], float)
            words = gauge_words(name, labels[name])
            if is_fraction(name):
                frac = frac or ax.twinx()
                frac.plot(t, y * 100, linewidth=1, linestyle="--", label=f"{v.label}: {words} (%)")
            else:
                ax.plot(t, y, linewidth=1, label=f"{v.label}: {words}")
    ax.set_ylabel("requests (server's gauges)")
    ax.set_xlabel("time in run (s)")
    if frac is not None:
        frac.set_ylabel("%")
        frac.set_ylim(0, 100)


PREFERRED_GAUGES = ("num_requests_running", "num_requests_waiting", "kv_cache_usage", "cache_usage_perc")
MAX_GAUGES = 4  # count series drawn per run; every fraction (KV-cache use) is drawn beside them


def _pick_jobs(c, groups) -> list[tuple[str, np.ndarray]]:
    """The median-JCT job and the slowest one (by their last end minus their first schedule)."""
    jct = np.array(
        [np.nanmax(np.where(np.isnan(c.fin[g]), c.sent[g], c.fin[g])) - np.nanmin(c.sched[g]) for g in groups]
    )
    order = np.argsort(jct)
    picks = [("median job", groups[order[len(order) // 2]])]
    if len(order) > 1:
        picks.append(("slowest job", groups[order[-1]]))
    return picks


def job_timeline(views: list[RunView], out_dir: str) -> str | None:
    """The first run's median and slowest jobs: each call a bar from sent to end (red: on the critical
    path), its planned tool / think wait a grey bar before it, the job's JCT in the title."""
    v = views[0]
    groups = job_rows(v.cols)
    if not groups:
        return None
    plt = _plt()
    picks = _pick_jobs(v.c, groups)
    fig, axes = plt.subplots(1, len(picks), figsize=(7 * len(picks), 4), squeeze=False)
    for ax, (title, rows) in zip(axes[0], picks):
        _, path = critical_path(v.c, rows)
        t0 = float(np.nanmin(v.c.sched[rows]))
        for y, i in enumerate(sorted(rows, key=lambda i: (v.cols.depth[i], v.cols.node[i]))):
            sent = float(v.c.sent[i]) - t0
            end = (float(v.c.fin[i]) - t0) if not np.isnan(v.c.fin[i]) else sent
            wait = 0.0 if np.isnan(v.cols.delay[i]) else float(v.cols.delay[i])
            ax.barh(y, wait, left=sent - wait, color="#d0d7de", height=0.6)
            ax.barh(y, end - sent, left=sent, color="#cf222e" if i in path else "#0969da", height=0.6)
            ax.text(end, y, f" {v.cols.node[i]} (d{v.cols.depth[i]})", va="center", fontsize=7)
        jct = max(float(v.c.fin[i]) for i in rows) - t0
        ax.set_title(f"{title}: JCT {jct * 1000:,.0f} ms (red: critical path, grey: tool / think)", fontsize=9)
        ax.set_xlabel("s since the job arrived")
        ax.set_yticks([])
    fig.tight_layout()
    return _save(fig, plt, os.path.join(out_dir, "job_timeline.png"))


def _server_series(rows: list[dict]) -> list[str]:
    """The series to draw: the preferred gauges (by name, whatever their labels), else the first gauges
    scraped; up to MAX_GAUGES counts, and every fraction, so KV-cache use is never crowded out by one
    count per engine."""
    names = list(dict.fromkeys(k for r in rows[:50] for k in r["metrics"]))
    pick = [n for n in names if any(p in split_series(n)[0] for p in PREFERRED_GAUGES)]
    pick = pick or [n for n in names if not split_series(n)[0].endswith(("_total", "_sum", "_count", "_created"))]
    return [n for n in pick if not is_fraction(n)][:MAX_GAUGES] + [n for n in pick if is_fraction(n)][:MAX_GAUGES]


FIGURES = (cdfs, itl_timeline, vs_prompt, timeseries, attainment_by_class, schedule_lag, engine_steps, job_timeline)


def run_figures(views: list[RunView], out_dir: str) -> list[str]:
    paths = []
    for fig in FIGURES:
        p = fig(views, out_dir)
        if p:
            paths.append(p)
    return paths
