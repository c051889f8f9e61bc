"""What every figure shares: matplotlib on the Agg backend (imported only when a figure is drawn), a
millisecond log axis with readable ticks, and saving a PNG."""

from __future__ import annotations


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def log_ms_axis(ax, which: str = "x") -> None:
    """A log axis of milliseconds labelled 1, 2, 5, 10, 20, 50, ... in plain numbers, with no labels on
    the minor ticks: matplotlib's default labels every minor tick of a narrow range (3x10^1 4x10^1 ...),
    and they overlap."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis = ax.xaxis if which == "x" else ax.yaxis
    (ax.set_xscale if which == "x" else ax.set_yscale)("log")
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0), numticks=12))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1 else f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


def _save(fig, plt, path: str) -> str:
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
