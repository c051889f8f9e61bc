"""A workload TOML file -> WorkloadSpec (spec.py), every key checked: errors name the file and the key
(`InputError('FILE: key: message')`), unknown keys get the closest known one. Every number is checked
against its range in limits.py (NaN and infinities are refused but where "inf" is a rate), so nothing
downstream meets a count no machine can hold or a duration that never ends."""

from __future__ import annotations

import math
import os
from dataclasses import replace

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from ..arrivals import KINDS as ARRIVAL_KINDS, ArrivalSpec, parse_trace
from ..errors import InputError, UsageError, warn
from ..gating import GateSpec
from ..limits import MAX_UPFRONT_REQUESTS, problem
from ..records import parse_slo
from .lora import LoraSpec, lora_table
from .media import parse_media
from .prefixparse import prefixes
from .spec import (
    AGENT_TRACE_FORMATS,
    DEFAULT_REQUESTS,
    DISTS,
    ENDPOINTS,
    GENERATORS,
    MESSAGE_APIS,
    TRACE_FORMATS,
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

    def num(self, table: dict, key: str, prefix: str, kind=float, default=None, limit=None):
        """table[key] as kind, inside limits.LIMITS[limit] (default when absent)."""
        if key not in table:
            return default
        v = table[key]
        if isinstance(v, str) and v.strip().lower() == "inf" and limit == "rate":
            return math.inf
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise self.err(f"{prefix}{key}", f"expected a number, got {v!r}")
        if isinstance(v, float) and not math.isfinite(v) and not (limit == "rate" and v == math.inf):
            raise self.err(f"{prefix}{key}", f"must be a finite number, got {v}")
        if kind is int and (isinstance(v, float) and not v.is_integer()):
            raise self.err(f"{prefix}{key}", f"expected a whole number, got {v!r}")
        why = problem(limit, v) if limit else None
        if why:
            raise self.err(f"{prefix}{key}", why)
        return kind(v)

    def known(self, table: dict, allowed: set, prefix: str):
        for k in table:
            if k not in allowed:
                raise self.err(f"{prefix}{k}", f"unknown key; allowed: {', '.join(sorted(allowed))}")

    def table(self, doc: dict, key: str) -> dict:
        """doc[key] when it is a TOML table ({} when absent)."""
        v = doc.get(key, {})
        if not isinstance(v, dict):
            raise self.err(key, f"expected a table ([{key}]), got {v!r}"[:200])
        return v

    def text(self, doc: dict, key: str, default=None):
        v = doc.get(key, default)
        if v is not None and not isinstance(v, str):
            raise self.err(key, f"expected a string, got {v!r}"[:200])
        return v


def _length(ctx: _Ctx, v, key: str) -> LengthDist:
    if isinstance(v, bool):
        raise ctx.err(key, f"expected a token count or a table with dist = one of {', '.join(DISTS)}")
    if isinstance(v, int):
        why = problem("tokens", v)
        if why:
            raise ctx.err(key, f"token count {why}")
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
    lo = ctx.num(v, "min", p, int, 1, limit="tokens")
    hi = ctx.num(v, "max", p, int, 1_000_000, limit="tokens")
    if lo > hi:
        raise ctx.err(key, f"min ({lo}) > max ({hi})")
    d = LengthDist(dist, min=lo, max=hi)
    if dist == "constant":
        val = ctx.num(v, "value", p, int, None, limit="tokens")
        if val is None:
            raise ctx.err(f"{key}.value", "required for dist = constant")
        return replace(d, value=val)
    if dist == "uniform":
        if "min" not in v or "max" not in v:
            raise ctx.err(key, "dist = uniform needs min and max")
        return d
    if dist == "normal":
        mean, std = (
            ctx.num(v, "mean", p, float, None, limit="tokens"),
            ctx.num(v, "std", p, float, 0.0, limit="tokens_or_zero"),
        )
        if mean is None:
            raise ctx.err(f"{key}.mean", "required for dist = normal")
        return replace(d, mean=mean, std=std)
    if dist == "lognormal":
        med, sig = (
            ctx.num(v, "median", p, float, None, limit="tokens"),
            ctx.num(v, "sigma", p, float, None, limit="sigma"),
        )
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
        rate=ctx.num(a, "rate", p, float, 1.0, limit="rate"),
        burstiness=ctx.num(a, "burstiness", p, float, 1.0, limit="burstiness"),
        ramp_up_s=ctx.num(a, "ramp_up_s", p, float, 0.0, limit="seconds"),
        on_rate=ctx.num(a, "on_rate", p, float, 0.0, limit="rate_or_zero"),
        off_rate=ctx.num(a, "off_rate", p, float, 0.0, limit="rate_or_zero"),
        on_mean_s=ctx.num(a, "on_mean_s", p, float, 1.0, limit="positive_seconds"),
        off_mean_s=ctx.num(a, "off_mean_s", p, float, 1.0, limit="positive_seconds"),
        time_scale=ctx.num(a, "time_scale", p, float, 1.0, limit="scale"),
        concurrency=ctx.num(a, "concurrency", p, int, 0, limit="users_or_zero"),
        think_time_s=ctx.num(a, "think_time_s", p, float, 0.0, limit="seconds"),
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
    "requires",
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
    "lora",
}


CLASS_KEYS = set(
    "name weight input output source dataset reasoning priority system_prompts prefix_tokens prefix_share "
    "documents document_tokens document_skew hit_rate primed_prefixes hit_block images image_size image_dir audio_s".split()
)


def _classes(ctx: _Ctx, raw, gen: str) -> tuple[ClassSpec, ...]:
    if not isinstance(raw, list):
        raise ctx.err("class", "use [[class]] tables (an array of tables)")
    classes = []
    for i, c in enumerate(raw):
        key = f"class[{i}]"
        if not isinstance(c, dict):
            raise ctx.err(key, f"expected a [[class]] table, got {c!r}"[:200])
        ctx.known(c, CLASS_KEYS, f"{key}.")
        source = c.get("source", "sharegpt" if gen == "sharegpt" else "synthetic")
        if source not in ("synthetic", "sharegpt"):
            raise ctx.err(f"{key}.source", f"{source!r} is not one of synthetic, sharegpt")
        inp = _length(ctx, c.get("input", "dataset" if source == "sharegpt" else 128), f"{key}.input")
        out = _length(ctx, c.get("output", "dataset" if source == "sharegpt" else 128), f"{key}.output")
        if source == "synthetic" and "dataset" in (inp.dist, out.dist):
            raise ctx.err(key, 'input/output = "dataset" needs source = "sharegpt"')
        reasoning = ctx.num(c, "reasoning", f"{key}.", float, 0.0, limit="fraction")
        if reasoning >= 1:
            raise ctx.err(f"{key}.reasoning", "a share of the response below 1 (e.g. 0.6: 60% thinking)")
        classes.append(
            ClassSpec(
                name=str(c.get("name", f"class{i}")),
                weight=ctx.num(c, "weight", f"{key}.", float, 1.0, limit="weight"),
                input=inp,
                output=out,
                source=source,
                dataset=ctx.text(c, "dataset"),
                reasoning=reasoning,
                priority=ctx.num(c, "priority", f"{key}.", int, None, limit="priority"),
                media=_media(ctx, c, key),
                **prefixes(ctx, c, key),
            )
        )
    if not classes:
        classes = (
            [ClassSpec("sharegpt", input=LengthDist("dataset"), output=LengthDist("dataset"), source="sharegpt")]
            if gen == "sharegpt"
            else [ClassSpec("random")]
        )
    _check_weights(ctx, classes)
    return tuple(classes)


def _check_weights(ctx: _Ctx, classes: list) -> None:
    """All zero is an error; fractions that do not sum to 1 are rescaled, which the user is told."""
    total = sum(c.weight for c in classes)
    if total <= 0:
        raise ctx.err("class", "weights must not all be zero")
    if len(classes) > 1 and all(c.weight <= 1 for c in classes) and abs(total - 1) > 1e-6:
        shares = ", ".join(f"{c.name} {c.weight / total:.1%}" for c in classes)
        warn(
            f"{ctx.path}: class weights {' + '.join(f'{c.weight:g}' for c in classes)} = {total:g}, not 1: "
            f"used as ratios ({shares})"
        )


def _hol(ctx: _Ctx, h: dict) -> HolSpec:
    fields_ = {
        "long_input": (int, "tokens"),
        "long_output": (int, "tokens"),
        "short_input": (int, "tokens"),
        "short_output": (int, "tokens"),
        "shorts": (int, "requests"),
        "stagger_ms": (float, "milliseconds"),
        "repeats": (int, "requests"),
        "period_s": (float, "seconds"),
    }
    ctx.known(h, set(fields_), "hol.")
    dflt = HolSpec()
    hol = HolSpec(**{k: ctx.num(h, k, "hol.", t, getattr(dflt, k), limit=lim) for k, (t, lim) in fields_.items()})
    if hol.repeats * (1 + hol.shorts) > MAX_UPFRONT_REQUESTS:
        raise ctx.err("hol", f"repeats x (1 + shorts) is more than {MAX_UPFRONT_REQUESTS:,} requests")
    return hol


def _session(ctx: _Ctx, t: dict) -> SessionSpec:
    ctx.known(t, {f for f in SessionSpec.__dataclass_fields__}, "session.")
    d = SessionSpec()
    p = "session."
    think = _choice(ctx, t, "think", d.think, ("exponential", "constant"))
    source = _choice(ctx, t, "source", d.source, ("synthetic", "sharegpt"))
    lengths = {k: _length(ctx, t[k], p + k) if k in t else getattr(d, k) for k in ("turns", "user", "output")}
    return SessionSpec(
        sessions=ctx.num(t, "sessions", p, int, d.sessions, limit="requests"),
        think_s=ctx.num(t, "think_s", p, float, d.think_s, limit="seconds"),
        think=think,
        source=source,
        dataset=ctx.text(t, "dataset"),
        system_tokens=ctx.num(t, "system_tokens", p, int, 0, limit="tokens_or_zero"),
        max_concurrent=ctx.num(t, "max_concurrent", p, int, 0, limit="users_or_zero"),
        header=str(t.get("header", d.header)),
        **lengths,
    )


def _agent(ctx: _Ctx, t: dict, base_dir: str) -> AgentSpec:
    ctx.known(t, set(AgentSpec.__dataclass_fields__), "agent.")
    d, p = AgentSpec(), "agent."
    trace = ctx.text(t, "trace")
    fmt = t.get("trace_format")
    if fmt is not None and fmt not in AGENT_TRACE_FORMATS:
        raise ctx.err("agent.trace_format", f"{fmt!r} is not one of {', '.join(AGENT_TRACE_FORMATS)}")
    dists = ("fanout", "task", "output", "tool_result", "tool_ms")
    lengths = {k: _length(ctx, t[k], p + k) if k in t else getattr(d, k) for k in dists}
    tools = t.get("tools", d.tools)
    if not isinstance(tools, bool):
        raise ctx.err("agent.tools", "expected true or false")
    return AgentSpec(
        jobs=ctx.num(t, "jobs", p, int, d.jobs, limit="requests"),
        depth=ctx.num(t, "depth", p, int, d.depth, limit="agent_depth"),
        think_s=ctx.num(t, "think_s", p, float, d.think_s, limit="seconds"),
        think=_choice(ctx, t, "think", d.think, ("exponential", "constant")),
        system_tokens=ctx.num(t, "system_tokens", p, int, d.system_tokens, limit="tokens_or_zero"),
        max_concurrent=ctx.num(t, "max_concurrent", p, int, 0, limit="users_or_zero"),
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
    if fmt is not None and fmt not in TRACE_FORMATS:
        raise ctx.err("trace.format", f"{fmt!r} is not one of {', '.join(TRACE_FORMATS)}")
    return TraceSpec(
        path=path if os.path.isabs(path) else os.path.join(base_dir, path),
        format=fmt,
        speedup=ctx.num(t, "speedup", "trace.", float, 1.0, limit="scale"),
        window=str(t["window"]) if "window" in t else None,
        max_output=ctx.num(t, "max_output", "trace.", int, None, limit="tokens"),
    )


def _listed(v) -> list:
    return v if isinstance(v, list) else []


def _choice(ctx: _Ctx, doc: dict, key: str, default: str, allowed: tuple) -> str:
    v = doc.get(key, default)
    if v not in allowed:
        raise ctx.err(key, f"{v!r} is not one of {', '.join(allowed)}")
    return v


def _arrival_of(ctx: _Ctx, doc: dict, gen: str, base_dir: str) -> ArrivalSpec:
    """The [arrival] table: trace and HOL generators (and an agent trace without a rate) time their
    own requests; sessions and agent jobs arrive by an open process."""
    replay = gen == "agent" and "trace" in ctx.table(doc, "agent")
    timed = replay and "rate" not in ctx.table(doc, "arrival")  # a replay at its recorded arrivals
    first = "workload" if gen in ("hol", "trace") or timed else "poisson"
    arrival = _arrival(ctx, ctx.table(doc, "arrival"), base_dir, first)
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
    return arrival


def parse_workload(text: str, path: str = "<workload>") -> WorkloadSpec:
    ctx = _Ctx(path)
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"{path}: not valid TOML: {e}") from None
    ctx.known(doc, TOP_KEYS, "")
    gen = _choice(ctx, doc, "generator", "synthetic", GENERATORS)
    endpoint = _choice(ctx, doc, "endpoint", "completions", ENDPOINTS)
    classes = doc.get("class", [])
    if endpoint not in MESSAGE_APIS and any(isinstance(c, dict) and c.get("reasoning") for c in _listed(classes)):
        raise ctx.err("endpoint", 'classes with reasoning need endpoint = "chat", "responses" or "messages"')
    base_dir = os.path.dirname(os.path.abspath(path)) if os.path.exists(path) else os.getcwd()
    arrival = _arrival_of(ctx, doc, gen, base_dir)
    try:
        slo = parse_slo(" ".join(f"{k}:{v}" for k, v in ctx.table(doc, "slo").items())) if doc.get("slo") else None
    except ValueError as e:
        raise ctx.err("slo", str(e)) from None
    n = ctx.num(doc, "num_requests", "", int, None, limit="num_prompts")
    dur = ctx.num(doc, "duration_s", "", float, None, limit="positive_seconds")
    if n is not None and dur is None and n > MAX_UPFRONT_REQUESTS:
        raise ctx.err("num_requests", f"more than {MAX_UPFRONT_REQUESTS:,} requests to build up front; add duration_s")
    if n is None and dur is None and gen not in ("hol", "sessions", "trace", "agent"):
        n = DEFAULT_REQUESTS
    gate = doc.get("gate")
    if gate is not None and not isinstance(gate, dict):
        raise ctx.err("gate", "expected a table")
    if gate:
        try:
            GateSpec.from_table(gate)  # checked now, not after the run it would judge
        except UsageError as e:
            raise InputError(f"{path}: {e}") from None
    requires = _requires(ctx, doc.get("requires"))
    return WorkloadSpec(
        name=str(doc.get("name", os.path.splitext(os.path.basename(path))[0])),
        description=str(doc.get("description", "")),
        generator=gen,
        classes=_classes(ctx, doc.get("class", []), gen),
        hol=_hol(ctx, ctx.table(doc, "hol")) if gen == "hol" else None,
        session=_session(ctx, ctx.table(doc, "session")) if gen == "sessions" else None,
        trace=_trace(ctx, ctx.table(doc, "trace"), base_dir) if gen == "trace" else None,
        agent=_agent(ctx, ctx.table(doc, "agent"), base_dir) if gen == "agent" else None,
        arrival=arrival,
        num_requests=n,
        duration_s=dur,
        warmup_requests=ctx.num(doc, "warmup_requests", "", int, 0, limit="count_or_zero"),
        seed=ctx.num(doc, "seed", "", int, 0, limit="seed"),
        endpoint=endpoint,
        slo=slo,
        ignore_eos=bool(doc.get("ignore_eos", True)),
        gate=gate,
        path=path,
        requires=requires,
        lora=_lora(ctx, doc.get("lora"), gen),
    )


def _media(ctx: _Ctx, c: dict, key: str):
    try:
        return parse_media(c, key, lambda v, k: _length(ctx, v, k))
    except UsageError as e:
        raise ctx.err(key, str(e)) from None


def _lora(ctx: _Ctx, t, gen: str) -> LoraSpec | None:
    try:
        return lora_table(t, gen)
    except UsageError as e:
        raise ctx.err("lora", str(e)) from None


REQUIRES = {"scheduling_policy": ("fcfs", "priority"), "prefix_caching": (True, False), "endpoint": ENDPOINTS}


def _requires(ctx: _Ctx, t) -> dict | None:
    """[requires]: what the server must do (docs/workloads.md); the run checks what it can."""
    if t is None:
        return None
    if not isinstance(t, dict):
        raise ctx.err("requires", "expected a table")
    ctx.known(t, set(REQUIRES), "requires.")
    for k, v in t.items():
        if v not in REQUIRES[k]:
            raise ctx.err(f"requires.{k}", f"{v!r} is not one of {', '.join(map(str, REQUIRES[k]))}")
    return dict(t) or None
