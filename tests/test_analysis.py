"""Statistics (CIs), HOL attribution, metric-definition variants, the columnar form and compare."""

import json

import numpy as np
import pytest
from scipy.stats import binom

from goodbench.metrics import stats
from goodbench.analysis.compare import compare
from goodbench.columnar import ColumnarRun, RunColumns, gaps_of
from goodbench.metrics import Columns, summarize
from goodbench.records import RequestRecord, RunMeta, RunResult
from goodbench.store import RunStore, load, load_columns


def rec(i, cls="a", sent=0.0, chunks=(), out=None, status="ok", prompt=10, warmup=False, origin=""):
    return RequestRecord(id=f"r{i}", cls=cls, scheduled_at=sent, sent_at=sent,
                         first_token_at=chunks[0] if chunks else None, finished_at=chunks[-1] if chunks else sent,
                         chunk_times=tuple(chunks), chunk_tokens=(1,) * len(chunks),
                         output_tokens=len(chunks) if out is None else out, output_tokens_source="usage",
                         prompt_tokens=prompt, status=status, warmup=warmup, origin=origin)


# ------------------------------------------------------------------------------------------------ stats
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


# ------------------------------------------------------------------------------------------------- HOL
def test_hol_attribution_splits_short_requests_by_overlap_with_long_prefills():
    recs = [
        rec(0, "long", sent=1.0, chunks=(2.0, 2.01), prompt=4000),        # long prefill in flight 1.0-2.0
        rec(1, "short", sent=1.5, chunks=(1.9, 1.91), prompt=50),         # TTFT 400 ms, during
        rec(2, "short", sent=3.0, chunks=(3.1, 3.11), prompt=50),         # TTFT 100 ms, clear
        rec(3, "short", sent=0.0, chunks=(0.1, 0.2, 1.2, 2.5), prompt=50),  # gaps 100 clear, 1000 during, 1300 during
    ]
    s = summarize(RunResult(RunMeta("t"), recs))
    h = s["hol"]
    assert h["long_class"] == "long" and h["short_classes"] == ["short"]
    t = h["ttft_ms"]
    assert t["during_long_prefill"]["n"] == 1 and t["during_long_prefill"]["p50"] == pytest.approx(400)
    assert t["clear"]["n"] == 2  # requests 2 and 3
    g = h["itl_ms"]
    assert g["during_long_prefill"]["n"] == 3  # 1.9->1.91, 0.2->1.2, 1.2->2.5 (straddles the end)
    assert g["during_long_prefill"]["max"] == pytest.approx(1300)
    assert g["clear"]["n"] == 2 and g["clear"]["max"] == pytest.approx(100)  # 0.1->0.2, 3.1->3.11
    assert h["long_prefill_time_share"] == pytest.approx(1.0 / 3.11)


def test_no_hol_block_without_a_clearly_longer_class():
    recs = [rec(0, "a", chunks=(0.1, 0.2), prompt=100), rec(1, "b", chunks=(0.1, 0.2), prompt=150)]
    assert summarize(RunResult(RunMeta("t"), recs))["hol"] is None


def test_hol_never_compares_times_across_origins():
    recs = [rec(0, "long", sent=1.0, chunks=(2.0,), prompt=4000, origin="w0"),
            rec(1, "short", sent=1.5, chunks=(1.9,), prompt=50, origin="w1")]
    h = summarize(RunResult(RunMeta("t"), recs))["hol"]
    assert h["ttft_ms"]["during_long_prefill"]["n"] == 0 and h["ttft_ms"]["clear"]["n"] == 1


# -------------------------------------------------------------------------------------------- variants
def test_metric_variants_follow_each_tools_definition():
    # 6 tokens in 3 chunks of 2: sent 0, chunks at 0.1, 0.2, 0.3
    r = RequestRecord(id="x", cls="a", scheduled_at=0, sent_at=0, first_token_at=0.1, finished_at=0.3,
                      chunk_times=(0.1, 0.2, 0.3), chunk_tokens=(2, 2, 2), output_tokens=6,
                      output_tokens_source="usage")
    v = summarize(RunResult(RunMeta("t"), [r]))["metric_variants"]
    assert v["itl_per_request_ms"]["p50"] == pytest.approx(40)           # (0.3 - 0.1) / 5
    assert v["itl_per_request_chunk_mean_ms"]["p50"] == pytest.approx(100)
    assert v["itl_chunk_pooled_ms"]["p50"] == pytest.approx(100)
    assert v["tpot_incl_ttft_ms"]["p50"] == pytest.approx(50)            # 0.3 / 6
    assert "GenAI-Perf" in v["itl_per_request_ms"]["used_by"]


# -------------------------------------------------------------------------------------------- columnar
def _recs(n=50, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        k = int(rng.integers(0, 6))
        t = float(i) * 0.05
        chunks = tuple(np.cumsum(rng.exponential(0.02, k)) + t + 0.01) if k else ()
        status = "ok" if k or i % 3 else "timeout"
        out.append(rec(i, cls="ab"[i % 2], sent=t, chunks=chunks, status=status, warmup=i < 3, prompt=10 + i))
    return out


def test_columns_round_trip_and_gap_helpers():
    recs = _recs()
    cols = RunColumns.from_records(recs)
    back = cols.to_records()
    assert [r.chunk_times for r in back] == [tuple(r.chunk_times) for r in recs]
    assert [r.status for r in back] == [r.status for r in recs]
    gaps = gaps_of(cols, block=7, dtype=float)  # small blocks exercise the block boundaries
    want = np.concatenate([np.diff(r.chunk_times) for r in recs if len(r.chunk_times) > 1])
    assert np.array_equal(gaps, want)


def test_summary_from_the_sidecar_equals_the_summary_from_records(tmp_path):
    recs = _recs(200, seed=4)
    meta = RunMeta("r", slo={"ttft": 30})
    st = RunStore(str(tmp_path), "r")
    st.start(meta)
    st.append_many(recs)
    st.finish(meta, None)
    first = load_columns(st.dir)  # parses records.jsonl, writes columns/
    assert (tmp_path / "r" / "columns" / "columns.json").exists()
    second = load_columns(st.dir)  # from the sidecar
    a = summarize(load(st.dir))  # records as written (times rounded to 0.1 us)
    b, c = summarize(first), summarize(second)
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True) == json.dumps(c, sort_keys=True)
    assert a["warmup_excluded"] == 3


def test_a_stale_sidecar_is_rebuilt(tmp_path):
    recs = _recs(20)
    meta = RunMeta("r")
    st = RunStore(str(tmp_path), "r")
    st.start(meta)
    st.append_many(recs[:10])
    st.close()
    assert len(load_columns(st.dir).cols) == 10
    st.open_records()
    st.append_many(recs[10:])
    st.close()
    assert len(load_columns(st.dir).cols) == 20


# --------------------------------------------------------------------------------------------- compare
def _run(offset_s: float, n=400, seed=0):
    rng = np.random.default_rng(seed)
    recs = []
    for i in range(n):
        t = i * 0.05
        ttft = 0.05 + rng.exponential(0.01) + offset_s
        chunks = tuple(t + ttft + np.cumsum(0.01 + rng.exponential(0.002, 8) + offset_s / 10))
        recs.append(rec(i, sent=t, chunks=chunks))
    meta = RunMeta(f"run{offset_s}", slo={"ttft": 80})
    run = ColumnarRun(meta, RunColumns.from_records(recs))
    return Columns(run.cols), summarize(run, ci=False)


def test_compare_a_run_with_itself_finds_no_change():
    c, s = _run(0.0)
    res = compare(c, c, s, s)
    assert {m["verdict"] for m in res["metrics"]} == {"no significant change"}
    assert res["regressions"] == []


def test_compare_flags_a_slower_run_and_respects_the_margin():
    cb, sb = _run(0.0, seed=1)
    cn, sn = _run(0.03, seed=2)  # +30 ms TTFT, +3 ms per gap
    res = compare(cb, cn, sb, sn, margin=0.05)
    by = {m["metric"]: m for m in res["metrics"]}
    assert by["ttft_p50"]["verdict"] == "worse" and by["ttft_p50"]["ci"][0] > 20
    assert by["itl_p50"]["verdict"] == "worse"
    assert by["slo_attainment"]["verdict"] == "worse"
    assert "ttft_p50" in res["regressions"]
    assert by["ttft_p50"]["p_value"] < 1e-6
    lenient = compare(cb, cn, sb, sn, margin=100.0)  # 10000%: nothing moved that much
    assert lenient["regressions"] == []
