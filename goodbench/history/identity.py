"""A run's place in a history: its identity (what makes two runs comparable over time) and the metrics a
catalogue keeps, read from run.json and summary.json. Pure.

The identity is the workload (its name and a hash of its requests, arrivals and count, without the
seed: runs of other seeds draw from the same distributions, which is the noise a series absorbs), the
model, the SLO, the server's kind (vllm, sglang, goodbench's engine, the simulator, ...), the GPUs, for
the reference engine its configuration (also the one `run --via locust` started, which reaches run.json
in its server block), and how the load was driven where the workload does not say it (a locust closed
loop of N users on an open-loop workload, a --max-concurrency cap): the loop, keyed only when there is
one, so the keys of runs driven as their workload says are those they always had. The server's version,
the commit, goodbench's version and the labels are deliberately not part of it: they are what changes
along a series."""

from __future__ import annotations

import hashlib
import json
import math

from ..engine.config import EngineConfig
from ..records import format_slo

# name -> (where in summary.json, unit, which way is better)
METRICS: dict[str, tuple[tuple[str, ...], str, str]] = {
    "goodput": (("goodput",), "req/s", "higher"),
    "slo_attainment": (("slo_attainment",), "fraction", "higher"),
    "request_throughput": (("request_throughput",), "req/s", "higher"),
    "output_throughput": (("output_throughput",), "tok/s", "higher"),
    "achieved_rate": (("achieved_rate",), "req/s", "higher"),
    "failed_fraction": ((), "fraction", "lower"),  # requests.failed / requests.issued
    "goodput_per_gpu": (("cost", "goodput_per_gpu"), "req/s", "higher"),
    "usd_per_million_output_tokens": (("cost", "usd_per_million_output_tokens"), "$", "lower"),
    "prefix_cache_hit_rate": (("prefix_cache", "hit_rate"), "fraction", "higher"),
    "duration_s": (("duration_s",), "s", "lower"),
    "tok_s_per_user": (("tok_s_per_user",), "tok/s", "higher"),  # the frontier's axes (metrics/frontier.py)
    "output_tok_s_per_gpu": (("output_tok_s_per_gpu",), "tok/s", "higher"),
    "good_output_tok_s_per_gpu": (("good_output_tok_s_per_gpu",), "tok/s", "higher"),
    "joules_per_good_token": (("energy", "joules_per_good_token"), "J", "lower"),  # live energy (metrics/energy.py)
    "good_tokens_per_kwh": (("energy", "good_tokens_per_kwh"), "tok/kWh", "higher"),
    "avg_power_w_per_gpu": (("energy", "avg_power_w_per_gpu"), "W", "lower"),
}
for _m in ("ttft", "tpot", "itl", "e2el", "ttfo", "schedule_lag"):
    for _q in ("p50", "p90", "p95", "p99", "mean", "max"):
        METRICS[f"{_m}_{_q}"] = ((f"{_m}_ms", _q), "ms", "lower")

# the metrics the dashboard draws and gate --history checks by default
HEADLINE = ("goodput", "slo_attainment", "output_throughput", "ttft_p99", "tpot_p99", "itl_p99", "e2el_p99")
IDENTITY_FIELDS = ("workload", "workload_key", "model", "slo", "server", "gpu", "engine")
# with them in the catalogue: the loop (keyed where not ""), and the knobs (shown, not keyed: JSON of the
# engine's non-default knobs and the workload's settings, which name what tells two series apart)
SERIES_FIELDS = IDENTITY_FIELDS + ("loop", "knobs")
# not part of what a run measures: where the file was, its prose, the seed, the gate, the SLO (kept apart)
_NOT_WORKLOAD = {"path", "description", "seed", "gate", "slo", "source", "caveats", "aggregate_only"}
_ENGINE_DEFAULTS = EngineConfig().to_dict()
_DERIVED = {"num_gpu_blocks"}  # resolved from GPU memory and the cost model's tables, not chosen


def metric_info(name: str) -> tuple[str, str]:
    """(unit, "higher" | "lower") of a catalogue metric."""
    return METRICS[name][1], METRICS[name][2]


def metrics_of(summary: dict | None) -> dict[str, float]:
    """Every finite catalogue metric the summary holds."""
    if not summary:
        return {}
    out: dict[str, float] = {}
    for name, (path, _, _) in METRICS.items():
        v = _dig(summary, path) if path else _failed(summary)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            out[name] = float(v)
    return out


def _dig(d, path):
    for k in path:
        d = d.get(k) if isinstance(d, dict) else None
    return d


def _failed(summary: dict):
    req = summary.get("requests") or {}
    issued = req.get("issued")
    return req.get("failed", 0) / issued if issued else None


def server_of(meta: dict) -> tuple[str, str | None]:
    """(kind, version) of what served the run."""
    mode, engine, srv = meta.get("mode"), meta.get("engine"), meta.get("server") or {}
    if mode == "simulate":
        return "goodbench-sim", meta.get("goodbench_version")
    if srv.get("name"):
        return str(srv["name"]), srv.get("version")
    if engine:
        return "goodbench", meta.get("goodbench_version")
    if mode == "imported":
        return "unknown", None
    return "unknown", srv.get("version")


def gpu_of(meta: dict) -> str:
    """ "h100-sxm x1" from the GPUs a simulated or auto-started engine used, else the `gpu` label."""
    gpus = meta.get("gpus")
    engine = meta.get("engine") or {}
    if not gpus and engine.get("gpu"):
        gpus = {engine["gpu"]: engine.get("tensor_parallel_size") or 1}
    if gpus:
        return " + ".join(f"{k} x{v}" for k, v in sorted(gpus.items()))
    return str((meta.get("labels") or {}).get("gpu") or "")


def engine_key(engine: dict | None) -> str:
    """The reference engine's configuration as it bears on results: the knobs that differ from
    EngineConfig's defaults (so a goodbench upgrade that adds a knob keeps the series), without the
    KV-cache size derived from memory."""
    if not engine:
        return ""
    kept = {k: v for k, v in engine.items() if k not in _DERIVED and _ENGINE_DEFAULTS.get(k, object()) != v}
    return _hash(kept)


def _hash(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:12]


def workload_key(workload: dict | None) -> str:
    """The workload's requests and arrivals, whatever its seed, file or description."""
    return _hash({k: v for k, v in (workload or {}).items() if k not in _NOT_WORKLOAD})


def engine_of(meta: dict) -> dict | None:
    """The reference engine's config: run.json's engine, or (run --via locust, whose locust master writes
    run.json) the one its server block carries."""
    return meta.get("engine") or (meta.get("server") or {}).get("engine") or None


def loop_of(meta: dict) -> str:
    """How the load was driven where the workload does not say it ("": as its arrivals say). A closed
    loop on an open-loop workload (locust's users) and a cap on requests in flight (--max-concurrency)
    measure another thing than the workload's schedule does."""
    wl = meta.get("workload") or {}
    driven = (meta.get("server") or {}).get("driven_as") or {}
    parts = []
    if meta.get("mode") == "closed" and (wl.get("arrival") or {}).get("kind") != "closed":
        users = driven.get("users")
        via = driven.get("via") or ("locust" if str(meta.get("label") or "").startswith("locust") else "")
        parts.append("closed loop" + (f" x{users}" if users else "") + (f" ({via})" if via else ""))
    cap = meta.get("max_concurrency")
    own = [(wl.get(k) or {}).get("max_concurrent") for k in ("session", "agent")]
    if cap and meta.get("mode") == "open" and cap not in own:
        parts.append(f"max {cap} in flight")
    return ", ".join(parts)


def knobs_of(meta: dict) -> dict:
    """What may tell two series apart, readably: the engine's non-default knobs (as engine_key keeps
    them) and the workload's settings (scalars, one level deep: arrival.rate, num_requests, ...)."""
    eng = engine_of(meta) or {}
    out = {k: v for k, v in eng.items() if k not in _DERIVED and _ENGINE_DEFAULTS.get(k, object()) != v}
    for k, v in (meta.get("workload") or {}).items():
        if k in _NOT_WORKLOAD or k == "name":
            continue
        items = v.items() if isinstance(v, dict) else [("", v)]
        out |= {f"{k}.{sub}" if sub else k: x for sub, x in items if isinstance(x, (str, int, float, bool))}
    return out


def identity_of(meta: dict) -> dict:
    """The fields that make runs comparable (IDENTITY_FIELDS, and the loop where there is one) and their
    key; the knobs beside them (shown, not keyed)."""
    wl = meta.get("workload") or {}
    server, _ = server_of(meta)
    ident = {
        "workload": str(wl.get("name") or ""),
        "workload_key": workload_key(wl),
        "model": str((meta.get("target") or {}).get("model") or ""),
        "slo": format_slo(meta.get("slo")),
        "server": server,
        "gpu": gpu_of(meta),
        "engine": engine_key(engine_of(meta)),
        "loop": loop_of(meta),
    }
    ident["key"] = _hash([ident[k] for k in IDENTITY_FIELDS] + ([ident["loop"]] if ident["loop"] else []))
    ident["knobs"] = json.dumps(knobs_of(meta), sort_keys=True, default=str)
    return ident


def describe(ident: dict) -> str:
    """One line naming an identity: 'mixed-long-short · llama-3.1-8b · vllm · h100-sxm x1 · ttft:500', then
    how it was driven (closed loop x16 (locust)) and what tells it from its peers (tell_apart)."""
    parts = [ident.get("workload"), ident.get("model"), ident.get("server"), ident.get("gpu")]
    slo = ident.get("slo")
    line = " · ".join(str(p) for p in parts if p) + (f" · {slo}" if slo and slo != "none" else "")
    return " · ".join(p for p in (line, ident.get("loop"), ident.get("apart")) if p)


def tell_apart(idents: list[dict]) -> None:
    """Set each identity's "apart": the knobs whose values differ among the identities that describe()
    alike (sweep cells: max_num_batched_tokens=256), or its key's start where no knob shows it; "" where
    its description is its own."""
    groups: dict = {}
    for ident in idents:
        ident.pop("apart", None)
        groups.setdefault(describe(ident), []).append(ident)
    for peers in groups.values():
        if len(peers) < 2:
            continue
        knobs = [_knobs(p) for p in peers]
        differ = sorted({k for kn in knobs for k in kn if len({json.dumps(x.get(k), default=str) for x in knobs}) > 1})
        for ident, kn in zip(peers, knobs):
            shown = ", ".join(f"{k}={kn.get(k, 'default')}" for k in differ)
            ident["apart"] = shown or f"identity {str(ident.get('key', ''))[:8]}"


def _knobs(ident: dict) -> dict:
    try:
        v = json.loads(ident.get("knobs") or "{}")
    except ValueError:
        return {}
    return v if isinstance(v, dict) else {}


def run_row(meta: dict, summary: dict | None) -> dict:
    """Everything the catalogue keeps about one run (its path is the caller's)."""
    ident = identity_of(meta)
    server, version = server_of(meta)
    prov = meta.get("provenance") or {}
    target = meta.get("target") or {}
    return {
        "run_id": str(meta.get("run_id") or ""),
        "started": str(meta.get("started_wall") or ""),
        "finished": meta.get("finished_wall"),
        "mode": str(meta.get("mode") or ""),
        "identity": ident["key"],
        **{k: ident[k] for k in SERIES_FIELDS},
        "workload_hash": str(meta.get("workload_hash") or ""),
        "server_version": version,
        "endpoint": str(target.get("endpoint") or ""),
        "base_url": str(target.get("base_url") or ""),
        "label": str(meta.get("label") or ""),
        "goodbench_version": str(meta.get("goodbench_version") or ""),
        "commit": prov.get("commit"),
        "branch": prov.get("branch"),
        "build": prov.get("build"),
        "build_url": prov.get("build_url"),
        "labels": {str(k): str(v) for k, v in (meta.get("labels") or {}).items()},
        "valid": None if not summary else summary.get("valid"),
        "interrupted": bool(meta.get("interrupted")),
        "metrics": metrics_of(summary),
    }
