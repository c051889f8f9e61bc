"""A run judged against the recent series of its identity (`goodbench gate --history`). Pure.

The series' own spread sets the tolerance: a one-sided prediction interval for one more run of the
same level (Student's t over the window, at --history-alpha, default 0.1%), from the window's mean and
standard deviation. Only gross errors are left out of them (runs more than 5 robust sigmas (MAD) from
the median, at most a tenth of the window: a night the server was broken), so a heavy-tailed metric
keeps its real spread and one broken night does not widen the band for the next twenty. A value inside
the interval never fails; neither does a change smaller than --history-min-change (default 1%: a
deterministic simulated series has no spread at all). Measured false-fail rates and power are in
docs/history.md."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

ALPHA = 0.001
MIN_RUNS = 5
WINDOW = 20
MIN_CHANGE = 0.01
OUTLIER_SIGMAS = 5.0
OUTLIER_SHARE = 0.1


@dataclass(frozen=True)
class HistoryCheck:
    """One metric of one run against its series."""

    metric: str
    value: float | None
    n: int  # earlier runs in the window
    center: float | None = None  # the window's level (mean of the runs kept)
    spread: float | None = None  # their standard deviation
    limit: float | None = None  # the worst value that passes
    judged: bool = False
    passed: bool = True
    note: str = ""

    @property
    def change(self) -> float | None:
        if self.value is None or not self.center:
            return None
        return self.value / self.center - 1


def level(window) -> tuple[float, float, int]:
    """(mean, standard deviation, runs kept) of a window without its gross errors."""
    w = np.asarray(window, dtype=float)
    dev = np.abs(w - np.median(w))
    mad = 1.4826 * float(np.median(dev))
    worst = np.argsort(dev)[::-1][: int(len(w) * OUTLIER_SHARE)]
    keep = np.delete(w, [i for i in worst if mad > 0 and dev[i] > OUTLIER_SIGMAS * mad])
    return float(keep.mean()), float(keep.std(ddof=1)) if len(keep) > 1 else 0.0, len(keep)


def judge(
    metric: str,
    value: float | None,
    window,
    better: str,
    *,
    alpha: float = ALPHA,
    min_runs: int = MIN_RUNS,
    min_change: float = MIN_CHANGE,
) -> HistoryCheck:
    """value (this run's) against window (the earlier runs', oldest first). better: "higher" | "lower"."""
    n = len(window)
    if value is None or not math.isfinite(value):
        return HistoryCheck(metric, None, n, note="this run has no value for it")
    if n < min_runs:
        return HistoryCheck(metric, value, n, note=f"not judged: {n} earlier run(s) of this identity, needs {min_runs}")
    from scipy.stats import t as student  # scipy.stats costs a second to import: only when judging

    center, sd, kept = level(window)
    tol = float(student.ppf(1 - alpha, kept - 1)) * sd * math.sqrt(1 + 1 / kept) if kept > 1 else 0.0
    tol = max(tol, abs(center) * min_change)
    limit = center - tol if better == "higher" else center + tol
    passed = value >= limit if better == "higher" else value <= limit
    return HistoryCheck(metric, value, n, center, sd, limit, True, passed)
