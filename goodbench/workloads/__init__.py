"""Workloads: a TOML spec (spec.py) or a built-in one (datasets.py, catalog.py), with the command line's
overrides (options.py), turned into requests by its generator (generate.py: mixture.py, hol.py;
sharegpt.py, traces.py, sessions.py) and into a Plan (plan.py) that every driver shares."""

from __future__ import annotations

from .catalog import load_workload
from .generate import build_requests
from .hol import hol_count
from .lengths import sample_lengths
from .options import WorkloadOptions, resolve_workload
from .parse import parse_workload
from .plan import CLOSED_POOL, Plan, build_plan
from .spec import ClassSpec, HolSpec, LengthDist, WorkloadSpec

__all__ = [
    "CLOSED_POOL",
    "Plan",
    "build_plan",
    "build_requests",
    "hol_count",
    "load_workload",
    "parse_workload",
    "resolve_workload",
    "sample_lengths",
    "ClassSpec",
    "HolSpec",
    "LengthDist",
    "WorkloadOptions",
    "WorkloadSpec",
]
