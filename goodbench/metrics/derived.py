"""Per-request derived metrics as arrays (RequestMetrics), computed once from a run's RecordArrays:
the one definition of TTFT, ITL, TPOT, E2E and schedule lag every summary, report and export reads.
measured_arrays picks the requests that count (warm-up excluded). Pure numpy."""

from __future__ import annotations

import numpy as np

from ..columnar import RecordArrays, RunArrays, gap_counts, gaps_of
from ..records import request_slo


class RequestMetrics:
    """TTFT = first content chunk - sent; E2E = last content chunk - sent; TPOT = (E2E - TTFT) /
    (output tokens - 1); ITL = gaps between content chunks (pooled); lag = sent - scheduled."""

    def __init__(self, src):
        cols = src if isinstance(src, RecordArrays) else RecordArrays.from_records(list(src))
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
        self.gaps = gaps_of(cols)  # per chunk (vLLM's ITL; stalls, HOL attribution)
        self.itl, self.itl_count = per_token_gaps(cols, self.gaps, self.gap_count)
        self.ttft = self.first - self.sent
        # the first answer token; records written before answers were told apart (or without reasoning)
        # have none stored: their first token is their first answer token
        answer = np.where(np.isnan(cols.first_answer) & (cols.reasoning_tokens == 0), self.first, cols.first_answer)
        self.ttfo = answer - self.sent
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
        """Per request: succeeded and this one threshold holds (TPOT holds trivially below 2 tokens; a
        request with no answer token misses a TTFO threshold)."""
        vals = {
            "ttft": self.ttft,
            "ttfo": self.ttfo,
            "tpot": np.nan_to_num(self.tpot, nan=0.0),
            "e2el": self.e2e,
            "max_itl": self.max_itl,
        }[key]
        with np.errstate(invalid="ignore"):
            return self.ok & ~np.isnan(self.first) & (vals * 1000.0 <= ms)

    def meets(self, slo: dict | None) -> np.ndarray | None:
        slo = request_slo(slo)
        if not slo:
            return None
        m = self.ok & ~np.isnan(self.first)
        for k, ms in slo.items():
            m &= self.clause(k, ms)
        return m


def measured_arrays(result) -> RecordArrays:
    """The requests that count (warm-up excluded) of a RunResult or RunArrays, as RecordArrays."""
    if isinstance(result, RunArrays):
        cols = result.cols
        return cols.select(~cols.warmup) if cols.warmup.any() else cols
    return RecordArrays.from_records([r for r in result.records if not r.warmup])


def per_token_gaps(cols: RecordArrays, gaps: np.ndarray, gap_count: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ITL per token: a chunk carrying k tokens after a gap g gives k samples of g / k (the tokens of a
    request's first chunk belong to its TTFT). The same arrays as the per-chunk gaps when every chunk is
    one token (no copy). Returns (pooled samples, samples per request)."""
    if not cols.tokens.size:
        return gaps, gap_count
    later = np.ones(cols.chunk_times.size, bool)
    starts = cols.offsets[:-1][cols.nchunks > 0]
    later[starts] = False  # a request's first chunk has no gap before it
    k = np.maximum(cols.tokens[later].astype(np.int64), 1)
    samples = np.repeat((gaps / k).astype(gaps.dtype), k)
    per_request = np.add.reduceat(k, (np.cumsum(gap_count) - gap_count)[gap_count > 0]) if k.size else k
    counts = np.zeros(len(cols), np.int64)
    counts[gap_count > 0] = per_request
    return samples, counts
