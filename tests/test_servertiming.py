"""TTFT split into queue and prefill time from scraped histogram sums/counts (hand-computed deltas)."""

import sys

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


LATE = "goodbench:step_lateness_seconds"


def lateness_rows(total_s, steps, p99s):
    return [
        {"t": k, "metrics": {f"{LATE}_sum": s, f"{LATE}_count": n, "goodbench:step_lateness_p99_seconds": p}}
        for k, (s, n, p) in enumerate(zip(total_s, steps, p99s))
    ]


def test_step_lateness_block():
    from goodbench.metrics.servertiming import step_lateness

    ok = step_lateness(lateness_rows([1.0, 1.5], [100, 1100], [0.001, 0.002]), True)
    assert ok["steps"] == 1000 and ok["late_mean_ms"] == 0.5 and ok["late_p99_ms"] == 2.0 and not ok["behind"]
    # the busy host: 13.7 s late over 10,507 steps, p99 76 ms
    late = step_lateness(lateness_rows([0.0, 13.7], [0, 10507], [0.0, 0.076]), True)
    assert late["behind"] and late["late_total_s"] == pytest.approx(13.7, abs=0.01) and late["started_by_run"]
    # the smoke gate on a quiet 2-core host: one late burst, 0.5 s over a 10 s run: not behind
    hiccup = step_lateness(lateness_rows([0.0, 0.507], [0, 650], [0.0, 0.0746]), True)
    hiccup_rows = lateness_rows([0.0, 0.507], [0, 650], [0.0, 0.0746])
    hiccup_rows[1]["t"] = 10.0
    assert hiccup["behind"] and not step_lateness(hiccup_rows, True)["behind"]
    assert step_lateness(lateness_rows([0.0, 0.0], [0, 0], [0.0, 0.0]), True) is None  # no steps
    assert step_lateness([sample(0, T=(1.0, 1.0)), sample(1, T=(2.0, 2.0))], True) is None  # not our engine


def engine_children() -> list[int]:
    """This process's child `goodbench serve` processes (the engine a run started)."""
    import glob
    import os

    pids = []
    for path in glob.glob(f"/proc/{os.getpid()}/task/*/children"):
        with open(path) as f:
            pids += [int(p) for p in f.read().split()]
    out = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"serve" in f.read():
                    out.append(pid)
        except OSError:
            pass
    return out


def starve(stop, every_s=0.3, pause_s=0.1) -> None:
    """Take the engine's CPU away now and then, as a busy host does: SIGSTOP it for pause_s every every_s."""
    import os
    import signal
    import time

    while not stop.wait(every_s):
        pids = engine_children()
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        time.sleep(pause_s)
        for pid in pids:
            os.kill(pid, signal.SIGCONT)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_busy_engine_is_reported_and_invalidates_the_run(tmp_path):
    """The engine goodbench starts loses its CPU for 100 ms every 300 ms (stopped, as a busy host's
    scheduler would): its steps run late, and the run says so and is invalid."""
    import threading

    import goodbench as gb
    from goodbench.engine.config import EngineConfig

    spec = gb.load_workload(
        None, dataset_name="random", num_prompts=48, concurrency=16, random_input_len=16, random_output_len=256
    )
    stop = threading.Event()
    th = threading.Thread(target=starve, args=(stop,), daemon=True)
    th.start()
    try:
        run = gb.run(spec, None, engine=EngineConfig(fixed_step_ms=5), pin=False, result_dir=str(tmp_path))
    finally:
        stop.set()
        th.join()
    s = run.summary
    assert s["engine_lateness"]["behind"] and s["engine_lateness"]["started_by_run"]
    assert s["engine_lateness"]["late_p99_ms"] > 50
    assert not s["valid"] and any("engine goodbench started for this run fell behind" in w for w in s["warnings"])
    assert s["client_lag"]["processes"] == 1 and s["client_lag"]["reads"] > 0
    assert gb.summarize(run.dir)["engine_lateness"] == s["engine_lateness"]  # recomposed from the directory
