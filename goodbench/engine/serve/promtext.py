"""Minimal Prometheus text exposition (counters, gauges, histograms) with vLLM's metric names."""

from __future__ import annotations

from bisect import bisect_left

TTFT_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
)
ITL_BUCKETS = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
ITER_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
# vLLM's request-level buckets (queue, prefill, e2e latency)
REQUEST_BUCKETS = (
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
)
LATENESS_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)


class Histogram:
    __slots__ = ("name", "help", "bounds", "counts", "sum", "count")

    def __init__(self, name: str, help: str, bounds):
        self.name, self.help, self.bounds = name, help, tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)
        self.sum = 0.0
        self.count = 0

    def observe(self, v: float) -> None:
        self.counts[bisect_left(self.bounds, v)] += 1
        self.sum += v
        self.count += 1

    def render(self, labels: str) -> list[str]:
        return [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} histogram"] + self.series(labels)

    def series(self, labels: str) -> list[str]:
        """The bucket, sum and count lines alone (one family may hold several label sets)."""
        out = []
        acc = 0
        for b, c in zip(self.bounds, self.counts):
            acc += c
            out.append(f'{self.name}_bucket{{{labels},le="{b}"}} {acc}')
        out.append(f'{self.name}_bucket{{{labels},le="+Inf"}} {self.count}')
        out.append(f"{self.name}_sum{{{labels}}} {self.sum}")
        out.append(f"{self.name}_count{{{labels}}} {self.count}")
        return out


def family(name: str, kind: str, help: str, rows) -> list[str]:
    """One metric with a series per (labels, value): HELP and TYPE once, as the text format requires."""
    return [f"# HELP {name} {help}", f"# TYPE {name} {kind}"] + [f"{name}{{{lab}}} {v}" for lab, v in rows]


def histogram_family(rows) -> list[str]:
    """Histograms of one name, one per (labels, Histogram), under one HELP/TYPE header."""
    h0 = rows[0][1]
    out = [f"# HELP {h0.name} {h0.help}", f"# TYPE {h0.name} histogram"]
    for lab, h in rows:
        out += h.series(lab)
    return out
