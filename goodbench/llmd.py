"""The llm-d Benchmark Report (schema v0.2.1, llm-d/llm-d-benchmark, llmdbenchmark/analysis/
benchmark_report/schema_v0_2_1.py): a goodbench run as a report, and a report (v0.1, v0.2 or v0.2.1)
as a run's metadata and summary. The mapping is pure (dicts in, dicts out); the distributions come
from the run's records; interop.py makes the run directory and picks the file name.

The field mapping is in docs/history.md. What the schema has no field for: goodbench's goodput and SLO
attainment go to results.observability as `goodbench_goodput` and `goodbench_slo_attainment` (the
one block the schema leaves open to extra metric keys), and run.json itself to
scenario.load.native.config (the load generator's configuration in its own format), so a report
goodbench wrote imports back with its identity, labels and SLO."""

from __future__ import annotations

import hashlib
import json
import math
import os
import uuid
from datetime import datetime, timezone

import numpy as np

from .columnar import RunArrays
from .errors import InputError
from .metrics import RequestMetrics, measured_arrays

VERSION = "0.2.1"
READS = ("0.1", "0.2", "0.2.1")
PCTS = {"p0p1": 0.1, "p1": 1, "p5": 5, "p10": 10, "p25": 25, "p50": 50, "p75": 75, "p90": 90, "p95": 95, "p99": 99}
PCTS["p99p9"] = 99.9
# goodbench summary key -> (report latency field, units as exported)
LATENCY = {
    "ttft_ms": ("time_to_first_token", "ms"),
    "tpot_ms": ("time_per_output_token", "ms/token"),
    "itl_ms": ("inter_token_latency", "ms/token"),
    "e2el_ms": ("request_latency", "ms"),
}
NTPOT = ("normalized_time_per_output_token", "ms/token")  # goodbench's metric_variants.tpot_incl_ttft_ms
_TO_MS = {"ms": 1.0, "s": 1000.0, "ms/token": 1.0, "s/token": 1000.0}
_SUMMARY_STATS = ("p50", "p90", "p95", "p99", "mean", "max")


def statistics(values, units: str) -> dict | None:
    """A Statistics block (mean, stddev, min, p0p1 ... p99p9, max) of the samples; None when empty."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if not v.size:
        return None
    out = {"units": units, "mean": float(v.mean()), "stddev": float(v.std()), "min": float(v.min())}
    out |= {k: float(x) for k, x in zip(PCTS, np.percentile(v, list(PCTS.values())))}
    return out | {"max": float(v.max())}


def _from_summary(d: dict | None, units: str) -> dict | None:
    """A Statistics block from a summary distribution (what it holds: p50 p90 p95 p99 mean max)."""
    if not d or d.get("mean") is None:
        return None
    return {"units": units, **{k: float(d[k]) for k in _SUMMARY_STATS if d.get(k) is not None}}


def _iso(ts: str | None) -> str | None:
    return ts or None


def _duration(seconds) -> str | None:
    return f"PT{float(seconds):.6f}S" if isinstance(seconds, (int, float)) and math.isfinite(seconds) else None


def _seq_len(classes: list, key: str, observed: dict | None) -> dict:
    """A SequenceLength: fixed when the workload has one length, else the observed mean and range."""
    vals = {c.get(key, {}).get("value") for c in classes if c.get(key, {}).get("dist") == "constant"}
    if len(vals) == 1 and all(c.get(key, {}).get("dist") == "constant" for c in classes):
        return {"distribution": "fixed", "value": int(vals.pop())}
    if observed and observed.get("mean") is not None:
        out = {"distribution": "other", "value": observed["mean"], "std_dev": observed.get("stddev")}
        out |= {"min": int(observed["min"]), "max": max(1, int(observed["max"]))} if "min" in observed else {}
        return {k: v for k, v in out.items() if v is not None}
    return {"distribution": "other", "value": 0}


def _stack(meta: dict) -> list[dict]:
    """The system under test: an inference engine when its GPUs are known, else a generic component."""
    srv, engine = meta.get("server") or {}, meta.get("engine") or {}
    name = srv.get("name") or (
        "goodbench-sim" if meta.get("mode") == "simulate" else "goodbench" if engine else "unknown"
    )
    version = str(srv.get("version") or (meta.get("goodbench_version") if engine else "") or "unknown")
    label = f"{name}-0"
    md = {"schema_version": "0.0.1", "label": label, "cfg_id": _hash(engine)}
    model = (meta.get("target") or {}).get("model") or engine.get("model") or "unknown"
    gpus = meta.get("gpus") or ({engine["gpu"]: engine.get("tensor_parallel_size") or 1} if engine.get("gpu") else {})
    if not gpus:
        std = {"kind": "generic", "tool": name, "tool_version": version, "model": {"name": model}}
        return [{"metadata": md, "standardized": std, "native": {"args": engine or None}}]
    tp = int(engine.get("tensor_parallel_size") or 1)
    cluster = engine.get("cluster") or {}
    replicas = int(cluster.get("replicas") or 1) if not cluster.get("prefill") else 1
    gpu, count = next(iter(gpus.items())) if len(gpus) == 1 else ("+".join(sorted(gpus)), sum(gpus.values()))
    std = {
        "kind": "inference_engine",
        "tool": name,
        "tool_version": version,
        "role": "replica",
        "replicas": max(1, replicas),
        "model": {"name": model},
        "accelerator": {"model": gpu, "count": int(count), "parallelism": {"tp": tp}},
    }
    return [{"metadata": md, "standardized": std, "native": {"args": engine or None}}]


def _load(meta: dict, lengths: dict) -> dict:
    wl = meta.get("workload") or {}
    classes = wl.get("classes") or []
    sampled = wl.get("generator") in ("sharegpt", "trace") or any(c.get("source") == "sharegpt" for c in classes)
    arrival = wl.get("arrival") or {}
    std = {
        "tool": "goodbench",
        "tool_version": str(meta.get("goodbench_version") or "unknown"),
        "source": "sampled" if sampled else "random" if classes else "unknown",
        "input_seq_len": _seq_len(classes, "input", lengths.get("input")),
        "output_seq_len": _seq_len(classes, "output", lengths.get("output")),
    }
    rate = meta.get("requested_rate")
    if isinstance(rate, (int, float)) and math.isfinite(rate) and rate > 0:
        std["rate_qps"] = float(rate)
    conc = meta.get("max_concurrency") or arrival.get("concurrency")
    if conc:
        std["concurrency"] = int(conc)
    if wl.get("session"):
        std["multi_turn"] = {"enabled": True}
    native = {k: v for k, v in meta.items() if k != "engine_stats"}
    md = {"schema_version": "0.0.1", "cfg_id": str(meta.get("workload_hash") or "") or None}
    md["description"] = wl.get("description") or wl.get("name")
    return {"metadata": {k: v for k, v in md.items() if v}, "standardized": std, "native": {"config": native}}


def _results(summary: dict, dists: dict, lengths: dict) -> dict:
    req = summary.get("requests") or {}
    by = req.get("by_status") or {}
    requests = {
        "total": int(req.get("issued") or 0),
        "failures": int(req.get("failed") or 0) - int(by.get("cancelled", 0)),
    }
    requests["incomplete"] = int(by.get("cancelled", 0))
    for k in ("input", "output"):
        if lengths.get(k):
            requests[f"{k}_length"] = lengths[k]
    latency = {}
    for key, (field, units) in LATENCY.items():
        block = dists.get(key) or _from_summary(summary.get(key), units)
        if block:
            latency[field] = block | {"units": units}
    ntpot = dists.get("ntpot") or _from_summary(
        (summary.get("metric_variants") or {}).get("tpot_incl_ttft_ms"), NTPOT[1]
    )
    if ntpot:
        latency[NTPOT[0]] = ntpot
    rates = {
        "output_token_rate": (summary.get("output_throughput"), "tokens/s"),
        "request_rate": (summary.get("request_throughput"), "queries/s"),
        "input_token_rate": (dists.get("input_token_rate"), "tokens/s"),
    }
    throughput = {k: {"units": u, "mean": float(v)} for k, (v, u) in rates.items() if isinstance(v, (int, float))}
    if "input_token_rate" in throughput and "output_token_rate" in throughput:
        total = throughput["input_token_rate"]["mean"] + throughput["output_token_rate"]["mean"]
        throughput["total_token_rate"] = {"units": "tokens/s", "mean": total}
    agg = {"requests": requests, "latency": latency or None, "throughput": throughput or None}
    out: dict = {"request_performance": {"aggregate": {k: v for k, v in agg.items() if v}}}
    extra = {
        "goodbench_goodput": (summary.get("goodput"), "queries/s"),
        "goodbench_slo_attainment": (summary.get("slo_attainment"), "fraction"),
    }
    obs = {k: {"units": u, "mean": float(v)} for k, (v, u) in extra.items() if isinstance(v, (int, float))}
    if obs:
        out["observability"] = obs
    return out


def to_report(meta: dict, summary: dict, dists: dict | None = None, lengths: dict | None = None) -> dict:
    """A v0.2.1 report of one run. dists: full Statistics blocks computed from the records (keys of
    LATENCY, "ntpot", and "input_token_rate" as a number); without them, the summary's percentiles.
    lengths: {"input": Statistics, "output": Statistics} of token counts."""
    dists, lengths = dists or {}, lengths or {}
    run_id = str(meta.get("run_id") or "")
    start, end = _iso(meta.get("started_wall")), _iso(meta.get("finished_wall"))
    model = (meta.get("target") or {}).get("model") or ""
    run = {
        "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"goodbench:{run_id}:{start}")),
        "eid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"goodbench-workload:{meta.get('workload_hash') or run_id}")),
        "time": {
            k: v for k, v in {"start": start, "end": end, "duration": _duration(summary.get("duration_s"))}.items() if v
        },
        "description": f"{model} [{run_id}]" if model else run_id,
    }
    labels = meta.get("labels") or {}
    if labels:
        run["keywords"] = [f"{k}={v}" for k, v in sorted(labels.items())]
    return {
        "version": VERSION,
        "run": run,
        "scenario": {"stack": _stack(meta), "load": _load(meta, lengths)},
        "results": _results(summary, dists, lengths),
    }


# ----------------------------------------------------------------------------------------------- import
def _utc(ts) -> str:
    """An ISO timestamp, a datetime (YAML parses them) or epoch seconds as goodbench's UTC form."""
    if isinstance(ts, (int, float)) and not isinstance(ts, bool):
        return datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="seconds")
    if isinstance(ts, str):
        try:
            ts = datetime.fromisoformat(ts.replace("Z", "+00:00"))
        except ValueError:
            return ""
    if isinstance(ts, datetime):
        ts = ts if ts.tzinfo else ts.replace(tzinfo=timezone.utc)
        return ts.astimezone(timezone.utc).isoformat(timespec="seconds")
    return ""


def _seconds(iso) -> float | None:
    """ISO 8601 duration (PT1H2M3.5S) -> seconds."""
    if not isinstance(iso, str) or not iso.startswith("PT"):
        return None
    total, num = 0.0, ""
    for ch in iso[2:]:
        if ch.isdigit() or ch == ".":
            num += ch
        elif ch in "HMS" and num:
            total += float(num) * {"H": 3600, "M": 60, "S": 1}[ch]
            num = ""
        else:
            return None
    return total


def _ms(stats, where: str) -> dict | None:
    """A Statistics block as a goodbench distribution in ms (p50 p90 p95 p99 mean max; n unknown)."""
    if not isinstance(stats, dict) or stats.get("mean") is None:
        return None
    scale = _TO_MS.get(str(stats.get("units")))
    if scale is None:
        raise InputError(f"{where}: units {stats.get('units')!r} are not a time (ms, s, ms/token, s/token)")
    return {k: float(stats[k]) * scale for k in _SUMMARY_STATS if stats.get(k) is not None} | {"n": None}


def _get(d, *path):
    for k in path:
        d = d.get(k) if isinstance(d, dict) else None
    return d


def _v01(rep: dict) -> dict:
    m, sc = rep.get("metrics") or {}, rep.get("scenario") or {}
    engine = (_get(sc, "platform", "engine") or [{}])[0] or {}
    acc = (_get(sc, "host", "accelerator") or [{}])[0] or {}
    tp = m.get("throughput") or {}
    return {
        "requests": m.get("requests") or {},
        "latency": m.get("latency") or {},
        "rates": {"output": tp.get("output_tokens_per_sec"), "requests": tp.get("requests_per_sec")},
        "duration": _get(m, "time", "duration"),
        "start": _get(m, "time", "start"),
        "end": _get(m, "time", "stop"),
        "model": _get(sc, "model", "name"),
        "server": (engine.get("name"), engine.get("version")),
        "gpu": (acc.get("model"), acc.get("count")),
        "tool": _get(sc, "load", "name"),
        "load": sc.get("load") or {},
        "description": sc.get("description"),
        "keywords": [],
        "native": None,
        "extra": {},
    }


def _v02(rep: dict) -> dict:
    run, sc, res = rep.get("run") or {}, rep.get("scenario") or {}, rep.get("results") or {}
    agg = _get(res, "request_performance", "aggregate") or {}
    stack = sc.get("stack") or []
    eng = next((c for c in stack if _get(c, "standardized", "kind") == "inference_engine"), stack[0] if stack else {})
    std = eng.get("standardized") or {}
    load = sc.get("load") or {}
    tp = agg.get("throughput") or {}
    return {
        "requests": agg.get("requests") or {},
        "latency": agg.get("latency") or {},
        "rates": {"output": _get(tp, "output_token_rate", "mean"), "requests": _get(tp, "request_rate", "mean")},
        "duration": _seconds(_get(run, "time", "duration")),
        "start": _get(run, "time", "start"),
        "end": _get(run, "time", "end"),
        "model": _get(std, "model", "name"),
        "server": (std.get("tool"), std.get("tool_version")),
        "gpu": (_get(std, "accelerator", "model"), _get(std, "accelerator", "count")),
        "tool": _get(load, "standardized", "tool"),
        "load": load,
        "description": run.get("description"),
        "keywords": run.get("keywords") or [],
        "native": _get(load, "native", "config"),
        "extra": res.get("observability") or {},
        "cfg_id": _get(load, "metadata", "cfg_id"),
    }


CAVEAT = (
    "imported from an llm-d Benchmark Report: aggregates only, no per-request records, so report, compare "
    "and gate have nothing to judge; history, trend, gate --history's series and export --format llmd read it"
)


def aggregate_only(meta) -> str | None:
    """Why a run (its RunMeta or run.json dict) cannot be reported, compared or gated: an llm-d import
    holds a summary and no records. None for every other run."""
    d = meta if isinstance(meta, dict) else meta.to_dict()
    return CAVEAT if d.get("mode") == "imported" and (d.get("workload") or {}).get("aggregate_only") else None


def _labels(keywords) -> dict:
    out = {}
    for kw in keywords:
        k, sep, v = str(kw).partition("=")
        out[k.strip() if sep else str(kw)] = v.strip() if sep else ""
    return out


def _summary(n: dict, source: str, slo) -> dict:
    req = n["requests"]
    total = int(req.get("total") or 0)
    failed, incomplete = int(req.get("failures") or 0), int(req.get("incomplete") or 0)
    s: dict = {
        "requests": {"issued": total, "completed": max(0, total - failed - incomplete), "failed": failed + incomplete},
        "duration_s": n["duration"],
        "request_throughput": n["rates"]["requests"],
        "output_throughput": n["rates"]["output"],
    }
    s["requests"]["by_status"] = {
        k: v for k, v in {"ok": s["requests"]["completed"], "http_error": failed, "cancelled": incomplete}.items() if v
    }
    for key, (field, _) in LATENCY.items():
        s[key] = _ms(n["latency"].get(field), f"{source}: {field}")
    s["slo"] = slo
    s["goodput"] = _get(n["extra"], "goodbench_goodput", "mean")
    s["slo_attainment"] = _get(n["extra"], "goodbench_slo_attainment", "mean")
    s["valid"] = None  # the report does not say how the load generator kept up
    s["warnings"] = [CAVEAT]
    return s


def from_report(rep, source: str) -> tuple[dict, dict]:
    """(RunMeta fields, summary) of a report (v0.1, v0.2 or v0.2.1). A report goodbench wrote gives back
    its run.json (identity, labels, SLO); another tool's gives what the schema holds."""
    version = str(rep.get("version")) if isinstance(rep, dict) else None
    if version not in READS:
        raise InputError(f"{source}: not an llm-d Benchmark Report of version {', '.join(READS)} (version {version!r})")
    n = _v01(rep) if version == "0.1" else _v02(rep)
    native = n["native"] if isinstance(n["native"], dict) and n["tool"] == "goodbench" else {}
    gpu, count = n["gpu"]
    meta = {
        "label": str(n["description"] or f"imported llm-d {n['tool'] or ''}".strip()),
        "target": native.get("target") or {"base_url": "imported", "endpoint": "", "model": str(n["model"] or "")},
        "workload": dict(native.get("workload") or {"name": f"llmd-{n['tool'] or 'report'}", "load": n["load"]}),
        "workload_hash": str(native.get("workload_hash") or n.get("cfg_id") or _hash(n["load"])),
        "slo": native.get("slo"),
        "mode": "imported",
        "started_wall": _utc(n["start"]),
        "requested_rate": _get(n["load"], "standardized", "rate_qps"),
        "labels": native.get("labels") or _labels(n["keywords"]),
        "server": {"name": str(n["server"][0] or "unknown"), "version": n["server"][1] and str(n["server"][1])},
        "provenance": native.get("provenance"),
    }
    for k in ("engine", "gpus", "seed", "max_concurrency", "planned_requests", "tokenizer"):
        if native.get(k) is not None:
            meta[k] = native[k]
    if gpu and not meta.get("gpus"):
        meta["gpus"] = {str(gpu): int(count or 1)}
    meta["workload"] |= {"source": source, "aggregate_only": True}
    meta["workload"]["caveats"] = [*(meta["workload"].get("caveats") or []), CAVEAT]
    if n["duration"] is None and n["start"] and n["end"]:
        a, b = _utc(n["start"]), _utc(n["end"])
        if a and b:
            n["duration"] = (datetime.fromisoformat(b) - datetime.fromisoformat(a)).total_seconds()
    summary = _summary(n, source, meta["slo"])
    summary["label"] = meta["label"]
    return meta, summary


def _hash(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


# ----------------------------------------------------------------------------------------------- files
def dists_of(run: RunArrays) -> tuple[dict, dict]:
    """(latency Statistics by summary key plus "ntpot" and "input_token_rate", token-length Statistics)
    from a run's records, with the summary's selections: warm-up excluded, successful requests."""
    cols = measured_arrays(run)
    c = RequestMetrics(cols)
    ok = c.ok & ~np.isnan(c.first)
    tpot_ok = ok & ~np.isnan(c.tpot)
    with np.errstate(divide="ignore", invalid="ignore"):
        ntpot = np.where(c.out >= 1, c.e2e / c.out, np.nan)
    samples = {
        "ttft_ms": c.ttft[ok],
        "tpot_ms": c.tpot[tpot_ok],
        "itl_ms": c.itl[np.repeat(c.ok, c.itl_count)],
        "e2el_ms": c.e2e[ok],
        "ntpot": ntpot[ok],
    }
    dists = {k: statistics(v * 1000.0, LATENCY.get(k, NTPOT)[1]) for k, v in samples.items()}
    dists = {k: v for k, v in dists.items() if v}
    span = (np.nanmax(c.fin[c.ok]) - np.nanmin(c.sent[c.ok])) if c.ok.any() else 0.0
    if span > 0:
        dists["input_token_rate"] = float(cols.prompt_tokens[c.ok].sum() / span)
    lengths = {"input": statistics(cols.prompt_tokens[c.ok], "count"), "output": statistics(c.out[c.ok], "count")}
    return dists, {k: v for k, v in lengths.items() if v}


def read_report(path: str) -> dict:
    """A report file: JSON, or YAML (llm-d's own format) when PyYAML is installed."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror}") from None
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        import yaml
    except ImportError:
        raise InputError(f"{path} is not JSON; reading a YAML report needs PyYAML: pip install pyyaml") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise InputError(f"{path} is neither JSON nor YAML: {e}") from None


def write_report(report: dict, out: str) -> str:
    """The report as JSON (which YAML loaders read too), written whole or not at all."""
    tmp = out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2, allow_nan=False)
        f.write("\n")
    os.replace(tmp, out)
    return out
