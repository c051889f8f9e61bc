"""Runs -> numbers: per-request columns, distributions with intervals, HOL attribution, hazards, and
the summary.json dict. Pure (numpy); nothing here does I/O."""

from .columns import Columns, columns_of
from .dist import PCTS, dist
from .summary import summarize

__all__ = ["Columns", "columns_of", "PCTS", "dist", "summarize"]
