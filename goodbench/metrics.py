"""RunResult -> Summary (the summary.json contract). Pure numpy; one definition of every number,
compatible with `vllm bench serve`:

TTFT = first content chunk - sent_at;  ITL = gaps between content chunks (pooled);
TPOT = (E2E - TTFT) / (output_tokens - 1);  E2E = last content chunk - sent_at;
schedule lag = sent_at - scheduled_at;  goodput = requests meeting the SLO / duration;
SLO attainment = requests meeting the SLO / requests issued (failed requests never meet it).
"""

from __future__ import annotations

import numpy as np

from .columnar import ColumnarRun, RunColumns, gap_counts, gaps_of
from .records import STATUSES, TOKEN_SOURCES, RunResult

PCTS = (50, 90, 95, 99)
LAG_P99_LIMIT_MS = 10.0
RATE_SHORTFALL = 0.02
MIN_P99_SAMPLES = 100


def dist(values_s: np.ndarray, ci: bool = False, groups: np.ndarray | None = None) -> dict:
    """Percentiles (linear interpolation, as numpy's default), mean, max in ms, always with n; with ci,
    a 95% interval per percentile (analysis.stats). Sorts the input in place by one partition: pass a
    temporary (a boolean-indexed copy), never an array that is used afterwards."""
    from .analysis.stats import order_stat_ci, order_stat_ranks, percentile_ci, resampled

    v = np.asarray(values_s)
    if v.dtype.kind != "f":
        v = v.astype(float)
    n = int(v.size)
    if n == 0:
        return {"p50": None, "p90": None, "p95": None, "p99": None, "mean": None, "max": None, "n": 0}
    out_ci = None
    ranks = []
    if ci and n >= 2:
        if resampled(n, groups):
            out_ci = percentile_ci(v, PCTS, groups=groups)
        else:
            ranks = [order_stat_ranks(n, p) for p in PCTS]
    mean, mx = float(v.mean(dtype=np.float64)) * 1000.0, float(v.max()) * 1000.0
    pos = [q / 100.0 * (n - 1) for q in PCTS]
    kth = sorted({int(np.floor(x)) for x in pos} | {min(int(np.floor(x)) + 1, n - 1) for x in pos}
                 | {r for pair in ranks for r in pair})
    v.partition(kth)
    pct = []
    for x in pos:
        lo = int(np.floor(x))
        hi = min(lo + 1, n - 1)
        a, b = float(v[lo]), float(v[hi])
        pct.append((a + (x - lo) * (b - a)) * 1000.0)
    if ranks:
        out_ci = order_stat_ci(v, ranks, PCTS, groups)
    d = {"p50": float(pct[0]), "p90": float(pct[1]), "p95": float(pct[2]), "p99": float(pct[3]),
         "mean": mean, "max": mx, "n": n}
    if out_ci:
        d["ci"] = {k: ([x * 1000.0 for x in val] if isinstance(val, list) else val) for k, val in out_ci.items()}
    return d


def _ratio(d: dict) -> float | None:
    if d["n"] == 0 or not d["p50"]:
        return None
    return d["p99"] / d["p50"]


class Columns:
    """Per-request derived values as arrays, computed once from a run's columns."""

    def __init__(self, src):
        cols = src if isinstance(src, RunColumns) else RunColumns.from_records(list(src))
        self.cols = cols
        n = len(cols)
        self.n = n
        self.ok = cols.ok
        self.sent, self.sched, self.first, self.fin = cols.sent, cols.scheduled, cols.first, cols.finished
        self.out = cols.out_tokens.astype(float)
        self.nchunks = cols.nchunks
        off = cols.offsets
        has = cols.nchunks > 0
        self.last = np.full(n, np.nan)
        self.last[has] = cols.chunk_times[off[1:][has] - 1]
        self.gap_count = gap_counts(cols)
        self.gaps = gaps_of(cols)
        self.ttft = self.first - self.sent
        self.e2e = self.last - self.sent
        with np.errstate(invalid="ignore", divide="ignore"):
            self.tpot = np.where(self.out >= 2, (self.e2e - self.ttft) / (self.out - 1), np.nan)
        self.max_itl = np.zeros(n)
        with_gaps = self.gap_count > 0
        if self.gaps.size:
            starts = (np.cumsum(self.gap_count) - self.gap_count)[with_gaps]
            self.max_itl[with_gaps] = np.maximum.reduceat(self.gaps, starts)
        self.lag = self.sent - self.sched
        with np.errstate(invalid="ignore", divide="ignore"):
            # per request, the mean gap between content chunks (LLMPerf-style ITL; the CSV's itl_mean_ms)
            self.chunk_mean_itl = np.where(self.nchunks >= 2, (self.last - self.first) / (self.nchunks - 1), np.nan)

    def gap_mask(self, req_mask: np.ndarray) -> np.ndarray:
        """Which pooled gaps belong to the requests where req_mask holds."""
        return np.repeat(req_mask, self.gap_count)

    def clause(self, key: str, ms: float) -> np.ndarray:
        """Per request: succeeded and this one threshold holds (TPOT holds trivially below 2 tokens)."""
        vals = {"ttft": self.ttft, "tpot": np.nan_to_num(self.tpot, nan=0.0), "e2el": self.e2e,
                "max_itl": self.max_itl}[key]
        return self.ok & ~np.isnan(self.first) & (vals * 1000.0 <= ms)

    def meets(self, slo: dict | None) -> np.ndarray | None:
        if not slo:
            return None
        m = self.ok & ~np.isnan(self.first)
        for k, ms in slo.items():
            m &= self.clause(k, ms)
        return m


def _block(c: Columns, sel: np.ndarray, slo: dict | None, duration: float, ci: bool) -> dict:
    ok = c.ok & sel
    issued, completed = int(sel.sum()), int(ok.sum())
    by_status = np.bincount(c.cols.status[sel], minlength=len(STATUSES))
    has_first = ok & ~np.isnan(c.first)
    gsel = c.gap_mask(ok)
    has_tpot = ok & ~np.isnan(c.tpot)
    out: dict = {
        "requests": {"issued": issued, "completed": completed, "failed": issued - completed,
                     "by_status": {s: int(by_status[i]) for i, s in enumerate(STATUSES) if by_status[i]}},
        "request_throughput": completed / duration if duration > 0 else None,
        "output_throughput": float(c.out[ok].sum() / duration) if duration > 0 else None,
        "ttft_ms": dist(c.ttft[has_first], ci),
        "tpot_ms": dist(c.tpot[has_tpot], ci),
        "itl_ms": dist(c.gaps[gsel], ci, groups=c.gap_count[ok]),
        "e2el_ms": dist(c.e2e[has_first], ci),
        "schedule_lag_ms": dist(c.lag[sel & ~np.isnan(c.lag)]),
        "ttft_from_scheduled_ms": dist((c.first - c.sched)[has_first]),
        "e2el_from_scheduled_ms": dist((c.last - c.sched)[has_first]),
    }
    out["itl_p99_over_p50"] = _ratio(out["itl_ms"])
    out["ttft_p99_over_p50"] = _ratio(out["ttft_ms"])
    meets = c.meets(slo)
    if meets is not None:
        good = int((meets & sel).sum())
        out["slo_met"] = good
        out["slo_clauses"] = {k: {"threshold_ms": ms,
                                  "attainment": float((c.clause(k, ms) & sel).sum() / issued) if issued else None}
                              for k, ms in slo.items()}
        out["slo_attainment"] = good / issued if issued else None
        out["goodput"] = good / duration if duration > 0 else None
        if ci and issued:
            from .analysis.stats import goodput_bootstrap, goodput_interval, wilson

            out["slo_attainment_ci"] = list(wilson(good, issued))
            if 0 < good < issued:
                gb = goodput_bootstrap(good, issued, duration)
                out["goodput_ci_method"] = "bootstrap over requests"
            else:  # the bootstrap collapses to a point at 0% or 100%; Wilson does not
                gb = goodput_interval(good, issued, duration)
                out["goodput_ci_method"] = "Wilson (bootstrap is degenerate at 0% or 100% attainment)"
            out["goodput_ci"] = list(gb) if gb else None
    else:
        out["slo_met"] = out["slo_attainment"] = out["goodput"] = out["slo_clauses"] = None
    return out


def variants(c: Columns, sel: np.ndarray, itl: dict) -> dict:
    """Other tools' definitions where they differ from goodbench's (docs/metrics.md says who uses each),
    so numbers from different tools can be reconciled. Per-request values, percentiles across requests."""
    ok = c.ok & sel & ~np.isnan(c.first)
    chunk_mean = c.chunk_mean_itl
    with np.errstate(invalid="ignore", divide="ignore"):
        incl = np.where(c.out >= 1, c.e2e / c.out, np.nan)
    return {
        "itl_per_request_ms": {"defined_as": "per request (E2E - TTFT) / (output_tokens - 1); percentiles across "
                               "requests", "used_by": "GenAI-Perf, AIPerf (their ITL); guidellm ITL",
                               **dist(c.tpot[ok & ~np.isnan(c.tpot)])},
        "itl_per_request_chunk_mean_ms": {"defined_as": "per request mean gap between content chunks; "
                                          "percentiles across requests", "used_by": "LLMPerf-style per-request ITL",
                                          **dist(chunk_mean[ok & ~np.isnan(chunk_mean)])},
        "itl_chunk_pooled_ms": {"defined_as": "every gap between content chunks, pooled across requests",
                                "used_by": "goodbench ITL, vllm bench serve, SGLang bench_serving",
                                **{k: v for k, v in itl.items() if k != "ci"}},
        "tpot_incl_ttft_ms": {"defined_as": "per request E2E / output_tokens (the first token's wait included)",
                              "used_by": "guidellm time per output token",
                              **dist(incl[ok & ~np.isnan(incl)])},
    }


def _span(c: Columns, sel: np.ndarray) -> float:
    """First send to last completion within one clock domain."""
    sent = c.sent[sel][~np.isnan(c.sent[sel])]
    ends = np.concatenate([c.fin[sel][~np.isnan(c.fin[sel])], c.last[sel][~np.isnan(c.last[sel])]])
    return float(ends.max() - sent.min()) if sent.size and ends.size else 0.0


def _rate(groups: list[np.ndarray]) -> float | None:
    """Sum over clock domains of (count - 1) / span: requests per second dispatched."""
    total, any_ = 0.0, False
    for t in groups:
        if t.size > 1 and t.max() > t.min():
            total += (t.size - 1) / float(t.max() - t.min())
            any_ = True
    return total if any_ else None


def columns_of(result) -> RunColumns:
    """The non-warm-up requests of a RunResult (records) or ColumnarRun (arrays) as columns."""
    if isinstance(result, ColumnarRun):
        cols = result.cols
        return cols.select(~cols.warmup) if cols.warmup.any() else cols
    return RunColumns.from_records([r for r in result.records if not r.warmup])


def summarize(result: RunResult | ColumnarRun, slo: dict | None = None, lag_limit_ms: float = LAG_P99_LIMIT_MS,
              label: str | None = None, ci: bool = True, prepared: Columns | None = None) -> dict:
    """The summary.json dict. ci=False skips confidence intervals, variants and HOL attribution (sweep
    cells and rate probes, which are summarised by the hundred). prepared: Columns of
    columns_of(result) already built by the caller (reports reuse them for figures)."""
    meta = result.meta
    slo = slo if slo is not None else meta.slo
    cols = prepared.cols if prepared is not None else columns_of(result)
    total = len(result.cols) if isinstance(result, ColumnarRun) else len(result.records)
    c = prepared if prepared is not None else Columns(cols)
    n = len(cols)
    domains = [cols.origin == o for o in range(len(cols.origin_names))] or [np.zeros(0, bool)]
    # one clock per origin (load-generator process or host): spans are measured within a clock only
    duration = max(_span(c, d) for d in domains)
    s: dict = {"run_id": meta.run_id, "label": label or meta.label, "slo": slo or None}
    everyone = np.ones(n, bool)
    # the per-class blocks and HOL attribution are independent of the overall block; numpy releases
    # the GIL in its partitions and copies, so on a big run a second core halves the wall time
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(max_workers=2) if n >= PARALLEL_MIN else None

    def later(fn, *a):
        if pool is None:
            return _Done(fn(*a))
        return pool.submit(fn, *a)

    futures = {k: later(_block, c, cols.cls == code, slo, duration, ci)
               for code, k in enumerate(cols.cls_names)} if len(cols.cls_names) > 1 else {}
    hol_future = later(hol_block, cols, c, duration) if ci else None
    block = _block(c, everyone, slo, duration, ci)
    s["requests"] = block.pop("requests")
    s["duration_s"] = duration
    s.update(block)
    # offered load: what the generator actually dispatched vs what its schedule said
    s["achieved_rate"] = _rate([c.sent[d][~np.isnan(c.sent[d])] for d in domains])
    s["scheduled_rate"] = _rate([c.sched[d] for d in domains])
    s["requested_rate"] = meta.requested_rate
    s["warmup_excluded"] = total - n
    warnings: list[str] = []
    valid = True
    lag99 = s["schedule_lag_ms"]["p99"]
    if meta.mode == "open" and lag99 is not None and lag99 > lag_limit_ms and not meta.max_concurrency:
        valid = False
        warnings.append(f"load generator fell behind: schedule lag p99 {lag99:.1f} ms > {lag_limit_ms:g} ms; "
                        "latencies from sent_at are optimistic. Use --workers N or a lower rate.")
    if (meta.mode == "open" and not meta.max_concurrency and s["achieved_rate"] and s["scheduled_rate"]
            and s["achieved_rate"] < s["scheduled_rate"] * (1 - RATE_SHORTFALL)):
        valid = False
        warnings.append(f"achieved rate {s['achieved_rate']:.2f} req/s is more than "
                        f"{RATE_SHORTFALL:.0%} under the schedule's {s['scheduled_rate']:.2f} req/s.")
    if meta.mode == "open" and meta.max_concurrency and lag99 is not None and lag99 > lag_limit_ms:
        warnings.append(f"--max-concurrency {meta.max_concurrency} held requests back (lag p99 {lag99:.0f} ms); "
                        "this is a capped open loop, not the requested arrival process.")
    for key in ("ttft_ms", "itl_ms", "tpot_ms"):
        nn = s[key]["n"]
        if 0 < nn < MIN_P99_SAMPLES:
            warnings.append(f"{key[:-3].upper()} p99 rests on only {nn} samples (< {MIN_P99_SAMPLES}); "
                            "run more requests before trusting it.")
    okc = c.ok & (c.nchunks > 0)
    n_chunks_src = int((c.ok & (cols.out_source == TOKEN_SOURCES.index("chunks"))).sum())
    if n_chunks_src:
        warnings.append(f"{n_chunks_src} requests counted output tokens from chunks (server sent no usage "
                        "and no tokenizer was available): TPOT may be off.")
    usage = okc & (cols.out_source == TOKEN_SOURCES.index("usage"))
    usage_tot, chunk_tot = int(cols.out_tokens[usage].sum()), int(cols.chunk_tok_sum[usage].sum())
    if usage_tot and abs(usage_tot - chunk_tot) > 0.02 * usage_tot:
        warnings.append(f"server usage reports {usage_tot} output tokens but the stream carried {chunk_tot} "
                        "content chunks: the server packs several tokens per chunk, so ITL is per chunk.")
    warnings.extend(str(w) for w in ((meta.workload or {}).get("caveats") or []))
    if n and s["requests"]["completed"] == 0:
        warnings.append("no request completed: check the target and the error column in records.jsonl.")
    s["valid"] = valid
    s["warnings"] = warnings
    s["per_class"] = {k: f.result() for k, f in futures.items()}
    thin = [f"{k} {m[:-3].upper()} ({b[m]['n']})" for k, b in s["per_class"].items() for m in ("ttft_ms", "tpot_ms")
            if 0 < b[m]["n"] < MIN_P99_SAMPLES]
    if thin:
        warnings.append(f"per-class p99s rest on fewer than {MIN_P99_SAMPLES} samples: {', '.join(thin)}; "
                        "read their intervals, not the point values.")
    if ci:
        s["metric_variants"] = variants(c, everyone, s["itl_ms"])
        s["hol"] = hol_future.result()
    if pool is not None:
        pool.shutdown()
    return s


PARALLEL_MIN = 20_000  # requests; below it threads cost more than they save


class _Done:
    def __init__(self, value):
        self.value = value

    def result(self):
        return self.value


def hol_block(cols: RunColumns, c: Columns, duration: float) -> dict | None:
    """Short-class TTFT and ITL while a long prefill was in flight vs while none was (analysis.hol)."""
    from .analysis.hol import classify

    h = classify(cols, c.gaps, c.gap_count, duration)
    if h is None:
        return None

    def split(values: np.ndarray, sel: np.ndarray, during: np.ndarray) -> dict:
        d_in, d_out = dist(values[sel & during]), dist(values[sel & ~during])
        both = d_in["n"] and d_out["n"]
        return {"during_long_prefill": d_in, "clear": d_out,
                "p50_ratio": d_in["p50"] / d_out["p50"] if both and d_out["p50"] else None,
                "p99_ratio": d_in["p99"] / d_out["p99"] if both and d_out["p99"] else None}

    return {"long_class": h.long_class, "short_classes": [k for k in cols.cls_names if k != h.long_class],
            "long_prefill_window": "a long request's send to its first token",
            "long_prefill_time_share": h.time_share,
            "ttft_ms": split(c.ttft, h.short, h.ttft_during), "itl_ms": split(c.gaps, h.gap_short, h.gap_during)}
