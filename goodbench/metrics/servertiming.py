"""Where the time to first token went, in the server's own view.

vLLM (and `goodbench serve`) export per-request histograms of queue time (taken in by the engine, at
the end of the step in progress at the arrival, to first scheduled), prefill time (first scheduled to first token) and TTFT. The run's scraper keeps their `_sum` and
`_count` every second in server_metrics.jsonl (buckets dropped); the differences between the first and
the last sample are the run's own requests, so sum/count deltas give the run's mean of each phase.
They are the server's clock and the server's definitions; goodbench's client-side TTFT (from the
request's last byte sent to the first token read) sits beside them, and the gap between the two is
time outside the server's view (network, HTTP framing, the client)."""

from __future__ import annotations

from .. import prometheus

# (key in the summary block, histogram name)
PHASES = (
    ("ttft_ms", "vllm:time_to_first_token_seconds"),
    ("queue_ms", "vllm:request_queue_time_seconds"),
    ("prefill_ms", "vllm:request_prefill_time_seconds"),
)
SOURCE = "server /metrics histograms (the server's clock; means from _sum/_count deltas over the run)"


def histogram_totals(metrics: dict, name: str) -> tuple[float, float] | None:
    """(sum, count) of one histogram over all its label sets; None when absent."""
    s = prometheus.total(metrics, name + "_sum")
    return None if s is None else (s, prometheus.total(metrics, name + "_count") or 0.0)


def phase_delta(first: dict, last: dict, name: str) -> dict | None:
    """The mean (ms) and number of observations one histogram gained between two samples; None when
    the server does not export it, nothing was observed, or a counter went backwards (a restart)."""
    a, b = histogram_totals(first, name), histogram_totals(last, name)
    if a is None or b is None:
        return None
    d_sum, d_n = b[0] - a[0], b[1] - a[1]
    if d_n <= 0 or d_sum < 0:
        return None
    return {"mean": round(d_sum / d_n * 1000, 3), "n": int(round(d_n))}


def server_timing(rows: list[dict], client_ttft: dict | None = None) -> dict | None:
    """The summary's `server_timing` block from server_metrics.jsonl rows ({"t", "metrics"}), or None
    when the server exports none of the phase histograms (or fewer than two samples were taken).
    client_ttft: the summary's `ttft_ms` (goodbench's own TTFT), shown beside the server's."""
    rows = [r for r in rows if isinstance(r.get("metrics"), dict)]
    if len(rows) < 2:
        return None
    first, last = rows[0], rows[-1]
    phases = {key: phase_delta(first["metrics"], last["metrics"], name) for key, name in PHASES}
    if all(v is None for v in phases.values()):
        return None
    out: dict = {"source": SOURCE, "window_s": [first.get("t"), last.get("t")], **phases}
    ttft, queue, prefill = phases["ttft_ms"], phases["queue_ms"], phases["prefill_ms"]
    # the part of the server's TTFT neither queue nor prefill: its front end (HTTP, tokenizing, IPC)
    out["other_ms"] = (
        round(ttft["mean"] - queue["mean"] - prefill["mean"], 3) + 0.0  # no -0.0
        if ttft and queue and prefill
        else None
    )
    c = client_ttft or {}
    out["client_ttft_ms"] = {"mean": round(c["mean"], 3), "n": c.get("n")} if c.get("mean") is not None else None
    # only comparable when both means cover the same requests
    same = ttft is not None and out["client_ttft_ms"] is not None and c.get("n") == ttft["n"]
    out["client_minus_server_ms"] = round(c["mean"] - ttft["mean"], 3) if same else None
    return out


LATENESS = "goodbench:step_lateness_seconds"
LATENESS_P99 = "goodbench:step_lateness_p99_seconds"
ENGINE_LATE_P99_MS = 20.0  # a step loop this late at p99 (or ENGINE_LATE_MEAN_MS on average) fell behind
ENGINE_LATE_MEAN_MS = 5.0
ENGINE_LATE_SHARE = 0.10  # ... and a p99 past its limit counts only when the late time is this share of the run


def _max_gauge(metrics: dict, name: str) -> float | None:
    vals = [v for key, v in metrics.items() if key.split("{", 1)[0] == name]
    return max(vals) if vals else None


def step_lateness(rows: list[dict], started_by_run: bool) -> dict | None:
    """The `engine_lateness` block of a run against goodbench's own engine (its /metrics exports
    goodbench:step_lateness_seconds, actual minus planned step end): how late its step loop ran over the
    run, and whether it fell behind (a busy host's CPU, not the modelled GPU, then set its latencies).
    None when the target exports no lateness (not goodbench's engine) or fewer than two samples."""
    rows = [r for r in rows if isinstance(r.get("metrics"), dict)]
    if len(rows) < 2:
        return None
    delta = phase_delta(rows[0]["metrics"], rows[-1]["metrics"], LATENESS)
    if delta is None:
        return None
    p99s = [v for v in (_max_gauge(r["metrics"], LATENESS_P99) for r in rows[1:]) if v is not None]
    p99 = round(max(p99s) * 1000, 3) if p99s else None
    out = {
        "source": "the engine's /metrics (goodbench:step_lateness_seconds: actual minus planned step end)",
        "started_by_run": started_by_run,
        "steps": delta["n"],
        "late_mean_ms": delta["mean"],
        "late_total_s": round(delta["mean"] * delta["n"] / 1000, 3),
        "late_p99_ms": p99,  # the worst of the engine's rolling p99 over the run's samples
    }
    span = (rows[-1].get("t") or 0) - (rows[0].get("t") or 0)
    share = out["late_total_s"] / span if span > 0 else 1.0
    # a hiccup (one late burst on a quiet host: 0.5 s over a 10 s run) is not an engine behind its schedule
    spiky = (p99 or 0) > ENGINE_LATE_P99_MS and share > ENGINE_LATE_SHARE
    out["behind"] = bool(spiky or delta["mean"] > ENGINE_LATE_MEAN_MS)
    return out
