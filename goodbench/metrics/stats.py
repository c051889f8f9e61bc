"""Confidence intervals for the numbers a verdict rests on, from a single run. Pure (numpy/scipy).

- Attainment: Wilson score interval (good at 0% and 100%, where the normal interval collapses).
- Goodput: percentile bootstrap over requests. For a count of requests meeting the SLO the bootstrap
  distribution is Binomial(n, k/n) exactly, so it is computed in closed form (no resampling noise).
- Percentiles of per-request metrics (TTFT, TPOT, E2E): scipy's percentile bootstrap while n is small
  enough to resample cheaply; above that the distribution-free order-statistic interval, which the
  bootstrap converges to (a test checks they agree).
- ITL percentiles pool gaps from many requests, and gaps of one request are not independent (a stall
  hits every gap of the streams it stalls), so they get a cluster bootstrap that resamples whole
  requests; past CLUSTER_MAX gaps, the order-statistic interval, flagged as treating gaps as independent.
"""

from __future__ import annotations

import math

import numpy as np

LEVEL = 0.95
BOOT_MAX = 2000  # per-request samples resampled with scipy.stats.bootstrap
BOOT_RESAMPLES = 1000
CLUSTER_MAX = 100_000  # pooled gaps resampled by request
CLUSTER_RESAMPLES = 400


def _z(level: float) -> float:
    from statistics import NormalDist

    return NormalDist().inv_cdf(0.5 + level / 2)


EXACT_BINOM_MAX = 20_000


def binom_quantiles(n: int, p: float, probs) -> list[int]:
    """Quantiles of Binomial(n, p): exact (log-space pmf) up to EXACT_BINOM_MAX trials, else the normal
    approximation with continuity correction, which is within a count or two there. Stdlib + numpy:
    keeps scipy.stats (a second to import) off the path of big summaries."""
    if p <= 0:
        return [0 for _ in probs]
    if p >= 1:
        return [n for _ in probs]
    if n <= EXACT_BINOM_MAX:
        k = np.arange(n + 1)
        lg = np.array([math.lgamma(i + 1) for i in range(n + 1)])
        logpmf = lg[n] - lg - lg[::-1] + k * math.log(p) + (n - k) * math.log1p(-p)
        cdf = np.cumsum(np.exp(logpmf - logpmf.max()))
        cdf /= cdf[-1]
        return [int(min(np.searchsorted(cdf, q - 1e-12), n)) for q in probs]
    from statistics import NormalDist

    sd = math.sqrt(n * p * (1 - p))
    return [int(min(max(math.ceil(n * p + NormalDist().inv_cdf(q) * sd - 0.5), 0), n)) for q in probs]


def wilson(k: int, n: int, level: float = LEVEL) -> tuple[float, float]:
    """Wilson score interval for a proportion k/n (SLO attainment). (0, 1) when n == 0."""
    if n <= 0:
        return 0.0, 1.0
    z = _z(level)
    p = k / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, centre - half), min(1.0, centre + half)


def goodput_interval(k: int, n: int, duration_s: float, level: float = LEVEL) -> tuple[float, float]:
    """Wilson-based goodput interval: n * Wilson(k, n) / duration (the duration is fixed by the
    schedule). Sweeps rank cells with it because it does not collapse at 100% attainment."""
    if duration_s <= 0:
        return 0.0, 0.0
    lo, hi = wilson(k, n, level)
    return lo * n / duration_s, hi * n / duration_s


def goodput_bootstrap(k: int, n: int, duration_s: float, level: float = LEVEL) -> tuple[float, float] | None:
    """Percentile-bootstrap interval of goodput = k / duration, resampling the n requests: the
    resampled count is Binomial(n, k/n), so its quantiles are the bootstrap's limit. It is (k, k)
    when every request or none met the SLO: read the Wilson attainment interval there."""
    if duration_s <= 0 or n <= 0:
        return None
    a = (1 - level) / 2
    lo, hi = binom_quantiles(n, k / n, [a, 1 - a])
    return lo / duration_s, hi / duration_s


def order_stat_ranks(n: int, pct: float, level: float = LEVEL) -> tuple[int, int]:
    """0-based ranks (lo, hi) bracketing the pct-th percentile with probability >= level, for n
    independent samples: the binomial count of samples below the true quantile."""
    a = (1 - level) / 2
    lo, hi = binom_quantiles(n, pct / 100.0, [a, 1 - a])
    return max(lo - 1, 0), min(hi, n - 1)


def resampled(n: int, groups: np.ndarray | None) -> bool:
    """Whether percentile_ci resamples (small samples) rather than using order statistics."""
    if groups is not None:
        return n <= CLUSTER_MAX and np.count_nonzero(groups) >= 2
    return n <= BOOT_MAX


def order_stat_method(groups) -> str:
    return "order statistic" + (" (gaps treated as independent)" if groups is not None else "")


def order_stat_ci(part: np.ndarray, ranks, pcts, groups=None, level: float = LEVEL) -> dict:
    """The interval dict from an array already partitioned at every rank in ranks (order_stat_ranks)."""
    out: dict = {f"p{p:g}": [float(part[a]), float(part[b])] for p, (a, b) in zip(pcts, ranks)}
    out.update(level=level, method=order_stat_method(groups))
    return out


def percentile_ci(
    values: np.ndarray, pcts, level: float = LEVEL, groups: np.ndarray | None = None, seed: int = 0
) -> dict | None:
    """{"p50": [lo, hi], ..., "method": str} in the values' unit, or None with fewer than 2 samples.
    groups: for pooled samples, how many consecutive values each cluster (request) contributed."""
    v = np.asarray(values, dtype=float)
    n = v.size
    if n < 2:
        return None
    pcts = list(pcts)
    if groups is not None and n <= CLUSTER_MAX and np.count_nonzero(groups) >= 2:
        lo, hi = _cluster_bootstrap(v, np.asarray(groups), pcts, level, seed)
        method = "cluster bootstrap over requests"
    elif groups is None and n <= BOOT_MAX:
        from scipy.stats import bootstrap

        r = bootstrap(
            (v,),
            lambda x, axis: np.percentile(x, pcts, axis=axis),
            n_resamples=BOOT_RESAMPLES,
            confidence_level=level,
            method="percentile",
            vectorized=True,
            random_state=seed,
        )
        lo, hi = np.atleast_1d(r.confidence_interval.low), np.atleast_1d(r.confidence_interval.high)
        method = "bootstrap"
    else:
        ranks = [order_stat_ranks(n, p, level) for p in pcts]
        return order_stat_ci(np.partition(v, sorted({r for pair in ranks for r in pair})), ranks, pcts, groups, level)
    out: dict = {f"p{p:g}": [float(a), float(b)] for p, a, b in zip(pcts, lo, hi)}
    out["level"] = level
    out["method"] = method
    return out


def cluster_replicates(v: np.ndarray, groups: np.ndarray | None, qs, rng, b: int) -> np.ndarray:
    """(b, len(qs)) bootstrap replicates of the quantiles qs (fractions) of pooled values, resampling
    clusters (requests; groups[i] consecutive values each, None = every value its own cluster): one
    sort, then per replicate each value weighted by how often its cluster was drawn. O(values) each."""
    groups = np.ones(v.size, np.int64) if groups is None else np.asarray(groups)
    qs = np.asarray(qs, float)
    owners = np.repeat(np.arange(groups.size), groups)
    order = np.argsort(v, kind="stable")
    sv, so = v[order], owners[order]
    m = groups.size
    out = np.full((b, qs.size), np.nan)
    for i in range(b):
        cw = np.cumsum(np.bincount(rng.integers(0, m, m), minlength=m)[so])
        if cw[-1]:
            out[i] = sv[np.minimum(np.searchsorted(cw, np.maximum(qs * cw[-1], 1)), sv.size - 1)]
    return out


def _cluster_bootstrap(v: np.ndarray, groups: np.ndarray, pcts, level: float, seed: int):
    reps = cluster_replicates(v, groups, np.array(pcts, float) / 100.0, np.random.default_rng(seed), CLUSTER_RESAMPLES)
    a = (1 - level) / 2 * 100
    return np.nanpercentile(reps, a, axis=0), np.nanpercentile(reps, 100 - a, axis=0)
