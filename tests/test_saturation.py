"""Runs that say when the server could not keep up (metrics.saturation): a backlog that grows with the
arrivals is `saturated`, with a steady-state window and the goodput inside it."""

import json
import os

import pytest
from conftest import run_cli
from recs import rec

from goodbench import api
from goodbench.engine.config import EngineConfig
from goodbench.metrics import RequestMetrics
from goodbench.metrics.saturation import backlog, saturation, waiting_series

# 4 sequences at a time, 10 ms steps, 10 output tokens: each request holds a slot ~0.1 s -> 40 req/s
ENGINE = EngineConfig(fixed_step_ms=10, max_num_seqs=4)
CAPACITY = 40.0


def queueing(n, rate, service_rate, e2e_floor=0.05):
    """Hand-made records of an M/D/1-like queue: request i sent at i/rate, served in order at service_rate."""
    out, free = [], 0.0
    for i in range(n):
        t = i / rate
        start = max(t, free)
        free = start + 1 / service_rate
        out.append(rec(i, sent=t, chunks=(start + e2e_floor, free + e2e_floor)))
    return out


def test_backlog_counts_sent_but_unfinished():
    c = RequestMetrics(
        [rec(0, sent=0.0, chunks=(0.5, 1.0)), rec(1, sent=0.2, chunks=(0.3,)), rec(2, sent=2.0, chunks=(2.1,))]
    )
    assert list(backlog(c, [0.1, 0.25, 0.4, 1.5, 2.05])) == [1, 2, 1, 0, 1]


@pytest.mark.parametrize("rate,service,saturated", [(20, 40, False), (38, 40, False), (60, 40, True)])
def test_a_growing_backlog_is_saturation(rate, service, saturated):
    recs = queueing(400, rate, service)
    s = saturation(RequestMetrics(recs), None, "open")
    assert s["saturated"] is saturated
    if saturated:
        assert s["completion_rate"] == pytest.approx(service, rel=0.1)
        assert s["backlog_end"] > s["backlog_start"] + 50 and s["ttft_trend"] > 2


def test_the_steady_window_ends_where_the_backlog_starts_to_grow():
    # keeps up for 10 s (20/s < 40/s), then 80/s for 5 s
    early = queueing(200, 20, 40)
    t_end = early[-1].sent_at
    late = [
        rec(200 + i, sent=t_end + i / 80, chunks=(t_end + 0.1 + i / 40 + 0.05, t_end + 0.1 + i / 40 + 0.06))
        for i in range(400)
    ]
    meets = None
    s = saturation(RequestMetrics(early + late), meets, "open")
    assert s["saturated"] is True
    w0, w1 = s["steady_window_s"]
    assert w0 == 0.0 and 8.0 < w1 < 12.0
    # the share of the sends inside the window: a rate probe like this one is not conclusive
    inside = sum(r.sent_at <= w1 for r in early + late)
    assert s["steady_share"] == pytest.approx(inside / 600) and 200 / 600 < s["steady_share"] < 0.8
    assert saturation(RequestMetrics(early), meets, "open")["steady_share"] == 1.0


def test_closed_loops_and_tiny_runs_are_not_judged():
    recs = queueing(100, 60, 40)
    assert saturation(RequestMetrics(recs), None, "closed")["saturated"] is None
    assert saturation(RequestMetrics(recs[:10]), None, "open")["saturated"] is None


def test_the_servers_waiting_queue_is_evidence():
    rows = [
        {
            "t": t,
            "metrics": {
                'vllm:num_requests_waiting{engine="0"}': 2.0 * t,
                'vllm:num_requests_waiting{engine="1"}': 1.0 * t,
            },
        }
        for t in range(10)
    ]
    ts, ws = waiting_series(rows)
    assert ws[3] == 9.0
    s = saturation(RequestMetrics(queueing(400, 60, 40)), None, "open", (ts, ws))
    assert s["server_waiting_growth_per_s"] == pytest.approx(3.0)
    assert waiting_series([{"t": 1, "metrics": {"other": 1}}]) is None


@pytest.mark.parametrize("rate,saturated", [(CAPACITY / 2, False), (CAPACITY * 1.5, True)])
def test_the_reference_engine_below_and_above_capacity(tmp_path, rate, saturated):
    wl = api.load_workload(
        dataset_name="random",
        random_input_len=32,
        random_output_len=10,
        num_prompts=400,
        request_rate=rate,
        goodput="ttft:300",
    )
    s = api.simulate(wl, ENGINE, result_dir=str(tmp_path)).summary
    assert s["saturated"] is saturated
    assert any("could not keep up" in w for w in s["warnings"]) is saturated


def test_a_live_run_at_one_and_a_half_times_capacity_says_so(tmp_path):
    r = run_cli(
        "run",
        "--dataset-name",
        "random",
        "--random-input-len",
        "32",
        "--random-output-len",
        "10",
        "--num-prompts",
        "240",
        "--request-rate",
        str(CAPACITY * 1.5),
        "--fixed-step-ms",
        "10",
        "--max-num-seqs",
        "4",
        "--goodput",
        "ttft:300",
        "--result-dir",
        str(tmp_path),
        "--quiet",
        timeout=180,
    )
    assert r.returncode == 0, r.stderr
    (run,) = os.listdir(tmp_path)
    s = json.loads((tmp_path / run / "summary.json").read_text())
    assert s["saturated"] is True and "could not keep up" in r.stdout


def test_a_rate_probe_stops_early_when_the_server_cannot_keep_up(tmp_path):
    import time

    from goodbench.analysis.live import live_rate_evaluator
    from goodbench.arrivals import ArrivalSpec
    from goodbench.engine.serve.launch import start_engine
    from goodbench.records import RequestSpec
    from goodbench.workloads import Plan

    proc = start_engine(EngineConfig(fixed_step_ms=10, max_num_seqs=4))
    try:
        reqs = [RequestSpec(f"r{i}", "c", "hello there", 2, 10) for i in range(1200)]  # 20 s at 60/s
        evaluate = live_rate_evaluator(
            proc.base_url, Plan(reqs, None, ArrivalSpec(rate=60.0)), {"ttft": 300}, 0, str(tmp_path)
        )
        t = time.monotonic()
        met, sent, facts = evaluate(CAPACITY * 1.5)
        took = time.monotonic() - t
    finally:
        proc.close()
    # scored on what it sent; it says it stopped early, and of how many planned
    assert facts["stopped_early"] is True and facts["planned"] == 1200 and sent < 1200
    assert facts["offered_rate"] == pytest.approx(CAPACITY * 1.5) and facts["steady_share"] < 0.8
    assert met < 0.9 * sent and took < 15


def test_overdue_counts_requests_past_their_predicted_end_not_a_filling_backlog():
    from goodbench.metrics.saturation import overdue

    service = [(0.05, 0.01)] * 10  # TTFT 50 ms, 10 ms per further token
    # 30 long requests (500 tokens: ~5 s each) sent over the last 3 s: a backlog filling up, none overdue
    filling = [(10.0 - k * 0.1, 500) for k in range(30)]
    assert overdue(10.0, filling, service) == 0
    # 30 short requests (10 tokens: ~0.15 s) sent 1-4 s ago and still in flight: a queue, all overdue
    queued = [(10.0 - 1 - k * 0.1, 10) for k in range(30)]
    assert overdue(10.0, queued, service) == 30
    assert overdue(10.0, queued, service[:4]) is None  # too few finished requests to predict from
