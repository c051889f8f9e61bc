"""A workload plus the command line's overrides -> the WorkloadSpec a run uses. Pure: the CLI turns its
flags into WorkloadOptions, and the Python API takes the same options as keyword arguments."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, fields, replace

from ..arrivals import ArrivalSpec
from ..errors import UsageError
from ..limits import check_all, check_upfront
from ..records import parse_slo
from .catalog import load_workload
from .datasets import dataset_workload
from .lora import LoraSpec, check_generator
from .spec import DEFAULT_REQUESTS, LengthDist, TraceSpec, WorkloadSpec


@dataclass(frozen=True)
class WorkloadOptions:
    """Every field None = keep the workload's value (flags override the workload file)."""

    workload: str | None = None  # a workload file
    dataset_name: str | None = None  # a built-in workload when no file is given (default random)
    dataset_path: str | None = None  # ShareGPT source
    random_input_len: int | None = None
    random_output_len: int | None = None
    num_prompts: int | None = None
    duration: float | None = None
    warmup: int | None = None
    request_rate: str | float | None = None  # a number or "inf"
    burstiness: float | None = None
    arrival: str | None = None  # poisson | gamma | constant
    ramp_up: float | None = None
    concurrency: int | None = None
    think_time: float | None = None
    seed: int | None = None
    goodput: list | str | None = None  # SLO, "ttft:500 tpot:50" or its words
    endpoint_type: str | None = None  # completions | chat
    multi_turn: bool | None = None  # ShareGPT conversations as multi-turn sessions
    trace: str | None = None  # a production trace to replay (workloads.traces)
    trace_format: str | None = None
    trace_speedup: float | None = None
    trace_window: str | None = None
    lora_adapters: str | int | None = None  # "8" or "sql,chat,code": the requests spread over LoRA adapters
    lora_skew: float | None = None  # their popularity, Zipf(skew) by position
    prefix_hit_rate: float | None = None  # a controlled hit rate for the synthetic classes (workloads/priming.py)
    primed_prefixes: int | None = None

    @classmethod
    def from_namespace(cls, ns) -> WorkloadOptions:
        return cls(**{f.name: getattr(ns, f.name, None) for f in fields(cls)})


def parse_rate(text) -> float:
    if isinstance(text, (int, float)):
        return float(text)
    try:
        return math.inf if str(text).lower() == "inf" else float(text)
    except ValueError:
        raise UsageError(f"--request-rate {text!r} is not a number or 'inf'") from None


def _base(o: WorkloadOptions) -> WorkloadSpec:
    if o.trace:
        if o.workload:
            raise UsageError("give --trace or --workload, not both (a workload file can name a trace)")
        return WorkloadSpec(
            name=f"trace:{os.path.basename(o.trace)}",
            generator="trace",
            num_requests=None,
            arrival=ArrivalSpec(kind="workload"),
            trace=TraceSpec(path=o.trace, format=o.trace_format, speedup=o.trace_speedup or 1.0, window=o.trace_window),
        )
    if o.workload:
        return load_workload(o.workload)
    return dataset_workload(
        o.dataset_name or "random",
        o.random_input_len,
        o.random_output_len,
        o.dataset_path,
        multi_turn=bool(o.multi_turn),
    )


def _lengths(spec: WorkloadSpec, o: WorkloadOptions) -> WorkloadSpec:
    """--dataset-path points ShareGPT classes at a file; --random-*-len override a file's lengths."""
    if spec.trace is not None and (o.trace_format or o.trace_speedup or o.trace_window) and not o.trace:
        spec = replace(
            spec,
            trace=replace(
                spec.trace,
                format=o.trace_format or spec.trace.format,
                speedup=o.trace_speedup or spec.trace.speedup,
                window=o.trace_window or spec.trace.window,
            ),
        )
    if o.dataset_path and spec.session is not None and spec.session.source == "sharegpt":
        spec = replace(spec, session=replace(spec.session, dataset=o.dataset_path))
    if o.dataset_path and spec.generator == "sharegpt":
        spec = replace(
            spec,
            classes=tuple(replace(c, dataset=o.dataset_path) if c.source == "sharegpt" else c for c in spec.classes),
        )
    if o.workload and (o.random_input_len or o.random_output_len):
        inp, out = o.random_input_len, o.random_output_len
        spec = replace(
            spec,
            classes=tuple(
                replace(
                    c,
                    input=LengthDist(value=inp) if inp and c.source == "synthetic" else c.input,
                    output=LengthDist(value=out) if out else c.output,
                )
                for c in spec.classes
            ),
        )
    return spec


def _hit_rate(spec: WorkloadSpec, o: WorkloadOptions) -> WorkloadSpec:
    """--prefix-hit-rate / --primed-prefixes: a controlled hit rate on every synthetic class without shared
    prefixes of its own (UsageError when the workload has none)."""
    if o.prefix_hit_rate is None:
        if o.primed_prefixes is not None and not any(c.hit_rate is not None for c in spec.classes):
            raise UsageError("--primed-prefixes goes with --prefix-hit-rate (or a class's hit_rate)")
        return spec if o.primed_prefixes is None else _with_hit_rate(spec, None, o.primed_prefixes)
    return _with_hit_rate(spec, o.prefix_hit_rate, o.primed_prefixes)


def _with_hit_rate(spec: WorkloadSpec, h: float | None, n: int | None) -> WorkloadSpec:
    fits = [c.source == "synthetic" and not (c.system_prompts or c.documents) for c in spec.classes]
    if spec.generator not in ("synthetic", "mixed") or not any(fits):
        raise UsageError("--prefix-hit-rate is for synthetic classes without shared prefixes (random, mixed, ...)")
    return replace(
        spec,
        classes=tuple(
            replace(c, hit_rate=c.hit_rate if h is None else h, primed_prefixes=n or c.primed_prefixes) if ok else c
            for c, ok in zip(spec.classes, fits)
        ),
    )


def _arrival(a: ArrivalSpec, o: WorkloadOptions) -> ArrivalSpec:
    if o.request_rate is not None:
        kind = o.arrival or ("gamma" if (o.burstiness or a.burstiness) != 1.0 else "poisson")
        a = replace(a, kind=kind, rate=parse_rate(o.request_rate))
    elif o.arrival:
        a = replace(a, kind=o.arrival)
    if o.burstiness is not None:
        a = replace(a, burstiness=o.burstiness, kind="gamma" if a.kind == "poisson" else a.kind)
    if o.ramp_up is not None:
        a = replace(a, ramp_up_s=o.ramp_up)
    if o.concurrency is not None:
        a = replace(a, kind="closed", concurrency=o.concurrency)
    if o.think_time is not None:
        a = replace(a, think_time_s=o.think_time)
    return ArrivalSpec(**a.__dict__)  # validates the combination


def _counts(o: WorkloadOptions) -> dict:
    kw: dict = {}
    if o.num_prompts is not None:
        kw["num_requests"] = o.num_prompts
        kw["duration_s"] = o.duration
    if o.duration is not None:
        kw["duration_s"] = o.duration
        if o.num_prompts is None:
            kw["num_requests"] = None
    return kw


def _lora(spec: WorkloadSpec, o: WorkloadOptions) -> LoraSpec:
    """--lora-adapters / --lora-skew over the workload's [lora] (UsageError before anything is built)."""
    check_generator(spec.generator)
    given = o.lora_adapters
    if given is None:
        if spec.lora is None:
            raise UsageError("--lora-skew needs adapters: --lora-adapters N or names, or a workload's [lora]")
        return LoraSpec.of(spec.lora.adapters, skew=o.lora_skew, base_share=spec.lora.base_share)
    text = str(given).strip()
    adapters = int(text) if text.isdigit() else [a.strip() for a in text.split(",")]
    share = spec.lora.base_share if spec.lora else 0.0
    return LoraSpec.of(adapters, skew=o.lora_skew or 0.0, base_share=share)


def resolve_workload(o: WorkloadOptions) -> WorkloadSpec:
    """The workload file (or built-in dataset) with every given option applied (UsageError for an
    option out of its range: the same checks as the command line's)."""
    check_all({f.name: getattr(o, f.name) for f in fields(o) if f.name != "goodput"})
    check_upfront(o.num_prompts, o.duration)
    spec = _hit_rate(_lengths(_base(o), o), o)
    kw = {"arrival": _arrival(spec.arrival, o), **_counts(o)}
    if o.warmup is not None:
        kw["warmup_requests"] = o.warmup
    if o.seed is not None:
        kw["seed"] = o.seed
    if o.goodput:
        kw["slo"] = parse_slo(o.goodput)
    if o.endpoint_type:
        kw["endpoint"] = o.endpoint_type
    if o.lora_adapters is not None or o.lora_skew is not None:
        kw["lora"] = _lora(spec, o)
    spec = replace(spec, **kw)
    if (
        spec.num_requests is None
        and spec.duration_s is None
        and spec.generator not in ("hol", "sessions", "trace", "agent")
    ):
        spec = replace(spec, num_requests=DEFAULT_REQUESTS)
    if spec.warmup_requests and spec.num_requests and spec.warmup_requests >= spec.num_requests:
        raise UsageError(f"--warmup {spec.warmup_requests} leaves none of the {spec.num_requests} requests to measure")
    return spec
