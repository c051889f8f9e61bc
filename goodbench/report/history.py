"""The history in the terminal and as a PNG: the catalogue's runs as a table, a metric's series per
identity as a sparkline and a table of its newest runs with the change points marked, and the same
series drawn with matplotlib. Renders only; api/history.py computes."""

from __future__ import annotations

import math

import numpy as np
from rich import box
from rich.table import Table
from rich.text import Text

from ..history.identity import describe

BARS = "▁▂▃▄▅▆▇█"


def fmt(v, unit: str = "") -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    if unit == "fraction":
        return f"{v:.1%}"
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}" if abs(v) >= 1 else f"{v:.3f}"


def sparkline(values, width: int = 60) -> str:
    """One character per run (the newest `width`), eight levels between the series' 5th and 95th
    percentiles (min and max under 20 runs), so one outlier does not flatten the rest; beyond: clipped."""
    vals = list(values)[-width:]
    if not vals:
        return ""
    lo, hi = (min(vals), max(vals)) if len(vals) < 20 else tuple(float(q) for q in np.percentile(vals, [5, 95]))
    span = hi - lo
    return "".join(BARS[min(7, max(0, int((v - lo) / span * 8)))] if span > 0 else BARS[3] for v in vals)


def runs_table(runs: list[dict], title: str) -> Table:
    """One row per run; labels only when some run has them (long texts wrap, numbers do not)."""
    labelled = any(r["labels"] for r in runs)
    tab = Table(box=box.SIMPLE_HEAD, pad_edge=False, title=title, title_justify="left")
    cols = ["started (UTC)", "run", "workload", "model", "server", "gpu", "goodput", "attain", "TTFT p99"]
    for col in cols + (["labels"] if labelled else []):
        num = col in ("goodput", "attain", "TTFT p99")
        tab.add_column(col, justify="right" if num else "left", no_wrap=num or col == "started (UTC)", overflow="fold")
    for r in runs:
        m = r["metrics"]
        cells = [
            (r.get("started") or "")[:16].replace("T", " "),
            r.get("run_id"),
            r.get("workload"),
            r.get("model"),
            " ".join(x for x in (r.get("server"), r.get("server_version")) if x),
            r.get("gpu"),
            fmt(m.get("goodput")),
            fmt(m.get("slo_attainment"), "fraction"),
            fmt(m.get("ttft_p99")),
        ]
        if labelled:
            cells.append(",".join(f"{k}={v}" for k, v in sorted(r["labels"].items())))
        tab.add_row(*(Text(str(c or "")) for c in cells))
    return tab


def trend_renderables(trend, rows: int = 15) -> list:
    """A header (identity, sparkline, range), the newest `rows` runs, and the change points."""
    s, unit = trend.series, trend.unit
    vals = s.values
    head = Text(f"{s.metric} ({unit}, {trend.better} is better) · {describe(s.identity)}", style="bold")
    head.append(f"  [{s.identity['key']}]", style="dim")
    line = Text(f"  {sparkline(vals)}  ")
    line.append(f"{len(vals)} runs, {fmt(min(vals), unit)}–{fmt(max(vals), unit)}, newest {fmt(vals[-1], unit)}")
    tab = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("#", "started (UTC)", "run", s.metric, "server version", "commit", ""):
        tab.add_column(col, justify="right" if col in ("#", s.metric) else "left", no_wrap=True)
    starts = {c.index: c for c in trend.changes}
    for i in range(max(0, len(vals) - rows), len(vals)):
        p = s.points[i]
        mark = starts.get(i)
        note = (
            Text(
                f"◀ {mark.change:+.1%} {mark.direction}",
                style="bold red" if mark.direction == "regression" else "bold green",
            )
            if mark
            else Text("")
        )
        cells = (
            str(i + 1),
            p.started[:19].replace("T", " "),
            p.run_id,
            fmt(p.value, unit),
            p.server_version or "",
            (p.commit or "")[:10],
        )
        tab.add_row(*(Text(str(c)) for c in cells), note)
    out = [head, line, tab]
    for c in trend.changes:
        p = s.points[c.index]
        style = "red" if c.direction == "regression" else "green"
        out.append(
            Text(
                f"  change at run {c.index + 1} ({p.run_id}, {p.started[:10]}): {fmt(c.before, unit)} -> "
                f"{fmt(c.after, unit)} ({c.change:+.1%}, 95% CI {c.change_ci[0]:+.1%} to {c.change_ci[1]:+.1%}), "
                f"{c.direction}, p={c.p_value:.3f} ({c.n_before} runs before, {c.n_after} after)",
                style=style,
            )
        )
    if not trend.changes:
        out.append(Text("  no change point: the series moves within its own noise", style="dim"))
    return out


def trend_png(trends: list, path: str) -> str:
    """Each identity's series as a line (x: the run's start time), change points as vertical lines."""
    from datetime import datetime

    from .figures import _plt, _save

    plt = _plt()
    fig, ax = plt.subplots(figsize=(10, 4.5))
    for t in trends:
        xs = [datetime.fromisoformat(p.started) for p in t.series.points]
        (line,) = ax.plot(xs, t.series.values, marker="o", ms=3, lw=1, label=describe(t.series.identity)[:80])
        for c in t.changes:
            ax.axvline(xs[c.index], color=line.get_color(), ls="--", lw=1)
            ax.annotate(
                f"{c.change:+.1%}", (xs[c.index], c.after), textcoords="offset points", xytext=(4, 6), fontsize=8
            )
    if trends:
        t = trends[0]
        ax.set_ylabel(f"{t.series.metric} ({t.unit})")
        ax.set_title(f"{t.series.metric} over time ({t.better} is better); dashed: change points", fontsize=10)
    ax.legend(fontsize=7, loc="best")
    ax.grid(alpha=0.3)
    fig.autofmt_xdate()
    fig.tight_layout()
    return _save(fig, plt, path)
