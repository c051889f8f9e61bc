"""Did the server keep up? An open-loop run against an overloaded server has a backlog (requests sent but
not finished) that grows for as long as arrivals continue, and its goodput then depends on how long it
ran, not on the server. Pure numpy.

Backlog B(t) = sends so far - completions so far. By Little's law a server that keeps up holds B near
rate x latency; one that does not lets B grow at (arrival rate - completion rate). The run is
`saturated` when, after the first fill (one median E2E), B grows at more than GROWTH of the arrival rate
and by at least MIN_GROWTH requests over the arrival window, and TTFT grows with it (a queue forming:
a run shorter than its requests' lives also has a growing B while it fills up to rate x latency). The steady-state window is the longest
stretch from the start in which B does not grow that fast; goodput inside it is reported beside the
run's. TTFT by send time, and (when scraped) the server's own waiting queue, are shown as evidence."""

from __future__ import annotations

import numpy as np

from .. import prometheus
from .derived import RequestMetrics

GROWTH = 0.10  # backlog growth, as a fraction of the arrival rate, that means "not keeping up"
MIN_GROWTH = 5.0  # requests: smaller backlogs are noise
SAMPLES = 60  # points at which the backlog is sampled over the arrival window
MIN_SENT = 20  # fewer sends say nothing about a trend
TTFT_GROWTH = 1.5  # median TTFT, last fifth of the window over the first, that a growing queue shows


def _slope(t: np.ndarray, y: np.ndarray) -> float:
    if t.size < 3 or np.ptp(t) <= 0:
        return 0.0
    return float(np.polyfit(t, y, 1)[0])


def backlog(c: RequestMetrics, ts: np.ndarray) -> np.ndarray:
    """Requests sent by each time in ts and not yet finished then (one clock domain)."""
    sent = np.sort(c.sent[~np.isnan(c.sent)])
    end = np.where(np.isnan(c.last), c.fin, c.last)
    end = np.sort(end[~np.isnan(end)])
    return np.searchsorted(sent, ts, side="right") - np.searchsorted(end, ts, side="right")


def _steady_end(ts: np.ndarray, b: np.ndarray, limit: float, start: int) -> int:
    """Index of the furthest sample up to which the backlog's growth stays within limit (req/s)."""
    best = start
    for k in range(start + 3, ts.size + 1):
        if _slope(ts[start:k], b[start:k]) <= limit:
            best = k - 1
    return best


def _ttft_trend(c: RequestMetrics, t_lo: float, t_hi: float) -> float | None:
    """Median TTFT of requests sent in the last fifth of [t_lo, t_hi] over that of the first fifth."""
    ok = c.ok & ~np.isnan(c.ttft)
    span = t_hi - t_lo
    first = c.ttft[ok & (c.sent >= t_lo) & (c.sent < t_lo + span / 5)]
    last = c.ttft[ok & (c.sent > t_hi - span / 5) & (c.sent <= t_hi)]
    if first.size < 3 or last.size < 3 or np.median(first) <= 0:
        return None
    return float(np.median(last) / np.median(first))


def saturation(c: RequestMetrics, meets: np.ndarray | None, mode: str, queue: tuple | None = None) -> dict:
    """summary.json's `saturation` block (and its `saturated` flag). meets: per request, met the SLO (None
    without an SLO). queue: (times, waiting) from the server's scraped gauge, on the run's clock."""
    out: dict = {"saturated": None, "method": "backlog trend over the arrival window (see docs/metrics.md)"}
    sent = c.sent[~np.isnan(c.sent)]
    if mode not in ("open", "simulate") or sent.size < MIN_SENT:
        out["why_not_judged"] = (
            "closed loops bound their backlog by the number of users"
            if mode == "closed"
            else "too few requests sent"
            if sent.size < MIN_SENT
            else f"{mode} runs have no schedule to keep up with"
        )
        return out
    t0, t1 = float(sent.min()), float(sent.max())
    rate = (sent.size - 1) / (t1 - t0) if t1 > t0 else 0.0
    e2e = c.e2e[c.ok & ~np.isnan(c.e2e)]
    fill = min(float(np.median(e2e)) if e2e.size else 0.0, 0.3 * (t1 - t0))
    ts = np.linspace(t0 + fill, t1, SAMPLES)
    b = backlog(c, ts).astype(float)
    growth = _slope(ts, b)
    grown = float(growth * (ts[-1] - ts[0]))
    trend = _ttft_trend(c, t0 + fill, t1)
    # a backlog still filling up to rate x latency (a run shorter than its requests' lives) grows too; a
    # server that cannot keep up also makes new requests wait longer and longer for their first token
    saturated = bool(
        rate > 0
        and growth > GROWTH * rate
        and grown >= max(MIN_GROWTH, 0.5 * b[0])
        and (trend is None or trend >= TTFT_GROWTH)
    )
    out.update(
        saturated=saturated,
        arrival_rate=rate,
        backlog_growth_per_s=growth,
        completion_rate=max(rate - growth, 0.0),
        backlog_start=float(b[0]),
        backlog_end=float(b[-1]),
        ttft_trend=trend,
    )
    if queue is not None and len(queue[0]) >= 3:
        qt, qw = np.asarray(queue[0], float), np.asarray(queue[1], float)
        inside = (qt >= t0) & (qt <= t1)
        out["server_waiting_growth_per_s"] = _slope(qt[inside], qw[inside]) if inside.sum() >= 3 else None
    k = _steady_end(ts, b, GROWTH * rate, 0) if saturated else ts.size - 1
    w0, w1 = t0, float(ts[k])
    out["steady_window_s"] = [w0, w1] if w1 - w0 >= 0.2 * (t1 - t0) else None
    # how much of the run its steady state covers: a rate probe is conclusive only when nearly all of it
    out["steady_share"] = float(((sent >= w0) & (sent <= w1)).sum() / sent.size)
    if out["steady_window_s"] and meets is not None and w1 > w0:
        inside = (c.sent >= w0) & (c.sent <= w1)
        out["steady_goodput"] = float((meets & inside).sum() / (w1 - w0))
    else:
        out["steady_goodput"] = None
    return out


def waiting_series(rows: list[dict]) -> tuple[list[float], list[float]] | None:
    """(times, waiting requests) from server_metrics.jsonl rows: vLLM's `num_requests_waiting` gauge,
    summed over its label sets (engines, models). None when the server does not export it."""
    return prometheus.series(rows, "vllm:num_requests_waiting")


OVERDUE_SLACK = 1.5  # a request is overdue past this multiple of its predicted service time
MIN_FINISHED = 5  # finished requests before service times can be predicted
BASE_FINISHED = 20  # the first finished requests, whose TTFT is the server's before any queue formed


def overdue(now: float, inflight, service) -> int | None:
    """Requests in flight past their predicted end: send + OVERDUE_SLACK x (TTFT + (planned tokens - 1)
    x time per further token). TTFT is the 90th percentile of the first BASE_FINISHED requests (before
    a queue could form: a queue is what this looks for, and it shows in TTFT); time per token the 90th
    percentile of every request finished so far (it grows with the batch, and that is not a queue).
    A server that keeps up holds the count near a constant (a few slow requests), however many requests
    are in flight while a backlog of long requests fills up to rate x service time; a server that does
    not lets it grow with the queue. inflight: (send time, planned tokens) pairs; service: (TTFT, time
    per further token) pairs in the order they finished; None while fewer than MIN_FINISHED finished."""
    if len(service) < MIN_FINISHED:
        return None
    done = np.asarray(service, float)
    ttft = np.percentile(done[:BASE_FINISHED, 0], 90)
    per = np.percentile(done[:, 1], 90)
    pairs = np.asarray(list(inflight), float).reshape(-1, 2)
    ends = pairs[:, 0] + OVERDUE_SLACK * (ttft + np.maximum(pairs[:, 1] - 1, 0) * per)
    return int((ends < now).sum())
