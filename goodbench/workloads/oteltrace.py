"""Agent jobs from OpenTelemetry GenAI spans (`[agent] trace_format = "otel"`): the traces an instrumented agent
framework exports (OTLP JSON: `resourceSpans` / `scopeSpans` / `spans`, one export per file or per line; or the
SDK console exporter's span objects), read by the GenAI semantic conventions:

- a model call is a span with `gen_ai.operation.name` chat / text_completion / generate_content (or any span with
  `gen_ai.usage.input_tokens` and `output_tokens`; the older `prompt_tokens` / `completion_tokens` too);
- an agent is an `invoke_agent` / `create_agent` span: its calls form a chain in start order (a call waits for
  the latest call of its agent that ended before it started), a sub-agent (an agent span inside another's)
  starts after its parent agent's call that ended last before it, and the parent's first call that starts
  after the sub-agent ended waits for it too (a join);
- the wait between a call's last parent ending and the call starting (tools, think time) is kept as the call's
  delay; each trace is a job, arriving at its first call's start (relative to the file's first);
- where the content allows (`gen_ai.input.messages`, captured by opt-in), each input message becomes a prompt
  segment keyed by its content, its tokens the message's characters at the trace's own characters-per-token,
  so calls repeating a conversation share their prompt prefix as a prefix cache would see it; else each
  call's prompt is its own. A call whose reply asked for a tool (`gen_ai.response.finish_reasons`) offers tools.

Returns the calls per job for agenttrace.py to build; pure but for reading the file."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime

from ..errors import InputError
from ..jsonlines import read_text
from ..limits import MAX_TOKENS

CALLS = {"chat", "text_completion", "generate_content"}
AGENTS = {"invoke_agent", "create_agent"}
IN_KEYS = ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens")
OUT_KEYS = ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens")
TOOL_STOPS = {"tool_calls", "tool_use", "function_call"}


def _value(v):
    """An OTLP AnyValue ({"stringValue": ...}, {"intValue": "12"}, ...) or a plain value, as Python."""
    if not isinstance(v, dict):
        return v
    for k in ("stringValue", "boolValue", "doubleValue"):
        if k in v:
            return v[k]
    if "intValue" in v:
        return int(v["intValue"])
    if "arrayValue" in v:
        return [_value(x) for x in (v["arrayValue"] or {}).get("values") or ()]
    return None


def _attrs(span: dict) -> dict:
    a = span.get("attributes") or {}
    if isinstance(a, list):  # OTLP: [{"key": ..., "value": {...}}]
        return {x.get("key"): _value(x.get("value")) for x in a if isinstance(x, dict)}
    return dict(a) if isinstance(a, dict) else {}


def _time(v, where: str) -> float:
    """Seconds from unix nanoseconds (OTLP, a number or its string) or an ISO time (the console exporter)."""
    try:
        if isinstance(v, str) and not v.isdigit():
            return datetime.fromisoformat(v.replace("Z", "+00:00")).timestamp()
        t = int(v) / 1e9
    except (TypeError, ValueError):
        raise InputError(f"{where}: a span's time {v!r} is not unix nanoseconds or an ISO time") from None
    if not 0 <= t < 1e11:
        raise InputError(f"{where}: a span's time {v!r} is out of range")
    return t


def _span(s: dict, where: str) -> dict:
    """One span as {trace, id, parent, start, end, attrs} (both exporters' spellings)."""
    ctx = s.get("context") or {}
    return {
        "trace": str(s.get("traceId") or ctx.get("trace_id") or ""),
        "id": str(s.get("spanId") or ctx.get("span_id") or ""),
        "parent": str(s.get("parentSpanId") or s.get("parent_id") or ""),
        "start": _time(s.get("startTimeUnixNano", s.get("start_time")), where),
        "end": _time(s.get("endTimeUnixNano", s.get("end_time")), where),
        "attrs": _attrs(s),
    }


def _spans_of(doc, where: str) -> list[dict]:
    if isinstance(doc, list):
        return [x for d in doc for x in _spans_of(d, where)]
    if not isinstance(doc, dict):
        return []
    if "resourceSpans" in doc:
        return [
            _span(s, where)
            for rs in doc.get("resourceSpans") or ()
            for ss in (rs or {}).get("scopeSpans") or ()
            for s in (ss or {}).get("spans") or ()
            if isinstance(s, dict)
        ]
    return [_span(doc, where)] if ("spanId" in doc or "context" in doc) else []


def read_spans(path: str) -> list[dict]:
    text = read_text(path, "the OpenTelemetry trace", "OTLP JSON (resourceSpans) or span objects, one per line")
    try:
        docs = [json.loads(text)]
    except ValueError:
        docs = []
        for i, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    docs.append(json.loads(line))
                except ValueError:
                    raise InputError(f"{path}:{i}: not JSON") from None
    except RecursionError:
        raise InputError(f"{path}: JSON nested too deep to be a trace") from None
    return _spans_of(docs, path)


def _tokens(a: dict, keys: tuple, where: str) -> int | None:
    v = next((a[k] for k in keys if a.get(k) is not None), None)
    if v is None:
        return None
    if type(v) is not int or not 0 <= v <= MAX_TOKENS:
        raise InputError(f"{where}: {keys[0]} must be an integer from 0 to {MAX_TOKENS:,}, got {v!r}")
    return v


def _is_call(s: dict, where: str) -> bool:
    op = s["attrs"].get("gen_ai.operation.name")
    has = _tokens(s["attrs"], IN_KEYS, where) is not None and _tokens(s["attrs"], OUT_KEYS, where) is not None
    return has and (op in CALLS or op is None)


def _agent_of(s: dict, by_id: dict) -> str:
    """The nearest enclosing agent span's id ('' : the trace's root)."""
    p, seen = by_id.get(s["parent"]), 0
    while p is not None and seen < 10_000:
        if p["attrs"].get("gen_ai.operation.name") in AGENTS:
            return p["id"]
        p, seen = by_id.get(p["parent"]), seen + 1
    return ""


def _messages(a: dict) -> list[str] | None:
    raw = a.get("gen_ai.input.messages")
    try:
        msgs = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return None
    if not isinstance(msgs, list) or not msgs:
        return None
    return [json.dumps(m, sort_keys=True, separators=(",", ":")) for m in msgs]


def _segments(call: dict, trace: str, chars_per_token: float | None) -> tuple:
    """The call's prompt: a segment per input message (keyed by its content) where the span carries them, the
    rest (or all of it) its own."""
    n, out = call["in"], []
    for m in call["messages"] or () if chars_per_token else ():
        take = min(max(1, round(len(m) / chars_per_token)), n - sum(k for _, k in out))
        if take <= 0:
            break
        out.append((("otel-message", hashlib.blake2b(m.encode(), digest_size=8).hexdigest()), take))
    left = n - sum(k for _, k in out)
    return tuple(out) + (((("otel-call", trace, call["id"]), left),) if left > 0 else ())


def _calls_of(trace: str, spans: list[dict], path: str) -> list[dict]:
    """A trace's model calls in start order with their parents (indices), delays, lengths and segments."""
    by_id = {s["id"]: s for s in spans}
    calls = sorted((s for s in spans if _is_call(s, path)), key=lambda s: (s["start"], s["end"], s["id"]))
    agents = {s["id"]: s for s in spans if s["attrs"].get("gen_ai.operation.name") in AGENTS}
    for c in calls:
        c["agent"], c["in"] = _agent_of(c, by_id), max(1, _tokens(c["attrs"], IN_KEYS, path))
        c["messages"] = _messages(c["attrs"])
    out: list[dict] = []
    for k, c in enumerate(calls):
        before = [j for j in range(k) if calls[j]["end"] <= c["start"]]
        mine = [j for j in before if calls[j]["agent"] == c["agent"]]
        parents = set(mine[-1:])
        if c["agent"] and not mine and c["agent"] in agents:  # a sub-agent's first call: after its parent's
            outer = _agent_of(agents[c["agent"]], by_id)
            up = [j for j in before if calls[j]["agent"] == outer]
            parents |= set(up[-1:])
        for sub in {calls[j]["agent"] for j in before} - {c["agent"], ""}:  # joins: sub-agents that ended before
            a = agents.get(sub)
            if a is not None and _agent_of(a, by_id) == c["agent"] and a["end"] <= c["start"]:
                last = [j for j in before if calls[j]["agent"] == sub]
                if last and not any(calls[j]["start"] >= a["end"] for j in mine):
                    parents.add(last[-1])
        ps = sorted(parents)
        reasons = c["attrs"].get("gen_ai.response.finish_reasons") or ()
        out.append({
            "parents": ps,
            "out": max(1, _tokens(c["attrs"], OUT_KEYS, path)),
            "delay": max(0.0, c["start"] - max((calls[j]["end"] for j in ps), default=c["start"])),
            "start": c["start"], "in": c["in"], "id": c["id"], "messages": c["messages"],
            "tools": bool(TOOL_STOPS & set(reasons if isinstance(reasons, list) else [reasons])),
        })  # fmt: skip
    chars = sum(len(m) for x in out for m in x["messages"] or ())
    cpt = chars / sum(x["in"] for x in out if x["messages"]) if chars else None
    for x in out:
        x["segs"] = _segments(x, trace, cpt)
    return out


def otel_jobs(path: str) -> list[tuple[str, float, list[dict]]]:
    """(job name, arrival s from the file's first call, its calls) per trace that holds model calls."""
    by_trace: dict[str, list] = {}
    for s in read_spans(path):
        by_trace.setdefault(s["trace"], []).append(s)
    jobs = [(t, _calls_of(t, spans, path)) for t, spans in by_trace.items()]
    jobs = [(t, calls) for t, calls in jobs if calls]
    if not jobs:
        raise InputError(f"{path}: no GenAI model calls (spans with gen_ai.usage input and output tokens)")
    t0 = min(calls[0]["start"] for _, calls in jobs)
    return sorted(((t, calls[0]["start"] - t0, calls) for t, calls in jobs), key=lambda j: j[1])
