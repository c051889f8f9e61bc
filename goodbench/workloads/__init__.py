"""Workloads: a TOML spec (spec.py) or a built-in one (builtin.py), with the command line's overrides
(options.py), turned into requests by its generator (mixture.py, hol.py, sharegpt.py)."""

from __future__ import annotations

from ..records import RequestSpec
from .hol import hol_count, hol_requests
from .lengths import sample_lengths
from .mixture import mixture_requests
from .options import WorkloadOptions, resolve_workload
from .spec import ClassSpec, HolSpec, LengthDist, WorkloadSpec, load_workload, parse_workload

__all__ = ["build_requests", "hol_count", "load_workload", "parse_workload", "resolve_workload", "sample_lengths",
           "ClassSpec", "HolSpec", "LengthDist", "WorkloadOptions", "WorkloadSpec"]


def build_requests(spec: WorkloadSpec, tok, n: int) -> list[RequestSpec]:
    """n requests for the workload, reproducible for spec.seed. The first warmup_requests are marked."""
    if spec.generator == "hol":
        out = hol_requests(spec, tok)
        out = out[:n] if n else out
    else:
        out = mixture_requests(spec, tok, n)
    w = spec.warmup_requests
    if w:
        out = [RequestSpec(**{**r.__dict__, "warmup": True}) if i < w else r for i, r in enumerate(out)]
    return out
