"""A workload TOML file -> WorkloadSpec (spec.py), every key checked: errors name the file and the key
(`InputError('FILE: key: message')`), unknown keys get the closest known one."""

from __future__ import annotations

import math
import os
from dataclasses import replace

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from ..arrivals import KINDS as ARRIVAL_KINDS, ArrivalSpec, parse_trace
from ..errors import InputError
from ..records import parse_slo
from .spec import (
    DEFAULT_REQUESTS,
    DISTS,
    ENDPOINTS,
    GENERATORS,
    MESSAGE_APIS,
    AgentSpec,
    ClassSpec,
    HolSpec,
    LengthDist,
    SessionSpec,
    TraceSpec,
    WorkloadSpec,
)


class _Ctx:
    """Error helper: InputError('FILE: key: message')."""

    def __init__(self, path: str):
        self.path = path

    def err(self, key: str, msg: str) -> InputError:
        return InputError(f"{self.path}: {key}: {msg}")

    def num(self, table: dict, key: str, prefix: str, kind=float, default=None, lo=None, allow_inf=False):
        if key not in table:
            return default
        v = table[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            if allow_inf and isinstance(v, str) and v.lower() == "inf":
                return math.inf
            raise self.err(f"{prefix}{key}", f"expected a number, got {v!r}")
        if kind is int and (isinstance(v, float) and not v.is_integer()):
            raise self.err(f"{prefix}{key}", f"expected a whole number, got {v!r}")
        v = kind(v)
        if lo is not None and v < lo:
            raise self.err(f"{prefix}{key}", f"must be >= {lo}, got {v}")
        return v

    def known(self, table: dict, allowed: set, prefix: str):
        for k in table:
            if k not in allowed:
                raise self.err(f"{prefix}{k}", f"unknown key; allowed: {', '.join(sorted(allowed))}")


def _length(ctx: _Ctx, v, key: str) -> LengthDist:
    if isinstance(v, bool):
        raise ctx.err(key, f"expected a token count or a table with dist = one of {', '.join(DISTS)}")
    if isinstance(v, int):
        if v < 1:
            raise ctx.err(key, "token count must be >= 1")
        return LengthDist("constant", value=v)
    if isinstance(v, str) and v == "dataset":
        return LengthDist("dataset")
    if not isinstance(v, dict):
        raise ctx.err(key, f'expected a token count, "dataset", or a table with dist = one of {", ".join(DISTS)}')
    dist = v.get("dist", "constant")
    if dist not in DISTS:
        raise ctx.err(f"{key}.dist", f"{dist!r} is not one of {', '.join(DISTS)}")
    ctx.known(v, {"dist", "value", "min", "max", "mean", "std", "median", "sigma"}, f"{key}.")
    p = f"{key}."
    lo = ctx.num(v, "min", p, int, 1, lo=1)
    hi = ctx.num(v, "max", p, int, 1_000_000, lo=1)
    if lo > hi:
        raise ctx.err(key, f"min ({lo}) > max ({hi})")
    d = LengthDist(dist, min=lo, max=hi)
    if dist == "constant":
        val = ctx.num(v, "value", p, int, None, lo=1)
        if val is None:
            raise ctx.err(f"{key}.value", "required for dist = constant")
        return replace(d, value=val)
    if dist == "uniform":
        if "min" not in v or "max" not in v:
            raise ctx.err(key, "dist = uniform needs min and max")
        return d
    if dist == "normal":
        mean, std = ctx.num(v, "mean", p, float, None, lo=1), ctx.num(v, "std", p, float, 0.0, lo=0)
        if mean is None:
            raise ctx.err(f"{key}.mean", "required for dist = normal")
        return replace(d, mean=mean, std=std)
    if dist == "lognormal":
        med, sig = ctx.num(v, "median", p, float, None, lo=1), ctx.num(v, "sigma", p, float, None, lo=0)
        if med is None or sig is None:
            raise ctx.err(key, "dist = lognormal needs median and sigma")
        return replace(d, median=med, sigma=sig)
    return d


def _arrival(ctx: _Ctx, a: dict, base_dir: str, default_kind: str) -> ArrivalSpec:
    allowed = {
        "process",
        "rate",
        "burstiness",
        "ramp_up_s",
        "on_rate",
        "off_rate",
        "on_mean_s",
        "off_mean_s",
        "trace",
        "time_scale",
        "concurrency",
        "think_time_s",
    }
    ctx.known(a, allowed, "arrival.")
    kind = a.get("process", default_kind)
    if kind not in ARRIVAL_KINDS:
        raise ctx.err("arrival.process", f"{kind!r} is not one of {', '.join(ARRIVAL_KINDS)}")
    p = "arrival."
    kw = dict(
        kind=kind,
        rate=ctx.num(a, "rate", p, float, 1.0, lo=0, allow_inf=True),
        burstiness=ctx.num(a, "burstiness", p, float, 1.0),
        ramp_up_s=ctx.num(a, "ramp_up_s", p, float, 0.0, lo=0),
        on_rate=ctx.num(a, "on_rate", p, float, 0.0, lo=0),
        off_rate=ctx.num(a, "off_rate", p, float, 0.0, lo=0),
        on_mean_s=ctx.num(a, "on_mean_s", p, float, 1.0),
        off_mean_s=ctx.num(a, "off_mean_s", p, float, 1.0),
        time_scale=ctx.num(a, "time_scale", p, float, 1.0),
        concurrency=ctx.num(a, "concurrency", p, int, 0, lo=0),
        think_time_s=ctx.num(a, "think_time_s", p, float, 0.0, lo=0),
    )
    if kind == "trace":
        tpath = a.get("trace")
        if not isinstance(tpath, str):
            raise ctx.err("arrival.trace", 'process = trace needs trace = "path/to/timestamps.csv|jsonl"')
        full = tpath if os.path.isabs(tpath) else os.path.join(base_dir, tpath)
        try:
            with open(full, encoding="utf-8") as f:
                kw["trace"] = parse_trace(f.read(), "jsonl" if full.endswith(".jsonl") else "csv")
        except OSError as e:
            raise ctx.err("arrival.trace", f"cannot read {full}: {e.strerror}") from None
        except ValueError as e:
            raise ctx.err("arrival.trace", f"{full}: {e}") from None
    try:
        return ArrivalSpec(**kw)
    except ValueError as e:
        raise ctx.err("arrival", str(e)) from None


TOP_KEYS = {
    "name",
    "description",
    "generator",
    "class",
    "hol",
    "session",
    "trace",
    "agent",
    "arrival",
    "num_requests",
    "duration_s",
    "warmup_requests",
    "seed",
    "endpoint",
    "slo",
    "ignore_eos",
    "gate",
}


def _classes(ctx: _Ctx, raw, gen: str) -> tuple[ClassSpec, ...]:
    if not isinstance(raw, list):
        raise ctx.err("class", "use [[class]] tables (an array of tables)")
    classes = []
    for i, c in enumerate(raw):
        key = f"class[{i}]"
        ctx.known(
            c,
            {
                "name",
                "weight",
                "input",
                "output",
                "source",
                "dataset",
                "reasoning",
                "priority",
                "system_prompts",
                "prefix_tokens",
                "prefix_share",
                "documents",
                "document_tokens",
                "document_skew",
            },
            f"{key}.",
        )
        source = c.get("source", "sharegpt" if gen == "sharegpt" else "synthetic")
        if source not in ("synthetic", "sharegpt"):
            raise ctx.err(f"{key}.source", f"{source!r} is not one of synthetic, sharegpt")
        inp = _length(ctx, c.get("input", "dataset" if source == "sharegpt" else 128), f"{key}.input")
        out = _length(ctx, c.get("output", "dataset" if source == "sharegpt" else 128), f"{key}.output")
        if source == "synthetic" and "dataset" in (inp.dist, out.dist):
            raise ctx.err(key, 'input/output = "dataset" needs source = "sharegpt"')
        reasoning = ctx.num(c, "reasoning", f"{key}.", float, 0.0, lo=0)
        if reasoning >= 1:
            raise ctx.err(f"{key}.reasoning", "a share of the response below 1 (e.g. 0.6: 60% thinking)")
        classes.append(
            ClassSpec(
                name=str(c.get("name", f"class{i}")),
                weight=ctx.num(c, "weight", f"{key}.", float, 1.0, lo=0),
                input=inp,
                output=out,
                source=source,
                dataset=c.get("dataset"),
                reasoning=reasoning,
                priority=ctx.num(c, "priority", f"{key}.", int, None),
                **_prefixes(ctx, c, key),
            )
        )
    if not classes:
        classes = (
            [ClassSpec("sharegpt", input=LengthDist("dataset"), output=LengthDist("dataset"), source="sharegpt")]
            if gen == "sharegpt"
            else [ClassSpec("random")]
        )
    if sum(c.weight for c in classes) <= 0:
        raise ctx.err("class", "weights must not all be zero")
    return tuple(classes)


def _prefixes(ctx: _Ctx, c: dict, key: str) -> dict:
    p = f"{key}."
    out = {
        "system_prompts": ctx.num(c, "system_prompts", p, int, 0, lo=0),
        "prefix_tokens": ctx.num(c, "prefix_tokens", p, int, 0, lo=0),
        "prefix_share": ctx.num(c, "prefix_share", p, float, 1.0, lo=0),
        "documents": ctx.num(c, "documents", p, int, 0, lo=0),
        "document_tokens": ctx.num(c, "document_tokens", p, int, 0, lo=0),
        "document_skew": ctx.num(c, "document_skew", p, float, 0.0, lo=0),
    }
    if out["prefix_share"] > 1:
        raise ctx.err(f"{key}.prefix_share", "a fraction of the requests, at most 1")
    if bool(out["system_prompts"]) != bool(out["prefix_tokens"]):
        raise ctx.err(key, "system_prompts and prefix_tokens go together")
    if bool(out["documents"]) != bool(out["document_tokens"]):
        raise ctx.err(key, "documents and document_tokens go together")
    if (out["system_prompts"] or out["documents"]) and c.get("source") == "sharegpt":
        raise ctx.err(key, "shared prefixes are for synthetic classes")
    return out


def _hol(ctx: _Ctx, h: dict) -> HolSpec:
    fields_ = {
        "long_input": int,
        "long_output": int,
        "short_input": int,
        "short_output": int,
        "shorts": int,
        "stagger_ms": float,
        "repeats": int,
        "period_s": float,
    }
    ctx.known(h, set(fields_), "hol.")
    dflt = HolSpec()
    return HolSpec(
        **{k: ctx.num(h, k, "hol.", t, getattr(dflt, k), lo=(0 if t is float else 1)) for k, t in fields_.items()}
    )


def _session(ctx: _Ctx, t: dict) -> SessionSpec:
    ctx.known(t, {f for f in SessionSpec.__dataclass_fields__}, "session.")
    d = SessionSpec()
    p = "session."
    think = _choice(ctx, t, "think", d.think, ("exponential", "constant"))
    source = _choice(ctx, t, "source", d.source, ("synthetic", "sharegpt"))
    lengths = {k: _length(ctx, t[k], p + k) if k in t else getattr(d, k) for k in ("turns", "user", "output")}
    return SessionSpec(
        sessions=ctx.num(t, "sessions", p, int, d.sessions, lo=1),
        think_s=ctx.num(t, "think_s", p, float, d.think_s, lo=0),
        think=think,
        source=source,
        dataset=t.get("dataset"),
        system_tokens=ctx.num(t, "system_tokens", p, int, 0, lo=0),
        max_concurrent=ctx.num(t, "max_concurrent", p, int, 0, lo=0),
        header=str(t.get("header", d.header)),
        **lengths,
    )


def _agent(ctx: _Ctx, t: dict, base_dir: str) -> AgentSpec:
    ctx.known(t, set(AgentSpec.__dataclass_fields__), "agent.")
    d, p = AgentSpec(), "agent."
    trace = t.get("trace")
    if trace is not None and not isinstance(trace, str):
        raise ctx.err("agent.trace", "expected a file path")
    fmt = t.get("trace_format")
    if fmt is not None and fmt not in ("goodbench", "weka"):
        raise ctx.err("agent.trace_format", f"{fmt!r} is not one of goodbench, weka")
    dists = ("fanout", "task", "output", "tool_result", "tool_ms")
    lengths = {k: _length(ctx, t[k], p + k) if k in t else getattr(d, k) for k in dists}
    tools = t.get("tools", d.tools)
    if not isinstance(tools, bool):
        raise ctx.err("agent.tools", "expected true or false")
    return AgentSpec(
        jobs=ctx.num(t, "jobs", p, int, d.jobs, lo=1),
        depth=ctx.num(t, "depth", p, int, d.depth, lo=2),
        think_s=ctx.num(t, "think_s", p, float, d.think_s, lo=0),
        think=_choice(ctx, t, "think", d.think, ("exponential", "constant")),
        system_tokens=ctx.num(t, "system_tokens", p, int, d.system_tokens, lo=0),
        max_concurrent=ctx.num(t, "max_concurrent", p, int, 0, lo=0),
        tools=tools,
        trace=trace if trace is None or os.path.isabs(trace) else os.path.join(base_dir, trace),
        trace_format=fmt,
        **lengths,
    )


def _trace(ctx: _Ctx, t: dict, base_dir: str) -> TraceSpec:
    ctx.known(t, {"path", "format", "speedup", "window", "max_output"}, "trace.")
    path = t.get("path")
    if not isinstance(path, str):
        raise ctx.err("trace.path", 'generator = trace needs path = "file.jsonl|csv"')
    fmt = t.get("format")
    if fmt is not None and fmt not in ("mooncake", "azure", "burstgpt"):
        raise ctx.err("trace.format", f"{fmt!r} is not one of mooncake, azure, burstgpt")
    return TraceSpec(
        path=path if os.path.isabs(path) else os.path.join(base_dir, path),
        format=fmt,
        speedup=ctx.num(t, "speedup", "trace.", float, 1.0, lo=1e-9),
        window=str(t["window"]) if "window" in t else None,
        max_output=ctx.num(t, "max_output", "trace.", int, None, lo=1),
    )


def _choice(ctx: _Ctx, doc: dict, key: str, default: str, allowed: tuple) -> str:
    v = doc.get(key, default)
    if v not in allowed:
        raise ctx.err(key, f"{v!r} is not one of {', '.join(allowed)}")
    return v


def parse_workload(text: str, path: str = "<workload>") -> WorkloadSpec:
    ctx = _Ctx(path)
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"{path}: not valid TOML: {e}") from None
    ctx.known(doc, TOP_KEYS, "")
    gen = _choice(ctx, doc, "generator", "synthetic", GENERATORS)
    endpoint = _choice(ctx, doc, "endpoint", "completions", ENDPOINTS)
    if endpoint not in MESSAGE_APIS and any(
        isinstance(c, dict) and c.get("reasoning") for c in doc.get("class", []) or []
    ):
        raise ctx.err("endpoint", 'classes with reasoning need endpoint = "chat", "responses" or "messages"')
    base_dir = os.path.dirname(os.path.abspath(path)) if os.path.exists(path) else os.getcwd()
    replay = gen == "agent" and "trace" in (doc.get("agent") or {})
    timed = replay and "rate" not in (doc.get("arrival") or {})  # a replay at its recorded arrivals
    first = "workload" if gen in ("hol", "trace") or timed else "poisson"
    arrival = _arrival(ctx, doc.get("arrival", {}), base_dir, first)
    if (
        arrival.kind == "closed"
        and gen in ("sessions", "agent")
        or (arrival.kind == "workload" and (gen == "sessions" or (gen == "agent" and not replay)))
    ):
        raise ctx.err(
            "arrival.process",
            f"{gen} arrive by an open process (poisson, gamma, constant, onoff, "
            "trace); cap them with session.max_concurrent or agent.max_concurrent",
        )
    try:
        slo = parse_slo(" ".join(f"{k}:{v}" for k, v in doc.get("slo", {}).items())) if doc.get("slo") else None
    except ValueError as e:
        raise ctx.err("slo", str(e)) from None
    n = ctx.num(doc, "num_requests", "", int, None, lo=1)
    dur = ctx.num(doc, "duration_s", "", float, None, lo=0)
    if n is None and dur is None and gen not in ("hol", "sessions", "trace", "agent"):
        n = DEFAULT_REQUESTS
    gate = doc.get("gate")
    if gate is not None and not isinstance(gate, dict):
        raise ctx.err("gate", "expected a table")
    return WorkloadSpec(
        name=str(doc.get("name", os.path.splitext(os.path.basename(path))[0])),
        description=str(doc.get("description", "")),
        generator=gen,
        classes=_classes(ctx, doc.get("class", []), gen),
        hol=_hol(ctx, doc.get("hol", {})) if gen == "hol" else None,
        session=_session(ctx, doc.get("session", {})) if gen == "sessions" else None,
        trace=_trace(ctx, doc.get("trace", {}), base_dir) if gen == "trace" else None,
        agent=_agent(ctx, doc.get("agent", {}), base_dir) if gen == "agent" else None,
        arrival=arrival,
        num_requests=n,
        duration_s=dur,
        warmup_requests=ctx.num(doc, "warmup_requests", "", int, 0, lo=0),
        seed=ctx.num(doc, "seed", "", int, 0),
        endpoint=endpoint,
        slo=slo,
        ignore_eos=bool(doc.get("ignore_eos", True)),
        gate=gate,
        path=path,
    )
