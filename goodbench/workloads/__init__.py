"""Workload generators: WorkloadSpec + seed -> [RequestSpec]."""

from __future__ import annotations

import math
import random

import numpy as np

from ..records import RequestSpec
from .spec import ClassSpec, LengthDist, WorkloadError, WorkloadSpec, load_workload, parse_workload

__all__ = ["build_requests", "load_workload", "parse_workload", "WorkloadSpec", "WorkloadError",
           "sample_lengths"]


def sample_lengths(d: LengthDist, n: int, rng: np.random.Generator) -> np.ndarray:
    if d.dist == "constant":
        x = np.full(n, float(d.value))
    elif d.dist == "uniform":
        x = rng.integers(d.min, d.max + 1, n).astype(float)
    elif d.dist == "normal":
        x = rng.normal(d.mean, d.std, n)
    elif d.dist == "lognormal":
        x = rng.lognormal(math.log(d.median), d.sigma, n)
    else:
        raise ValueError("dataset lengths come from the dataset")
    return np.clip(np.rint(x), max(1, d.min), d.max).astype(int)


def _as_prompt(text: str, chat: bool):
    return [{"role": "user", "content": text}] if chat else text


def _class_requests(c: ClassSpec, n: int, spec: WorkloadSpec, tok, rng_np, rng_py) -> list[tuple]:
    if c.source == "sharegpt":
        from .sharegpt import load_raw, sample, source_key

        recs, report = load_raw(c.dataset)
        fixed = c.output.value if c.output.dist == "constant" else None
        rows = sample(recs, tok, n, spec.seed, fixed_output=fixed, cache_key=source_key(report))
        if c.output.dist not in ("constant", "dataset"):
            outs = sample_lengths(c.output, n, rng_np)
            rows = [(p, pl, int(o)) for (p, pl, _), o in zip(rows, outs)]
        return rows
    ins = sample_lengths(c.input, n, rng_np)
    outs = sample_lengths(c.output, n, rng_np)
    return [(tok.synthetic_text(int(i), rng_py), int(i), int(o)) for i, o in zip(ins, outs)]


def build_requests(spec: WorkloadSpec, tok, n: int) -> list[RequestSpec]:
    """n requests for the workload, reproducible for spec.seed. The first warmup_requests are marked."""
    chat = spec.endpoint == "chat"
    rng_np = np.random.default_rng(spec.seed)
    rng_py = random.Random(spec.seed)
    if spec.generator == "hol":
        out = _hol(spec, tok, rng_py, chat)
        out = out[:n] if n else out
    else:
        weights = np.array([c.weight for c in spec.classes], dtype=float)
        which = rng_np.choice(len(spec.classes), size=n, p=weights / weights.sum())
        out = [None] * n
        for ci, c in enumerate(spec.classes):
            idx = np.flatnonzero(which == ci)
            if idx.size == 0:
                continue
            rows = _class_requests(c, idx.size, spec, tok, rng_np, rng_py)
            for i, (text, pl, ol) in zip(idx, rows):
                out[i] = RequestSpec(id=f"r{i}", cls=c.name, prompt=_as_prompt(text, chat),
                                     prompt_tokens=pl, max_tokens=ol)
    w = spec.warmup_requests
    if w:
        out = [RequestSpec(**{**r.__dict__, "warmup": True}) if i < w else r for i, r in enumerate(out)]
    return out


def _hol(spec: WorkloadSpec, tok, rng, chat: bool) -> list[RequestSpec]:
    h = spec.hol
    out = []
    for k in range(h.repeats):
        t0 = k * h.period_s
        text = tok.synthetic_text(h.long_input, rng)
        out.append(RequestSpec(f"r{len(out)}", "long", _as_prompt(text, chat), h.long_input,
                               h.long_output, arrival_s=t0))
        for j in range(1, h.shorts + 1):
            text = tok.synthetic_text(h.short_input, rng)
            out.append(RequestSpec(f"r{len(out)}", "short", _as_prompt(text, chat), h.short_input,
                                   h.short_output, arrival_s=t0 + j * h.stagger_ms / 1000.0))
    out.sort(key=lambda r: r.arrival_s)
    return out


def hol_count(spec: WorkloadSpec) -> int:
    return spec.hol.repeats * (spec.hol.shorts + 1)
