"""Head-of-line attribution: how much a long prompt's prefill hurts the short requests around it.

A long request's prefill is in flight from its send to its first token (as the client sees it). For the
short classes, TTFT is split by whether the request's own wait [sent, first token] overlapped any long
prefill, and ITL by whether the gap [previous chunk, chunk] did; the ratio of the two p50s and p99s is
the interference. Times from different load-generator processes (origins) are never compared. Pure."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..columnar import RecordArrays
from .dist import dist

MIN_LONG_OVER_SHORT = 2.0  # median prompt length ratio for a class to count as "long"


def long_class(cols: RecordArrays) -> str | None:
    """The class with the longest median prompt, if it is at least twice every other class's."""
    if len(cols.cls_names) < 2:
        return None
    med = {}
    for code, name in enumerate(cols.cls_names):
        p = cols.prompt_tokens[cols.cls == code]
        if p.size:
            med[name] = float(np.median(p))
    if len(med) < 2:
        return None
    top = max(med, key=med.get)
    rest = max(v for k, v in med.items() if k != top)
    return top if rest > 0 and med[top] >= MIN_LONG_OVER_SHORT * rest else None


def _merged(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of intervals as sorted, disjoint (starts, ends)."""
    if not starts.size:
        return starts, ends
    o = np.argsort(starts)
    s, e = starts[o], np.maximum.accumulate(ends[o])
    new = np.ones(s.size, bool)
    new[1:] = s[1:] > e[:-1]
    gs = s[new]
    ge = np.maximum.reduceat(e, np.flatnonzero(new))
    return gs, ge


def overlaps(a: np.ndarray, b: np.ndarray, ms: np.ndarray, me: np.ndarray) -> np.ndarray:
    """For each query [a, b]: does it overlap any merged interval (ms, me)?"""
    if not ms.size:
        return np.zeros(a.size, bool)
    i = np.searchsorted(ms, b, side="left") - 1
    ok = i >= 0
    out = np.zeros(a.size, bool)
    out[ok] = me[i[ok]] > a[ok]
    return out


@dataclass
class HolMasks:
    long_class: str
    short: np.ndarray  # per request: short class, succeeded, has a first token
    ttft_during: np.ndarray  # per request: its wait overlapped a long prefill
    gap_short: np.ndarray  # per pooled gap: belongs to a short request
    gap_during: np.ndarray  # per pooled gap: overlapped a long prefill
    time_share: float | None  # fraction of the run with a long prefill in flight


def classify(
    cols: RecordArrays, gaps: np.ndarray, gap_count: np.ndarray, duration: float, block_gaps: int = 1 << 21
) -> HolMasks | None:
    """None when the run has no long class. Gaps are classified request block by request block, so no
    full-size array of gap times is built (100M gaps fit in memory once, not three times)."""
    long_name = long_class(cols)
    if long_name is None:
        return None
    is_long = cols.cls == cols.cls_names.index(long_name)
    short = ~is_long & cols.ok & ~np.isnan(cols.first)
    merged = []
    covered = 0.0
    for o in range(len(cols.origin_names)):
        lm = is_long & (cols.origin == o) & ~np.isnan(cols.sent)
        # a long request that never produced a token kept its prefill in flight until it ended
        end = np.where(np.isnan(cols.first), cols.finished, cols.first)[lm]
        keep = ~np.isnan(end)
        ms, me = _merged(cols.sent[lm][keep], end[keep])
        covered += float((me - ms).sum())
        merged.append((ms, me))
    ttft_during = np.zeros(len(cols), bool)
    for o, (ms, me) in enumerate(merged):
        q = short & (cols.origin == o)
        ttft_during[q] = overlaps(cols.sent[q], cols.first[q], ms, me)
    gap_short = np.repeat(short, gap_count)
    gap_during = np.zeros(gaps.size, bool)
    off = cols.offsets
    goff = np.zeros(len(cols) + 1, np.int64)
    np.cumsum(gap_count, out=goff[1:])
    # request blocks holding about block_gaps gaps each: temporaries stay a few tens of MB
    cuts = np.searchsorted(goff, np.arange(0, goff[-1] + block_gaps, block_gaps))
    bounds = np.unique(np.concatenate([[0], np.minimum(cuts, len(cols)), [len(cols)]]))
    for i0, i1 in zip(bounds[:-1], bounds[1:]):
        i0, i1 = int(i0), int(i1)
        t = cols.chunk_times[off[i0] : off[i1]]
        nc = cols.nchunks[i0:i1]
        first_local = np.zeros(t.size, bool)
        first_local[(np.cumsum(nc) - nc)[nc > 0]] = True
        ends = t[~first_local]
        starts = ends - gaps[goff[i0] : goff[i1]]
        org = np.repeat(cols.origin[i0:i1], gap_count[i0:i1])
        sel = gap_short[goff[i0] : goff[i1]]
        out = gap_during[goff[i0] : goff[i1]]
        for o, (ms, me) in enumerate(merged):
            m = sel & (org == o)
            out[m] = overlaps(starts[m], ends[m], ms, me)

    return HolMasks(
        long_name, short, ttft_during, gap_short, gap_during, min(1.0, covered / duration) if duration > 0 else None
    )


def hol_block(cols: RecordArrays, c, duration: float) -> dict | None:
    """summary.json's `hol`: short-class TTFT and ITL while a long prefill was in flight vs while none was.
    c: the run's RequestMetrics (gaps and gap counts already computed)."""
    h = classify(cols, c.gaps, c.gap_count, duration)
    if h is None:
        return None

    def split(values: np.ndarray, sel: np.ndarray, during: np.ndarray) -> dict:
        d_in, d_out = dist(values[sel & during]), dist(values[sel & ~during])
        both = d_in["n"] and d_out["n"]
        return {
            "during_long_prefill": d_in,
            "clear": d_out,
            "p50_ratio": d_in["p50"] / d_out["p50"] if both and d_out["p50"] else None,
            "p99_ratio": d_in["p99"] / d_out["p99"] if both and d_out["p99"] else None,
        }

    return {
        "long_class": h.long_class,
        "short_classes": [k for k in cols.cls_names if k != h.long_class],
        "long_prefill_window": "a long request's send to its first token",
        "long_prefill_time_share": h.time_share,
        "ttft_ms": split(c.ttft, h.short, h.ttft_during),
        "itl_ms": split(c.gaps, h.gap_short, h.gap_during),
    }


def stall_p99(cols: RecordArrays, c) -> tuple[float | None, str | None]:
    """(ms, long class): the worst short class's ITL p99 over its gaps that overlapped a long prefill, the
    stall a decoding stream feels when a long prompt lands (a class none of whose gaps overlapped one:
    its ITL p99). What sweeps rank on within a goodput tie (analysis.sweep.rank): a budget that fits the
    whole long prompt pools a low ITL p99 over many clear gaps while every short stream stalls for the
    whole prefill. (None, None) when the run has no long class. c: the run's RequestMetrics."""
    h = classify(cols, c.gaps, c.gap_count, 0.0)
    if h is None:
        return None, None
    gap_cls = np.repeat(cols.cls, c.gap_count)
    worst = None
    for code, name in enumerate(cols.cls_names):
        mine = h.gap_short & (gap_cls == code)
        if name == h.long_class or not mine.any():
            continue
        during = mine & h.gap_during
        p99 = dist(c.gaps[during if during.any() else mine])["p99"]
        worst = p99 if worst is None else max(worst, p99)
    return worst, h.long_class
