"""Confidence intervals (metrics.stats) and the intervals summary.json carries."""

import numpy as np
import pytest
from recs import rec
from scipy.stats import binom

from goodbench.metrics import stats, summarize
from goodbench.metrics.stats import goodput_interval, wilson
from goodbench.records import RunMeta, RunResult


def test_goodput_bootstrap_is_the_binomial_quantiles():
    lo, hi = stats.goodput_bootstrap(50, 100, 10.0)
    assert (lo, hi) == (binom.ppf(0.025, 100, 0.5) / 10, binom.ppf(0.975, 100, 0.5) / 10) == (4.0, 6.0)


def test_order_statistic_interval_covers_the_true_median_about_95_percent():
    rng = np.random.default_rng(1)
    true_median = np.log(2)  # exponential(1)
    hits = 0
    for _ in range(300):
        ci = stats.percentile_ci(rng.exponential(size=3000), [50])
        assert ci["method"] == "order statistic"
        hits += ci["p50"][0] <= true_median <= ci["p50"][1]
    assert 0.91 <= hits / 300 <= 0.99


def test_bootstrap_and_order_statistic_agree_where_they_meet():
    v = np.random.default_rng(2).lognormal(size=stats.BOOT_MAX)
    boot = stats.percentile_ci(v, [50, 90, 99])
    ranks = [stats.order_stat_ranks(v.size, p) for p in (50, 90, 99)]
    sv = np.sort(v)
    assert boot["method"] == "bootstrap"
    for (a, b), key in zip(ranks[:2], ("p50", "p90")):
        width = sv[b] - sv[a]
        assert abs(boot[key][0] - sv[a]) < 0.35 * width and abs(boot[key][1] - sv[b]) < 0.35 * width
    # in the far tail the percentile bootstrap is known to run short; the intervals still overlap
    a, b = ranks[2]
    assert boot["p99"][0] < sv[b] and sv[a] < boot["p99"][1]


def test_cluster_bootstrap_is_wider_than_iid_when_gaps_cluster():
    # 40 requests, 50 identical gaps each: really 40 samples, not 2000
    rng = np.random.default_rng(3)
    per = rng.lognormal(size=40)
    v = np.repeat(per, 50)
    groups = np.full(40, 50)
    clustered = stats.percentile_ci(v, [50], groups=groups)
    iid = stats.percentile_ci(v, [50])
    assert clustered["method"].startswith("cluster")
    assert (clustered["p50"][1] - clustered["p50"][0]) > 2 * (iid["p50"][1] - iid["p50"][0])


def test_summary_carries_intervals_beside_the_numbers():
    recs = [rec(i, sent=i * 0.1, chunks=(i * 0.1 + 0.05 + 0.001 * (i % 7), i * 0.1 + 0.1)) for i in range(300)]
    s = summarize(RunResult(RunMeta("t", slo={"ttft": 54}), recs))
    ci = s["ttft_ms"]["ci"]
    assert ci["p50"][0] <= s["ttft_ms"]["p50"] <= ci["p50"][1] and ci["level"] == 0.95
    assert s["slo_attainment_ci"][0] < s["slo_attainment"] < s["slo_attainment_ci"][1]
    assert s["goodput_ci"][0] < s["goodput"] < s["goodput_ci"][1]
    assert s["itl_ms"]["ci"]["method"].startswith("cluster")
    # sweeps skip them
    assert "ci" not in summarize(RunResult(RunMeta("t"), recs), ci=False)["ttft_ms"]


def test_wilson_known_values():
    lo, hi = wilson(95, 100)
    assert lo == pytest.approx(0.8882, abs=1e-3) and hi == pytest.approx(0.9785, abs=1e-3)
    assert wilson(0, 0) == (0.0, 1.0)
    lo, hi = wilson(100, 100)
    assert hi == 1.0 and lo == pytest.approx(0.9630, abs=1e-3)
    g = goodput_interval(95, 100, 10.0)
    assert g[0] == pytest.approx(8.882, abs=0.01) and g[1] == pytest.approx(9.785, abs=0.01)
