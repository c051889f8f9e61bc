"""What every figure shares: matplotlib on the Agg backend (imported only when a figure is drawn), a
millisecond log axis with readable ticks, and saving a PNG."""

from __future__ import annotations

import re


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _ms_ticks():
    """A tick locator for a log axis of milliseconds that adapts to the range it is drawn over: 1-2-5 per
    decade over up to three decades, one tick per decade beyond (0.01 0.02 0.05 0.1 0.2 ran together),
    and evenly spaced plain ticks inside one decade (22-23 ms got a single repeated label)."""
    import math

    from matplotlib.ticker import Locator, LogLocator, MaxNLocator

    class MsTicks(Locator):
        def __call__(self):
            lo, hi = self.axis.get_view_interval()
            return self.tick_values(lo, hi)

        def tick_values(self, vmin, vmax):
            vmin, vmax = sorted((max(vmin, 1e-9), max(vmax, 1e-9)))
            decades = math.log10(vmax / vmin) if vmax > vmin else 0.0
            if decades < 1:
                return MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10]).tick_values(vmin, vmax)
            subs = (1.0, 2.0, 5.0) if decades <= 3 else (1.0,)
            return LogLocator(base=10, subs=subs, numticks=30).tick_values(vmin, vmax)

    return MsTicks()


def _ms_label(axis):
    """Plain numbers with as many decimals as the ticks need to differ (22.2 22.4, not 22 22)."""
    import math

    from matplotlib.ticker import FuncFormatter

    def fmt(v, _pos):
        locs = sorted(x for x in axis.get_majorticklocs() if x > 0)
        step = min((b - a for a, b in zip(locs, locs[1:]) if b > a), default=v or 1.0)
        dec = max(0, -math.floor(math.log10(step))) if step < 1 else 0
        return f"{v:,.{dec}f}" if v >= 1 or dec else f"{v:g}"

    return FuncFormatter(fmt)


def log_ms_axis(ax, which: str = "x") -> None:
    """A log axis of milliseconds with readable plain-number ticks (_ms_ticks, _ms_label) and no labels
    on the minor ticks: matplotlib's default labels every minor tick of a narrow range (3x10^1 4x10^1
    ...), and they overlap."""
    from matplotlib.ticker import NullFormatter

    axis = ax.xaxis if which == "x" else ax.yaxis
    (ax.set_xscale if which == "x" else ax.set_yscale)("log")
    axis.set_major_locator(_ms_ticks())
    axis.set_major_formatter(_ms_label(axis))
    axis.set_minor_formatter(NullFormatter())


def declutter(fig, texts) -> None:
    """Hide point labels that would overlap one already shown (the frontier's chunk sizes ran together
    into '839072')."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    shown = []
    for t in texts:
        box = t.get_window_extent(renderer)
        if any(box.overlaps(b) for b in shown):
            t.set_visible(False)
        else:
            shown.append(box)


GAUGE_WORDS = {
    "num_requests_running": "requests running",
    "num_requests_waiting": "requests waiting",
    "num_requests_swapped": "requests swapped",
    "kv_cache_usage_perc": "KV cache used",
    "gpu_cache_usage_perc": "KV cache used",
    "cache_usage_perc": "KV cache used",
}


_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def split_series(key: str) -> tuple[str, dict]:
    """A scraped series key into its name and labels: 'vllm:x{model_name="m",engine="0"}' ->
    ('vllm:x', {'model_name': 'm', 'engine': '0'})."""
    name, _, rest = key.partition("{")
    return name, dict(_LABEL.findall(rest))


def gauge_words(key: str, labels: str = "") -> str:
    """A Prometheus series in words: vllm:num_requests_running{...} -> requests running (vllm); labels:
    what tells this series from the run's others of its name (series_labels), appended."""
    server, _, metric = split_series(key)[0].rpartition(":")
    words = GAUGE_WORDS.get(metric, metric.replace("_", " "))
    return (f"{words} ({server})" if server else words) + (f" {labels}" if labels else "")


def series_labels(keys: list[str]) -> dict[str, str]:
    """Per series key, the label values that tell it from the other series of its name ('engine 1'), ''
    where none do: a label every series of a name shares (model_name) says nothing in a legend."""
    split = {k: split_series(k) for k in keys}
    out = {}
    for k, (name, labels) in split.items():
        peers = [lab for n, lab in split.values() if n == name]
        differ = [a for a in labels if len({p.get(a) for p in peers}) > 1]
        out[k] = ", ".join(f"{a} {labels[a]}" for a in differ)
    return out


def is_fraction(key: str) -> bool:
    """A gauge in 0..1 (vLLM's *_usage_perc): drawn as % on its own axis, not beside request counts."""
    return split_series(key)[0].endswith(("usage_perc", "_fraction", "_ratio"))


def _save(fig, plt, path: str) -> str:
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
