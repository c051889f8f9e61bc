"""Runs -> numbers: per-request columns, distributions with intervals, HOL attribution, hazards, and
the summary.json dict. Pure (numpy); nothing here does I/O."""

from .derived import RequestMetrics, measured_arrays
from .dist import PCTS, dist
from .summary import summarize

__all__ = ["RequestMetrics", "measured_arrays", "PCTS", "dist", "summarize"]
