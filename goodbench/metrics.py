"""RunResult -> Summary (the summary.json contract). Pure numpy; one definition of every number,
compatible with `vllm bench serve`:

TTFT = first content chunk - sent_at;  ITL = gaps between content chunks (pooled);
TPOT = (E2E - TTFT) / (output_tokens - 1);  E2E = last content chunk - sent_at;
schedule lag = sent_at - scheduled_at;  goodput = requests meeting the SLO / duration;
SLO attainment = requests meeting the SLO / requests issued (failed requests never meet it).
"""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np

from .records import STATUSES, RequestRecord, RunResult

PCTS = (50, 90, 95, 99)
LAG_P99_LIMIT_MS = 10.0
RATE_SHORTFALL = 0.02
MIN_P99_SAMPLES = 100


def dist(values_s: np.ndarray) -> dict:
    """Percentiles (linear interpolation), mean, max in ms, always with n."""
    v = np.asarray(values_s, dtype=float)
    n = int(v.size)
    if n == 0:
        return {"p50": None, "p90": None, "p95": None, "p99": None, "mean": None, "max": None, "n": 0}
    ms = v * 1000.0
    p = np.percentile(ms, PCTS)
    return {"p50": float(p[0]), "p90": float(p[1]), "p95": float(p[2]), "p99": float(p[3]),
            "mean": float(ms.mean()), "max": float(ms.max()), "n": n}


def _ratio(d: dict) -> float | None:
    if d["n"] == 0 or not d["p50"]:
        return None
    return d["p99"] / d["p50"]


class Columns:
    """Per-request derived values as arrays, computed once."""

    def __init__(self, recs: list[RequestRecord]):
        self.recs = recs
        n = len(recs)
        self.ok = np.fromiter((r.status == "ok" for r in recs), bool, n)
        nan = float("nan")
        self.sent = np.fromiter((nan if r.sent_at is None else r.sent_at for r in recs), float, n)
        self.sched = np.fromiter((r.scheduled_at for r in recs), float, n)
        self.first = np.fromiter((nan if r.first_token_at is None else r.first_token_at for r in recs), float, n)
        self.last = np.fromiter((r.chunk_times[-1] if r.chunk_times else nan for r in recs), float, n)
        self.fin = np.fromiter((nan if r.finished_at is None else r.finished_at for r in recs), float, n)
        self.out = np.fromiter((r.output_tokens for r in recs), float, n)
        self.nchunks = np.fromiter((len(r.chunk_times) for r in recs), np.int64, n)
        flat = np.fromiter(itertools.chain.from_iterable(r.chunk_times for r in recs), float,
                           int(self.nchunks.sum()))
        gaps = np.diff(flat) if flat.size else flat
        # a gap is inside one request unless it crosses a boundary between requests
        bounds = np.cumsum(self.nchunks)[:-1] - 1
        keep = np.ones(gaps.size, bool)
        keep[bounds[(bounds >= 0) & (bounds < gaps.size)]] = False
        self.gap_owner = np.repeat(np.arange(n), self.nchunks)[:-1][keep] if gaps.size else np.zeros(0, int)
        self.gaps = gaps[keep]
        self.ttft = self.first - self.sent
        self.e2e = self.last - self.sent
        with np.errstate(invalid="ignore", divide="ignore"):
            self.tpot = np.where(self.out >= 2, (self.e2e - self.ttft) / (self.out - 1), np.nan)
        self.max_itl = np.zeros(n)
        if self.gaps.size:
            np.maximum.at(self.max_itl, self.gap_owner, self.gaps)
        self.lag = self.sent - self.sched

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


def _block(c: Columns, idx: np.ndarray, slo: dict | None, duration: float) -> dict:
    ok = c.ok[idx]
    okidx = idx[ok]
    recs = [c.recs[i] for i in idx]
    by_status = Counter(r.status for r in recs)
    gmask = np.isin(c.gap_owner, okidx) if c.gaps.size else np.zeros(0, bool)
    has_first = okidx[~np.isnan(c.first[okidx])]
    out: dict = {
        "requests": {"issued": int(idx.size), "completed": int(ok.sum()), "failed": int(idx.size - ok.sum()),
                     "by_status": {s: by_status[s] for s in STATUSES if by_status[s]}},
        "request_throughput": float(ok.sum() / duration) if duration > 0 else None,
        "output_throughput": float(c.out[okidx].sum() / duration) if duration > 0 else None,
        "ttft_ms": dist(c.ttft[has_first]),
        "tpot_ms": dist(c.tpot[okidx][~np.isnan(c.tpot[okidx])]),
        "itl_ms": dist(c.gaps[gmask]),
        "e2el_ms": dist(c.e2e[has_first]),
        "schedule_lag_ms": dist(c.lag[idx][~np.isnan(c.lag[idx])]),
        "ttft_from_scheduled_ms": dist((c.first - c.sched)[has_first]),
        "e2el_from_scheduled_ms": dist((c.last - c.sched)[has_first]),
    }
    out["itl_p99_over_p50"] = _ratio(out["itl_ms"])
    out["ttft_p99_over_p50"] = _ratio(out["ttft_ms"])
    meets = c.meets(slo)
    if meets is not None:
        good = int(meets[idx].sum())
        out["slo_met"] = good
        out["slo_clauses"] = {k: {"threshold_ms": ms, "attainment": float(c.clause(k, ms)[idx].mean()) if idx.size else None}
                              for k, ms in slo.items()}
        out["slo_attainment"] = good / idx.size if idx.size else None
        out["goodput"] = good / duration if duration > 0 else None
    else:
        out["slo_met"] = out["slo_attainment"] = out["goodput"] = out["slo_clauses"] = None
    return out


def _span(c: Columns, idx: np.ndarray) -> float:
    """First send to last completion within one clock domain."""
    sent = c.sent[idx][~np.isnan(c.sent[idx])]
    ends = np.concatenate([c.fin[idx][~np.isnan(c.fin[idx])], c.last[idx][~np.isnan(c.last[idx])]])
    return float(ends.max() - sent.min()) if sent.size and ends.size else 0.0


def _rate(groups: list[np.ndarray]) -> float | None:
    """Sum over clock domains of (count - 1) / span: requests per second dispatched."""
    total, any_ = 0.0, False
    for t in groups:
        if t.size > 1 and t.max() > t.min():
            total += (t.size - 1) / float(t.max() - t.min())
            any_ = True
    return total if any_ else None


def summarize(result: RunResult, slo: dict | None = None, lag_limit_ms: float = LAG_P99_LIMIT_MS,
              label: str | None = None) -> dict:
    meta = result.meta
    slo = slo if slo is not None else meta.slo
    recs = [r for r in result.records if not r.warmup]
    c = Columns(recs)
    n = len(recs)
    origins = np.array([r.origin for r in recs]) if recs else np.array([], dtype=str)
    domains = [np.flatnonzero(origins == o) for o in sorted(set(origins.tolist()))] or [np.arange(0)]
    # one clock per origin (load-generator process or host): spans are measured within a clock only
    duration = max(_span(c, d) for d in domains)
    s: dict = {"run_id": meta.run_id, "label": label or meta.label, "slo": slo or None}
    block = _block(c, np.arange(n), slo, duration)
    s["requests"] = block.pop("requests")
    s["duration_s"] = duration
    s.update(block)
    # offered load: what the generator actually dispatched vs what its schedule said
    s["achieved_rate"] = _rate([c.sent[d][~np.isnan(c.sent[d])] for d in domains])
    s["scheduled_rate"] = _rate([c.sched[d] for d in domains])
    s["requested_rate"] = meta.requested_rate
    s["warmup_excluded"] = len(result.records) - n
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
    sources = Counter(r.output_tokens_source for r in recs if r.status == "ok")
    if sources.get("chunks"):
        warnings.append(f"{sources['chunks']} requests counted output tokens from chunks (server sent no usage "
                        "and no tokenizer was available): TPOT may be off.")
    okm = c.ok & (c.nchunks > 0)
    usage_tot = sum(r.output_tokens for r, m in zip(recs, okm) if m and r.output_tokens_source == "usage")
    chunk_tot = sum(sum(r.chunk_tokens) for r, m in zip(recs, okm) if m and r.output_tokens_source == "usage")
    if usage_tot and abs(usage_tot - chunk_tot) > 0.02 * usage_tot:
        warnings.append(f"server usage reports {usage_tot} output tokens but the stream carried {chunk_tot} "
                        "content chunks: the server packs several tokens per chunk, so ITL is per chunk.")
    if n and s["requests"]["completed"] == 0:
        warnings.append("no request completed: check the target and the error column in records.jsonl.")
    s["valid"] = valid
    s["warnings"] = warnings
    per = {}
    classes = sorted({r.cls for r in recs})
    if len(classes) > 1:
        cls_arr = np.array([r.cls for r in recs])
        for k in classes:
            per[k] = _block(c, np.flatnonzero(cls_arr == k), slo, duration)
    s["per_class"] = per
    return s
