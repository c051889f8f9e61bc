"""RunResult -> Summary (the summary.json contract). Pure numpy; one definition of every number,
compatible with `vllm bench serve` (see columns.py):

goodput = requests meeting the SLO / duration (first send to last completion, within one clock);
SLO attainment = requests meeting the SLO / requests issued (failed requests never meet it).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..arrivals import span_rate
from ..columnar import RunArrays
from ..records import STATUSES, RunResult, request_slo
from .bounds import verdict_bounds
from .derived import RequestMetrics, measured_arrays
from .dist import dist, ratio
from .hazards import LAG_P99_LIMIT_MS, Evidence, assess, lanes_honoured
from .hol import hol_block
from .jobs import job_block
from .pooling import pooling_block
from .replicas import fleet_names, replica_block
from .saturation import saturation
from .sessions import session_block, turns
from .stats import goodput_bootstrap, goodput_interval, wilson
from .variants import variants

PARALLEL_MIN = 20_000  # requests; below it threads cost more than they save


def _slo_block(c: RequestMetrics, sel: np.ndarray, slo: dict | None, duration: float, ci: bool, issued: int) -> dict:
    meets = c.meets(slo)
    if meets is None:
        return {"slo_met": None, "slo_attainment": None, "goodput": None, "slo_clauses": None}
    good = int((meets & sel).sum())
    out: dict = {
        "slo_met": good,
        "slo_clauses": {
            k: {"threshold_ms": ms, "attainment": float((c.clause(k, ms) & sel).sum() / issued) if issued else None}
            for k, ms in request_slo(slo).items()
        },
        "slo_attainment": good / issued if issued else None,
        "goodput": good / duration if duration > 0 else None,
    }
    if ci and issued:
        out["slo_attainment_ci"] = list(wilson(good, issued))
        if 0 < good < issued:
            gb = goodput_bootstrap(good, issued, duration)
            out["goodput_ci_method"] = "bootstrap over requests"
        else:  # the bootstrap collapses to a point at 0% or 100%; Wilson does not
            gb = goodput_interval(good, issued, duration)
            out["goodput_ci_method"] = "Wilson (bootstrap is degenerate at 0% or 100% attainment)"
        out["goodput_ci"] = list(gb) if gb else None
    return out


def block(c: RequestMetrics, sel: np.ndarray, slo: dict | None, duration: float, ci: bool) -> dict:
    """Counts, throughput, every latency distribution and the SLO numbers of the requests in sel."""
    ok = c.ok & sel
    issued, completed = int(sel.sum()), int(ok.sum())
    by_status = np.bincount(c.cols.status[sel], minlength=len(STATUSES))
    has_first = ok & ~np.isnan(c.first)
    out: dict = {
        "requests": {
            "issued": issued,
            "completed": completed,
            "failed": issued - completed,
            "by_status": {s: int(by_status[i]) for i, s in enumerate(STATUSES) if by_status[i]},
            "retried": int((c.cols.retries[sel] > 0).sum()),
        },
        "request_throughput": completed / duration if duration > 0 else None,
        "reasoning_tokens": int(c.cols.reasoning_tokens[ok].sum()),
        "output_throughput": float(c.out[ok].sum() / duration) if duration > 0 else None,
        "ttft_ms": dist(c.ttft[has_first], ci),
        "ttfo_ms": dist(c.ttfo[has_first & ~np.isnan(c.ttfo)], ci),
        "tpot_ms": dist(c.tpot[ok & ~np.isnan(c.tpot)], ci),
        "itl_ms": dist(c.itl[np.repeat(ok, c.itl_count)], ci, groups=c.itl_count[ok]),
        "e2el_ms": dist(c.e2e[has_first], ci),
        "schedule_lag_ms": dist(c.lag[sel & ~np.isnan(c.lag)]),
        "ttft_from_scheduled_ms": dist((c.first - c.sched)[has_first]),
        "e2el_from_scheduled_ms": dist((c.last - c.sched)[has_first]),
    }
    out["itl_p99_over_p50"] = ratio(out["itl_ms"])
    out["ttft_p99_over_p50"] = ratio(out["ttft_ms"])
    out.update(_slo_block(c, sel, slo, duration, ci, issued))
    return out


def _span(c: RequestMetrics, sel: np.ndarray) -> float:
    """First send to last completion within one clock domain."""
    sent = c.sent[sel][~np.isnan(c.sent[sel])]
    ends = np.concatenate([c.fin[sel][~np.isnan(c.fin[sel])], c.last[sel][~np.isnan(c.last[sel])]])
    return float(ends.max() - sent.min()) if sent.size and ends.size else 0.0


def _rate(groups: list[np.ndarray]) -> float | None:
    """Sum over clock domains of (count - 1) / span: requests per second dispatched."""
    rates = [r for r in (span_rate(t) for t in groups) if r is not None]
    return sum(rates) if rates else None


class _Now:
    """A finished 'future' for work done inline (small runs, where threads cost more than they save)."""

    def __init__(self, value):
        self.value = value

    def result(self):
        return self.value


ERROR_SAMPLES = 3


def error_samples(records) -> tuple[str, ...]:
    """The first few distinct error texts of failed records (what the failure hazards quote)."""
    out: list[str] = []
    for r in records:
        if r.error and r.status != "ok" and r.error not in out:
            out.append(r.error)
            if len(out) == ERROR_SAMPLES:
                break
    return tuple(out)


BASE_MODEL = "(base)"  # per_adapter's key for the requests that asked for the base model


def adapters(cols) -> list[tuple[str, np.ndarray]]:
    """(adapter, its requests) for a run that spread requests over LoRA adapters, the base model's as
    "(base)" when some asked for it; [] for a run without adapters."""
    if not cols.adapter_names:
        return []
    out = [(name, cols.adapter == code) for code, name in enumerate(cols.adapter_names)]
    base = cols.adapter < 0
    return out + ([(BASE_MODEL, base)] if base.any() else [])


def _subsets(later, c: RequestMetrics, cols, slo, duration: float, ci: bool) -> dict:
    """Futures of the per-class, per-priority-lane and per-turn blocks (empty where the run has none)."""
    by_class = (
        {k: later(block, c, cols.cls == code, slo, duration, ci) for code, k in enumerate(cols.cls_names)}
        if len(cols.cls_names) > 1
        else {}
    )
    lanes = np.unique(cols.priority[~np.isnan(cols.priority)])
    return {
        "per_class": by_class,
        "per_priority": {f"{p:g}": later(block, c, cols.priority == p, slo, duration, ci) for p in lanes},
        "per_turn": {str(t): later(block, c, cols.turn == t, slo, duration, False) for t in turns(cols)},
        "per_adapter": {k: later(block, c, mask, slo, duration, ci) for k, mask in adapters(cols)},
    }


def _evidence(s: dict, c: RequestMetrics, result, meta, lag_limit_ms: float, errors, engine=None) -> Evidence:
    """What the hazards (metrics/hazards.py) judge a run's validity and warnings from."""
    if errors is None:
        errors = error_samples(result.records) if isinstance(result, RunResult) else ()
    return Evidence(
        s,
        c,
        mode=meta.mode,
        max_concurrency=meta.max_concurrency,
        lag_limit_ms=lag_limit_ms,
        caveats=tuple((meta.workload or {}).get("caveats") or ()),
        tokenizer=meta.tokenizer,
        model=str((meta.target or {}).get("model") or ""),
        target=meta.target,
        errors=errors,
        engine=meta.engine if isinstance(meta.engine, dict) else None,
        client_lag=meta.client_lag,
        engine_lateness=engine,
    )


def _shaped_blocks(s: dict, c: RequestMetrics, slo: dict | None, duration: float, meta) -> None:
    """The blocks only some workloads have: whole sessions, whether priority lanes were honoured,
    whole agent jobs, pooled items (embeddings, rerank, score), replicas and cache hits (a fleet)."""
    cols = c.cols
    if s.get("per_turn"):  # multi-turn sessions: whole sessions too
        s["sessions"] = session_block(c, c.meets(slo), duration)
    if s.get("per_priority"):  # were the lanes served in priority order (None: unknown)
        s["priority_honoured"] = lanes_honoured(s["per_priority"], meta.engine)[0]
    if (cols.job >= 0).any():  # agent jobs: whole jobs too
        s["jobs"] = job_block(c, slo, duration) | {"prefix_sources": meta.expected_prefix_sources}
    if (cols.items >= 0).any():  # embeddings, rerank, score: items too
        s["pooling"] = pooling_block(c, duration)
    fleet = replica_block(c, fleet_names(meta.engine, meta.target))  # who served each request, what its cache held
    if fleet is not None:
        by_counters = ((meta.target or {}).get("worker_metrics") or {}).get("attribution")
        s["replicas"] = fleet | ({"attribution": by_counters} if by_counters else {})


def summarize(
    result: RunResult | RunArrays,
    slo: dict | None = None,
    lag_limit_ms: float = LAG_P99_LIMIT_MS,
    label: str | None = None,
    ci: bool = True,
    prepared: RequestMetrics | None = None,
    queue: tuple | None = None,
    errors: tuple[str, ...] | None = None,
    engine: dict | None = None,
) -> dict:
    """The summary.json dict. ci=False skips confidence intervals, variants and HOL attribution (sweep
    cells and rate probes, which are summarised by the hundred). prepared: RequestMetrics of
    measured_arrays(result) already built by the caller (reports reuse them for figures). queue: the
    server's scraped waiting-queue series (saturation.waiting_series), evidence for `saturation`.
    errors: a few failed requests' error texts (columns do not keep them; records do, and are read
    when given). engine: the engine_lateness block (servertiming.step_lateness), evidence for validity."""
    meta = result.meta
    slo = slo if slo is not None else meta.slo
    cols = prepared.cols if prepared is not None else measured_arrays(result)
    total = len(result.cols) if isinstance(result, RunArrays) else len(result.records)
    c = prepared if prepared is not None else RequestMetrics(cols)
    # one clock per origin (load-generator process or host): spans are measured within a clock only
    domains = [cols.origin == o for o in range(len(cols.origin_names))] or [np.zeros(0, bool)]
    duration = max(_span(c, d) for d in domains)
    # the per-class blocks and HOL attribution are independent of the overall block; numpy releases
    # the GIL in its partitions and copies, so on a big run a second core halves the wall time
    pool = ThreadPoolExecutor(max_workers=2) if len(cols) >= PARALLEL_MIN else None
    later = (lambda fn, *a: pool.submit(fn, *a)) if pool else (lambda fn, *a: _Now(fn(*a)))
    try:
        subsets = _subsets(later, c, cols, slo, duration, ci)
        hol = later(hol_block, cols, c, duration) if ci else None
        s: dict = {"run_id": meta.run_id, "label": label or meta.label, "slo": slo or None}
        overall = block(c, np.ones(len(cols), bool), slo, duration, ci)
        s["requests"] = overall.pop("requests")
        s["duration_s"] = duration
        s.update(overall)
        # offered load: what the generator actually dispatched vs what its schedule said
        s["achieved_rate"] = _rate([c.sent[d][~np.isnan(c.sent[d])] for d in domains])
        s["scheduled_rate"] = _rate([c.sched[d] for d in domains])
        s["requested_rate"] = meta.requested_rate
        s["warmup_excluded"] = total - len(cols)
        s["saturation"] = saturation(c, c.meets(slo), meta.mode, queue)
        s["saturated"] = s["saturation"]["saturated"]
        for key, futures in subsets.items():  # per_class always; priority lanes and turns when there are any
            if futures or key == "per_class":
                s[key] = {k: f.result() for k, f in futures.items()}
        _shaped_blocks(s, c, slo, duration, meta)
        s["valid"], s["warnings"], bound = assess(_evidence(s, c, result, meta, lag_limit_ms, errors, engine))
        if bound is not None:  # invalid, but by a bounded error: the gate weighs it against each clause
            s["verdict_bounds"] = verdict_bounds(c, slo, duration, bound)
        if ci:
            s["metric_variants"] = variants(c, np.ones(len(cols), bool), s["itl_ms"])
            s["hol"] = hol.result()
    finally:
        if pool is not None:
            pool.shutdown()
    return _ordered(s)


_ORDER = ("run_id", "label", "slo", "requests", "duration_s")


def _ordered(s: dict) -> dict:
    """Keys in the order summary.json has always had them (per_class after valid/warnings)."""
    per = s.pop("per_class")
    lanes = {
        k: s.pop(k)
        for k in ("per_priority", "per_adapter", "per_turn", "sessions", "jobs", "pooling", "replicas")
        if k in s
    }
    tail = {k: s.pop(k) for k in ("metric_variants", "hol") if k in s}
    valid, warnings = s.pop("valid"), s.pop("warnings")
    bounds = {"verdict_bounds": s.pop("verdict_bounds")} if "verdict_bounds" in s else {}
    s.update(valid=valid, warnings=warnings, **bounds, per_class=per, **lanes, **tail)
    return s
