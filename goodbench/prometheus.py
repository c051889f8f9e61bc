"""Prometheus text exposition, read: the one parser and the few questions goodbench asks of a scraped
series. Pure. A sample is {"name{labels}": value} (histogram buckets dropped, their _sum and _count
kept); server_metrics.jsonl holds one row per scrape, {"t": run-clock seconds, "metrics": sample}.

    parse(text)          exposition text -> sample
    total(sample, name)  one metric summed over its label sets (engines, models); None when absent
    series(rows, name)   (times, totals) over the rows that have it; None when none do
    delta(rows, name)    last - first total of a counter over the rows; None with fewer than two
    delta_by(rows, name, label)  the same per value of one label (a counter's per-position series)"""

from __future__ import annotations

import re

_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{[^}]*\})?)\s+(\S+)")


def parse(text: str) -> dict[str, float]:
    """Exposition text -> {name{labels}: value}, histogram buckets left out (sums and counts kept)."""
    out = {}
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        m = _LINE.match(line)
        if not m or "_bucket" in m.group(1):
            continue
        try:
            out[m.group(1)] = float(m.group(2))
        except ValueError:
            continue
    return out


def total(sample: dict, name: str) -> float | None:
    """One metric summed over its label sets in a sample; None when absent."""
    vals = [v for key, v in sample.items() if key.split("{", 1)[0] == name]
    return float(sum(vals)) if vals else None


def series(rows: list[dict], name: str) -> tuple[list[float], list[float]] | None:
    """(times, totals) of one metric over the rows that carry it and a time; None when none do."""
    ts, vs = [], []
    for r in rows:
        v = total(r.get("metrics") or {}, name)
        if v is not None and isinstance(r.get("t"), (int, float)):
            ts.append(float(r["t"]))
            vs.append(v)
    return (ts, vs) if ts else None


def delta(rows: list[dict], name: str) -> float | None:
    """last - first total of a counter over the rows (None with fewer than two samples of it)."""
    vals = [v for v in (total(r.get("metrics") or {}, name) for r in rows) if v is not None]
    return vals[-1] - vals[0] if len(vals) >= 2 else None


def delta_by(rows: list[dict], name: str, label: str) -> dict[str, float]:
    """delta() per value of one label, summed over the other labels ({} where no value has two samples)."""
    pat = re.compile(label + r'="([^"]*)"')
    per: dict[str, list[float]] = {}
    for r in rows:
        seen: dict[str, float] = {}
        for key, v in (r.get("metrics") or {}).items():
            if key.split("{", 1)[0] == name and (m := pat.search(key)):
                seen[m.group(1)] = seen.get(m.group(1), 0.0) + v
        for k, v in seen.items():
            per.setdefault(k, []).append(v)
    return {k: vs[-1] - vs[0] for k, vs in per.items() if len(vs) >= 2}
