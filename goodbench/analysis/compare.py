"""BASE vs NEW: per-metric deltas with a bootstrap confidence interval of the difference, a Mann-Whitney U
p-value for per-request distributions, and a verdict.

The two runs are independent samples, so each replicate resamples each run on its own (requests; for ITL
whole requests, whose gaps are pooled) and takes the difference of the statistic. A metric is `better`
or `worse` when the interval of the difference excludes zero, else `no significant change`. A `worse`
metric is a regression only when its whole interval lies beyond the practical margin: max(margin x
base, 1 ms for latencies, 1 point for SLO attainment) (limits.practical_threshold), so noise that a
simulation's tiny intervals call significant is not a regression. Latencies are resampled in blocks of
consecutive requests and goodput's duration with the arrivals, so a different seed is not a change."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from ..limits import PRACTICAL_MARGIN, margin_text, practical_threshold
from ..metrics import RequestMetrics
from ..metrics.stats import cluster_replicates

RESAMPLES = 500
LOAD_TOLERANCE = 0.05  # achieved rates further apart than this: the runs offered different loads
MAX_BOOT = 50_000  # samples per run resampled exactly; above, a normal approximation from order statistics

LATENCY = (("ttft", 50), ("ttft", 99), ("tpot", 50), ("tpot", 99), ("itl", 50), ("itl", 99), ("e2el", 50), ("e2el", 99))


@dataclass
class Delta:
    metric: str
    unit: str
    base: float | None
    new: float | None
    delta: float | None
    rel: float | None
    ci: tuple[float, float] | None
    p_value: float | None  # Mann-Whitney U, two-sided (per-request metrics only)
    verdict: str  # better | worse | no significant change | not comparable
    regression: bool = False
    threshold: float | None = None  # the practical margin, in unit: a smaller worsening is no regression
    load_explained: bool = False  # worse beyond the margin, but the new run offered more load (not a regression)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["ci"] = list(self.ci) if self.ci else None
        return d


def _blocks(counts: np.ndarray) -> np.ndarray:
    """Values per cluster for a block bootstrap: about sqrt(n) blocks of consecutive requests (in send
    order), so that load swings within a run, which move every request near them together, are resampled
    whole; resampling single requests would call a seed's different arrivals a significant change."""
    n = counts.size
    size = max(1, int(np.ceil(np.sqrt(n))))
    return np.add.reduceat(counts, np.arange(0, n, size)) if n else counts


def _values(c: RequestMetrics, key: str) -> tuple[np.ndarray, np.ndarray | None]:
    """(the values in send order, their blocks' sizes)."""
    ok = c.ok & ~np.isnan(c.first)
    if key == "itl":  # per token, as the summary's itl_ms
        rows = np.flatnonzero(c.ok)
        rows = rows[np.argsort(c.sent[rows], kind="stable")]
        counts = c.itl_count[rows]
        start = np.concatenate(([0], np.cumsum(c.itl_count)))[rows]
        shift = np.repeat(start - np.concatenate(([0], np.cumsum(counts)))[:-1], counts)
        return c.itl[shift + np.arange(counts.sum())], _blocks(counts)
    v = {"ttft": c.ttft, "tpot": c.tpot, "e2el": c.e2e}[key]
    rows = np.flatnonzero(ok & ~np.isnan(v))
    rows = rows[np.argsort(c.sent[rows], kind="stable")]
    return v[rows], _blocks(np.ones(rows.size, np.int64))


def _normal_se(v: np.ndarray, q: float) -> float:
    from ..metrics.stats import order_stat_ranks

    lo, hi = order_stat_ranks(v.size, q * 100)
    part = np.partition(v, [lo, hi])
    return float(part[hi] - part[lo]) / (2 * 1.96)


def _verdict(lo: float, hi: float, lower_is_better: bool) -> str:
    if lo > 0:
        return "worse" if lower_is_better else "better"
    if hi < 0:
        return "better" if lower_is_better else "worse"
    return "no significant change"


def compare_latency(base: RequestMetrics, new: RequestMetrics, level: float = 0.95, seed: int = 0) -> list[Delta]:
    from scipy.stats import mannwhitneyu, norm

    rng = np.random.default_rng(seed)
    a = (1 - level) / 2
    out = []
    cache, reps = {}, {}
    for key, pct in LATENCY:
        if key not in cache:
            cache[key] = (_values(base, key), _values(new, key))
        (vb, gb), (vn, gn) = cache[key]
        pcts = np.array([p for k, p in LATENCY if k == key]) / 100
        name = f"{key}_p{pct}"
        if vb.size < 2 or vn.size < 2:
            out.append(Delta(name, "ms", None, None, None, None, None, None, "not comparable"))
            continue
        q = pct / 100
        pb, pn = float(np.percentile(vb, pct)) * 1000, float(np.percentile(vn, pct)) * 1000
        if vb.size <= MAX_BOOT and vn.size <= MAX_BOOT:
            if key not in reps:
                reps[key] = (
                    cluster_replicates(vn, gn, pcts, rng, RESAMPLES) - cluster_replicates(vb, gb, pcts, rng, RESAMPLES)
                ) * 1000
            d = reps[key][:, list(pcts).index(q)]
            lo, hi = np.nanpercentile(d, [a * 100, 100 - a * 100])
        else:
            se = np.hypot(_normal_se(vb, q), _normal_se(vn, q)) * 1000
            z = float(norm.ppf(1 - a))
            lo, hi = pn - pb - z * se, pn - pb + z * se
        p = None
        if key != "itl":  # gaps within a request are not independent: no rank test on pooled ITL
            p = float(mannwhitneyu(vb, vn, alternative="two-sided").pvalue)
        out.append(
            Delta(
                name,
                "ms",
                pb,
                pn,
                pn - pb,
                (pn - pb) / pb if pb else None,
                (float(lo), float(hi)),
                p,
                _verdict(lo, hi, lower_is_better=True),
            )
        )
    return out


def _durations(c: RequestMetrics | None, duration: float, rng) -> np.ndarray | float:
    """A run's duration resampled with its arrivals: the span of its sends replaced by a sum of as many
    gaps drawn from its own (normal approximation), the tail after the last send kept. Two runs of one
    workload with different seeds differ by this much in goodput with nothing changed in the server."""
    sent = np.sort(c.sent[~np.isnan(c.sent)]) if c is not None else np.zeros(0)
    if sent.size < 3 or not duration:
        return duration
    gaps = np.diff(sent)
    spread = float(np.std(gaps, ddof=1)) * np.sqrt(gaps.size)
    return np.maximum(duration + spread * rng.standard_normal(RESAMPLES), duration * 0.01)


def compare_rates(sb: dict, sn: dict, level: float = 0.95, seed: int = 0, cols: tuple | None = None) -> list[Delta]:
    """SLO attainment and goodput: each run's count meeting the SLO resampled as Binomial(n, (k+1)/(n+2));
    the resampled difference is centred on the smoothed estimates, the deltas reported are the raw ones.
    cols: (base, new) RequestMetrics: goodput's duration is resampled with the arrivals too."""
    rng = np.random.default_rng(seed + 1)
    a = (1 - level) / 2
    out = []
    if sb.get("slo_attainment") is None or sn.get("slo_attainment") is None:
        return out
    nb, kb, nn, kn = sb["requests"]["issued"], sb["slo_met"], sn["requests"]["issued"], sn["slo_met"]
    # add-one smoothing ((k+1)/(n+2)) keeps a run at 0% or 100% from resampling to a single value
    rb = rng.binomial(nb, (kb + 1) / (nb + 2), RESAMPLES) if nb else np.zeros(RESAMPLES)
    rn = rng.binomial(nn, (kn + 1) / (nn + 2), RESAMPLES) if nn else np.zeros(RESAMPLES)
    cb, cn = cols or (None, None)
    for name, unit, f_b, f_n, scale, reps in (
        ("slo_attainment", "fraction", sb["slo_attainment"], sn["slo_attainment"], (nb, nn), (nb, nn)),
        (
            "goodput",
            "req/s",
            sb["goodput"],
            sn["goodput"],
            (sb["duration_s"], sn["duration_s"]),
            (_durations(cb, sb["duration_s"], rng), _durations(cn, sn["duration_s"], rng)),
        ),
    ):
        if not (scale[0] and scale[1]) or f_b is None or f_n is None:
            continue
        d = rn / reps[1] - rb / reps[0]
        lo, hi = np.percentile(d, [a * 100, 100 - a * 100])
        out.append(
            Delta(
                name,
                unit,
                f_b,
                f_n,
                f_n - f_b,
                (f_n - f_b) / f_b if f_b else None,
                (float(lo), float(hi)),
                None,
                _verdict(lo, hi, lower_is_better=False),
            )
        )
    return out


def _beyond(d: Delta) -> bool:
    """The whole interval of the difference lies past the practical threshold on the worse side: the
    change is both significant and, at the interval's near end, larger than the margin."""
    if d.ci is None or d.delta is None:
        return False
    near = min(abs(d.ci[0]), abs(d.ci[1]))
    return near > (d.threshold or 0.0)


def compare(
    base_c: RequestMetrics,
    new_c: RequestMetrics,
    base_s: dict,
    new_s: dict,
    level: float = 0.95,
    margin: float = PRACTICAL_MARGIN,
    seed: int = 0,
) -> dict:
    deltas = compare_rates(base_s, new_s, level, seed, (base_c, new_c)) + compare_latency(base_c, new_c, level, seed)
    for d in deltas:
        d.threshold = practical_threshold(d.unit, d.base, margin) if d.base is not None else None
        d.regression = d.verdict == "worse" and _beyond(d)
    rb, rn = base_s.get("achieved_rate"), new_s.get("achieved_rate")
    heavier = bool(rb and rn and rn > rb * (1 + LOAD_TOLERANCE))
    for d in deltas:  # an open-loop run's goodput follows its offered load: a drop the arrivals explain is theirs
        if d.metric == "goodput" and d.regression and rb and rn and d.base:
            d.regression = d.new / d.base < (rn / rb) * (1 - margin)
        elif d.unit == "ms" and d.regression and heavier:  # more load, longer latencies: not the server's change
            d.regression, d.load_explained = False, True
    warnings = [
        f"{w} ({which})"
        for which, s in (("base", base_s), ("new", new_s))
        for w in s.get("warnings", [])
        if "fell behind" in w or "under the schedule" in w
    ]
    if rb and rn and abs(rn - rb) > LOAD_TOLERANCE * max(rb, rn):
        warnings.append(
            f"the runs offered different loads ({rb:.2f} vs {rn:.2f} req/s achieved): goodput and "
            "latency deltas mix the server's change with the load's"
            + (
                "; latencies that got worse under the heavier new load are not called regressions (give both "
                "runs the same --seed for the same arrivals)"
                if heavier
                else ""
            )
        )
    return {
        "base": base_s.get("run_id"),
        "new": new_s.get("run_id"),
        "level": level,
        "margin": margin,
        "margin_rule": margin_text(margin),
        "method": "bootstrap of the difference (requests resampled; ITL by whole request), "
        "Mann-Whitney U p-value for per-request metrics",
        "metrics": [d.to_dict() for d in deltas],
        "regressions": [d.metric for d in deltas if d.regression],
        "warnings": warnings,
    }
