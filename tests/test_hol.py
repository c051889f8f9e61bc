"""Head-of-line attribution (metrics.hol): short requests split by overlap with long prefills."""

import pytest
from recs import rec

from goodbench.metrics import summarize
from goodbench.records import RunMeta, RunResult


def test_hol_attribution_splits_short_requests_by_overlap_with_long_prefills():
    recs = [
        rec(0, "long", sent=1.0, chunks=(2.0, 2.01), prompt=4000),  # long prefill in flight 1.0-2.0
        rec(1, "short", sent=1.5, chunks=(1.9, 1.91), prompt=50),  # TTFT 400 ms, during
        rec(2, "short", sent=3.0, chunks=(3.1, 3.11), prompt=50),  # TTFT 100 ms, clear
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
    recs = [
        rec(0, "long", sent=1.0, chunks=(2.0,), prompt=4000, origin="w0"),
        rec(1, "short", sent=1.5, chunks=(1.9,), prompt=50, origin="w1"),
    ]
    h = summarize(RunResult(RunMeta("t"), recs))["hol"]
    assert h["ttft_ms"]["during_long_prefill"]["n"] == 0 and h["ttft_ms"]["clear"]["n"] == 1


def test_the_stall_is_the_worst_short_classs_itl_p99_during_a_long_prefill():
    """What a sweep ranks on within a goodput tie (analysis.sweep.rank): a class with gaps during a long
    prefill is judged on those, a class with none on all its gaps; the worst class counts."""
    from goodbench.metrics.derived import RequestMetrics, measured_arrays
    from goodbench.metrics.hol import stall_p99

    recs = [
        rec(0, "long", sent=1.0, chunks=(2.0, 2.01), prompt=4000),  # long prefill in flight 1.0-2.0
        rec(1, "chat", sent=0.0, chunks=(0.1, 0.11, 1.5), prompt=50),  # gaps 10 clear, 1390 during
        rec(2, "chat", sent=3.0, chunks=(3.1, 3.12, 3.14), prompt=50),  # gaps 20, 20 clear
        rec(3, "code", sent=3.0, chunks=(3.1, 3.15, 3.2), prompt=60),  # gaps 50, 50 clear, none during
    ]
    cols = measured_arrays(RunResult(RunMeta("t"), recs))
    stall, long_name = stall_p99(cols, RequestMetrics(cols))
    assert long_name == "long" and stall == pytest.approx(1390)  # chat's one gap during, not its clear ones
    calm = [recs[0], recs[2], recs[3]]  # no short gap overlaps the prefill: the worst class's ITL p99 (code)
    cols = measured_arrays(RunResult(RunMeta("t"), calm))
    assert stall_p99(cols, RequestMetrics(cols))[0] == pytest.approx(50)
    none = measured_arrays(RunResult(RunMeta("t"), [rec(0, "a", chunks=(0.1, 0.2), prompt=100)]))
    assert stall_p99(none, RequestMetrics(none)) == (None, None)
