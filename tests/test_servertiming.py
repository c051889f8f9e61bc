"""TTFT split into queue and prefill time from scraped histogram sums/counts (hand-computed deltas)."""

import pytest

from goodbench.metrics.servertiming import histogram_totals, phase_delta, server_timing

L0, L1 = '{engine="0",model_name="m"}', '{engine="1",model_name="m"}'
T, Q, P = "vllm:time_to_first_token_seconds", "vllm:request_queue_time_seconds", "vllm:request_prefill_time_seconds"


def sample(t, **hist):
    """hist: T/Q/P short names -> (sum, count) for engine 0 (and optionally a tuple per engine)."""
    names = {"T": T, "Q": Q, "P": P}
    m = {"vllm:num_requests_running" + L0: 3.0}
    for short, per_engine in hist.items():
        for labels, (s, c) in zip((L0, L1), per_engine if isinstance(per_engine[0], tuple) else [per_engine]):
            m[f"{names[short]}_sum{labels}"] = s
            m[f"{names[short]}_count{labels}"] = c
    return {"t": t, "metrics": m}


def test_totals_add_label_sets_and_skip_other_names():
    m = sample(0, T=((1.0, 2.0), (0.5, 1.0)))["metrics"]
    m["vllm:time_to_first_token_seconds_bucket" + L0] = 99.0  # never stored, but must not count if it were
    assert histogram_totals(m, T) == (1.5, 3.0)
    assert histogram_totals(m, Q) is None


@pytest.mark.parametrize(
    "first,last,want",
    [
        ((1.0, 2.0), (4.0, 5.0), {"mean": 1000.0, "n": 3}),  # 3 s over 3 requests
        ((0.0, 0.0), (0.25, 4.0), {"mean": 62.5, "n": 4}),
        ((1.0, 2.0), (1.0, 2.0), None),  # nothing observed during the run
        ((5.0, 10.0), (1.0, 2.0), None),  # counters went back: the server restarted
    ],
)
def test_phase_delta(first, last, want):
    assert phase_delta(sample(0, T=first)["metrics"], sample(9, T=last)["metrics"], T) == want


def test_server_timing_splits_ttft_and_sits_beside_the_client():
    rows = [
        sample(0.0, T=(1.0, 2.0), Q=(0.5, 2.0), P=(0.3, 2.0)),
        sample(1.0, T=(2.0, 3.0), Q=(1.0, 3.0), P=(0.5, 3.0)),  # mid-run samples do not matter
        sample(9.5, T=(4.0, 5.0), Q=(2.0, 5.0), P=(0.9, 5.0)),
    ]
    st = server_timing(rows, {"mean": 1010.0, "n": 3, "p50": 900.0})
    assert st["ttft_ms"] == {"mean": 1000.0, "n": 3}
    assert st["queue_ms"] == {"mean": 500.0, "n": 3}
    assert st["prefill_ms"] == {"mean": 200.0, "n": 3}
    assert st["other_ms"] == pytest.approx(300.0)
    assert st["client_ttft_ms"] == {"mean": 1010.0, "n": 3}
    assert st["client_minus_server_ms"] == pytest.approx(10.0)
    assert st["window_s"] == [0.0, 9.5] and "server" in st["source"]


def test_server_timing_partial_and_absent():
    rows = [sample(0, T=(0.0, 0.0)), sample(5, T=(1.0, 4.0))]
    st = server_timing(rows, {"mean": 260.0, "n": 5})  # the client saw a request the server's window did not
    assert st["ttft_ms"] == {"mean": 250.0, "n": 4}
    assert st["queue_ms"] is None and st["prefill_ms"] is None and st["other_ms"] is None
    assert st["client_minus_server_ms"] is None  # different request sets: no difference is claimed
    assert server_timing([sample(0), sample(5)]) is None  # a server without these histograms
    assert server_timing([sample(0, T=(1.0, 2.0))]) is None  # one sample: no delta
    assert server_timing([]) is None
    no_client = server_timing(rows, None)
    assert no_client["client_ttft_ms"] is None and no_client["client_minus_server_ms"] is None
