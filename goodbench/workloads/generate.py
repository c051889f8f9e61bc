"""A workload's requests from its generator: the mixture of classes (mixture.py) or the HOL pattern
(hol.py); the first warmup_requests are marked as warm-up."""

from __future__ import annotations

from ..records import RequestSpec
from .hol import hol_requests
from .lora import assign
from .mixture import mixture_requests
from .spec import WorkloadSpec


def build_requests(spec: WorkloadSpec, tok, n: int) -> list[RequestSpec]:
    """n requests for the workload, reproducible for spec.seed. The first warmup_requests are marked."""
    if spec.generator == "hol":
        out = hol_requests(spec, tok)
        out = out[:n] if n else out
    else:
        out = mixture_requests(spec, tok, n)
    out = assign(out, spec.lora, spec.seed)
    w = spec.warmup_requests
    if w:
        out = [RequestSpec(**{**r.__dict__, "warmup": True}) if i < w else r for i, r in enumerate(out)]
    return out
