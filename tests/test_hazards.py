"""One test per hazard (metrics.hazards): each fires on the run it describes and stays quiet otherwise."""

from dataclasses import replace

import pytest
from recs import rec

from goodbench.metrics import RequestMetrics, hazards as hz, summarize
from goodbench.records import RequestRecord, RunMeta, RunResult


def evidence(recs, target=None, **kw):
    """The summary and the Evidence the hazard checks read, for hand-built records."""
    meta_kw = {k: kw.pop(k) for k in ("mode", "max_concurrency") if k in kw}
    s = summarize(RunResult(RunMeta("t", **meta_kw), recs), ci=False, **kw)
    return hz.Evidence(
        s,
        RequestMetrics([r for r in recs if not r.warmup]),
        mode=meta_kw.get("mode", "open"),
        max_concurrency=meta_kw.get("max_concurrency"),
        target=target,
        errors=tuple(dict.fromkeys(r.error for r in recs if r.error))[:3],
    )


def http_failures(
    n_ok,
    n_bad,
    code=404,
    body='{"object":"error","message":"The model `gpt-x` does not exist.",'
    '"type":"NotFoundError","param":null,"code":404}',
):
    bad = [
        replace(rec(1000 + i, status="http_error"), http_status=code, error=f"HTTP {code}: {body}")
        for i in range(n_bad)
    ]
    return steady(n=n_ok) + bad


V1 = {"base_url": "http://127.0.0.1:8000/v1", "endpoint": "/v1/completions", "model": "m"}
ROOT_URL = {"base_url": "http://127.0.0.1:8000", "endpoint": "/v1/completions", "model": "gpt-x"}


def steady(n=200, lag=0.0005, spacing=0.01, **kw):
    return [
        rec(i, sched=i * spacing, sent=i * spacing + lag, chunks=(i * spacing + lag + 0.1,), **kw) for i in range(n)
    ]


def texts(found):
    return " | ".join(h.text for h in found)


def test_generator_lag_invalidates_open_loops_only():
    late = evidence(steady(lag=0.05))
    assert hz.generator_lag(late)[0].invalid and "fell behind" in texts(hz.generator_lag(late))
    assert hz.generator_lag(evidence(steady())) == []
    assert hz.generator_lag(evidence(steady(lag=0.05), mode="closed")) == []
    assert hz.generator_lag(evidence(steady(lag=0.05), max_concurrency=4)) == []  # the cap's own hazard


def test_rate_shortfall():
    short = [rec(i, sched=i * 0.01, sent=i * 0.0105, chunks=(i * 0.0105 + 0.1,)) for i in range(200)]
    found = hz.rate_shortfall(evidence(short))
    assert found and found[0].invalid and "under the schedule" in found[0].text
    assert hz.rate_shortfall(evidence(steady())) == []


def test_concurrency_cap_warns_without_invalidating():
    found = hz.concurrency_cap(evidence(steady(lag=0.05), max_concurrency=4))
    assert found and not found[0].invalid and "--max-concurrency 4" in found[0].text
    assert hz.concurrency_cap(evidence(steady(lag=0.05))) == []


def test_thin_percentiles_names_each_metric():
    found = hz.thin_percentiles(evidence(steady(n=20)))
    assert [h.text.split()[0] for h in found] == ["TTFT"]  # one chunk each: no ITL, no TPOT samples
    assert hz.thin_percentiles(evidence(steady(n=150))) == []


def test_tokens_from_chunks():
    found = hz.tokens_from_chunks(evidence(steady(n=5, source="chunks")))
    assert found and found[0].text.startswith("5 requests counted output tokens from chunks")
    assert hz.tokens_from_chunks(evidence(steady(n=5))) == []


def test_packed_chunks():
    packed = [RequestRecord(f"r{i}", "a", 0, 0, 0.1, 0.3, (0.1, 0.3), (1, 1), 6, "usage") for i in range(3)]
    assert "several tokens per chunk" in texts(hz.packed_chunks(evidence(packed)))
    assert hz.packed_chunks(evidence(steady(n=5))) == []


def test_import_caveats_are_repeated():
    e = evidence(steady(n=5))
    e.caveats = ("no scheduled times",)
    assert texts(hz.import_caveats(e)) == "no scheduled times"


def test_nothing_completed():
    failed = [rec(i, status="timeout") for i in range(3)]
    assert "no request completed" in texts(hz.nothing_completed(evidence(failed)))
    assert hz.nothing_completed(evidence(steady(n=3))) == []


@pytest.mark.parametrize(
    "error,said",
    [
        (
            'HTTP 404: {"object":"error","message":"The model `x` does not exist.","code":404}',
            "The model `x` does not exist.",
        ),
        (
            'HTTP 401: {"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}',
            "Incorrect API key provided",
        ),
        ("HTTP 502: <html>Bad Gateway</html>", "<html>Bad Gateway</html>"),
        ("cannot connect to http://x: refused", "cannot connect to http://x: refused"),
    ],
)
def test_server_message_is_the_servers_own_words(error, said):
    assert hz.server_message(error) == said


def test_base_url_ending_in_v1_is_named_when_most_requests_fail():
    e = evidence(http_failures(2, 8), target=V1)
    found = hz.base_url_v1(e)
    assert (
        found
        and "8 of 10 requests failed" in found[0].text
        and "http://127.0.0.1:8000/v1/v1/completions" in found[0].text
    )
    assert "without /v1" in found[0].text and hz.server_rejected(e) == []  # one cause named, not two
    assert hz.base_url_v1(evidence(http_failures(8, 2), target=V1)) == []  # most succeeded
    assert hz.base_url_v1(evidence(http_failures(2, 8), target=ROOT_URL)) == []  # the URL is fine


def test_server_rejection_quotes_the_server_and_names_the_model():
    found = hz.server_rejected(evidence(http_failures(1, 9), target=ROOT_URL))
    assert found and "9 of 10 requests failed, 9 with an HTTP error (most often 404)" in found[0].text
    assert "the server said: The model `gpt-x` does not exist." in found[0].text and "'gpt-x'" in found[0].text
    other = hz.server_rejected(
        evidence(http_failures(0, 5, code=401, body='{"error":{"message":"bad key"}}'), target=ROOT_URL)
    )
    assert other and "the server said: bad key" in other[0].text and "model name" not in other[0].text
    assert hz.server_rejected(evidence(http_failures(9, 1), target=ROOT_URL)) == []
    timeouts = [rec(i, status="timeout") for i in range(5)]
    assert hz.server_rejected(evidence(timeouts, target=ROOT_URL)) == []  # not HTTP errors: nothing to quote


def test_thin_per_class():
    two = steady(n=40, cls="a") + [rec(100 + i, cls="b", sent=i, chunks=(i + 0.1,)) for i in range(3)]
    found = hz.thin_per_class(evidence(two))
    assert found and "b TTFT (3)" in found[0].text and "a TTFT (40)" in found[0].text


@pytest.mark.parametrize("recs,valid", [(steady(), True), (steady(lag=0.05), False)])
def test_assess_runs_every_check_in_order(recs, valid):
    ok, warnings, _ = hz.assess(evidence(recs))
    assert ok is valid
    assert warnings == [h.text for check in hz.CHECKS for h in check(evidence(recs))]


def test_packed_chunks_by_the_tokenizer_when_the_server_sends_no_usage():
    # 3 chunks whose text the tokenizer counts as 9 tokens: several tokens per chunk, no usage to say so
    recs = [RequestRecord(f"r{i}", "a", 0, 0, 0.1, 0.3, (0.1, 0.2, 0.3), (1, 1, 1), 9, "tokenizer") for i in range(3)]
    found = hz.packed_chunks(evidence(recs))
    assert found and found[0].text.startswith("the tokenizer counts 27 output tokens but the stream carried 9")


def test_tokenizer_mismatch_names_the_tokenizer_to_pass():
    recs = [
        RequestRecord(f"r{i}", "a", 0, 0, 0.1, 0.2, (0.1, 0.2), (1, 1), 100, "usage", output_tokens_local=80)
        for i in range(5)
    ]
    e = evidence(recs)
    e.model, e.tokenizer = "Qwen/Qwen2.5-7B-Instruct", "llama-3"
    found = hz.tokenizer_mismatch(e)
    assert found and "500 output tokens" in found[0].text and "counts 400 (-20.0%)" in found[0].text
    assert "--tokenizer Qwen/Qwen2.5-7B-Instruct" in found[0].text and "local cache" in found[0].text
    e.model = "llama-8b"  # a served alias (--served-model-name): no hub name to pass
    text = hz.tokenizer_mismatch(e)[0].text
    assert "--tokenizer llama-8b" not in text and "--tokenizer PATH" in text and "'llama-8b' may not be" in text
    close = [RequestRecord("r", "a", 0, 0, 0.1, 0.2, (0.1, 0.2), (1, 1), 100, "usage", output_tokens_local=99)]
    assert hz.tokenizer_mismatch(evidence(close)) == []


def test_priority_lanes_are_judged_honoured_or_not():
    from goodbench.metrics.hazards import lanes_honoured

    def lanes(p50s):
        return {str(k): {"ttft_ms": {"p50": v}} for k, v in enumerate(p50s)}

    assert lanes_honoured(lanes([50.0, 900.0]), {"scheduling_policy": "fcfs"}) == (
        False,
        "the engine ran --scheduling-policy fcfs",
    )
    assert lanes_honoured(lanes([50.0, 900.0]), {"scheduling_policy": "priority"})[0] is True
    # an external server: lane 0 waiting longer than lane 2 is evidence it ignored priority (the run)
    assert lanes_honoured(lanes([820.0, 500.0, 410.0]), None)[0] is False
    assert lanes_honoured(lanes([40.0, 500.0, 410.0]), None)[0] is None  # shorter prompts prove nothing
    assert lanes_honoured(lanes([40.0]), None) == (None, "")


def with_lag(e, client_lag=None, engine=None):
    e.client_lag, e.engine_lateness = client_lag, engine
    return e


LOOP = {"stamps": "user", "processes": 1, "loop_busy_pct": 40.0, "loop_lag_p99_ms": 3.0, "cpu_ms_per_request": 0.4}


def test_client_lag_names_the_percentiles_the_stamps_could_move():
    # TTFT 100 ms, no ITL: a loop 30 ms late at p99 could move TTFT p99 by 30%: invalid
    late = with_lag(evidence(steady()), LOOP | {"stamp_error_p50_ms": 0.2, "stamp_error_p99_ms": 30.0})
    (h,) = hz.client_lag(late)
    assert h.invalid and "TTFT p99 (100.0 ms, by up to 30.0 ms)" in h.text and "TTFT p50" not in h.text
    assert "event loop's clock (user stamps)" in h.text
    small = with_lag(evidence(steady()), LOOP | {"stamp_error_p50_ms": 0.2, "stamp_error_p99_ms": 6.0})
    (h,) = hz.client_lag(small)
    assert not h.invalid and "more than 5%" in h.text  # 6% of TTFT p99: a warning
    kernel = {"stamps": "kernel", "merged_chunks": 0, "stamp_error_p50_ms": 0.0, "stamp_error_p99_ms": 0.0}
    assert hz.client_lag(with_lag(evidence(steady()), kernel)) == []
    merged = kernel | {"merged_chunks": 40, "stamp_error_p99_ms": 25.0}
    (h,) = hz.client_lag(with_lag(evidence(steady()), merged))
    assert h.invalid and "40 chunks reached the client with a later chunk" in h.text
    assert hz.client_lag(with_lag(evidence(steady()), None)) == []


def test_generator_lag_names_the_likely_cause():
    late = evidence(steady(lag=0.05))
    busy = LOOP | {"loop_busy_pct": 97.0, "cpu_ms_per_request": 12.0}  # 100 req/s x 12 ms = 1.2 cores
    text = texts(hz.generator_lag(with_lag(late, busy)))
    assert "the client's core (97% busy" in text and "--workers 2" in text  # 1.2 / 0.6 of a core each
    starved = LOOP | {"loop_busy_pct": 30.0, "loop_lag_p99_ms": 40.0}
    assert "other processes on the client's core" in texts(hz.generator_lag(with_lag(late, starved)))
    engine = {"behind": True, "late_p99_ms": 76.0, "late_mean_ms": 5.0, "late_total_s": 13.7, "steps": 10507}
    assert "the engine's core" in texts(hz.generator_lag(with_lag(late, busy, engine)))
    assert "Use --workers N" in texts(hz.generator_lag(with_lag(late, LOOP)))


def test_a_late_loop_is_blamed_on_what_the_run_saw_hold_it():
    """Issue 42: at 512 streams the warning blamed "other processes on the client's core" when there were
    none. It now reads the run's evidence: the cyclic GC's longest pause, and how often the OS took the
    core from the client."""
    late = evidence(steady(lag=0.05))
    starved = LOOP | {"loop_busy_pct": 30.0, "loop_lag_p99_ms": 40.0}
    gc_held = starved | {"gc_pause_max_ms": 35.0, "gc_pause_total_ms": 400.0, "preempted_per_s": 2.0}
    assert "the client's own garbage collector" in texts(hz.generator_lag(with_lag(late, gc_held)))
    alone = starved | {"gc_pause_max_ms": 3.0, "preempted_per_s": 2.0}
    text = texts(hz.generator_lag(with_lag(late, alone)))
    assert "the client itself" in text and "2.0 times a second" in text and "other processes" not in text
    shared = starved | {"gc_pause_max_ms": 3.0, "preempted_per_s": 450.0}
    assert "other processes on the client's core" in texts(hz.generator_lag(with_lag(late, shared)))


def test_the_lag_meter_keeps_gc_pauses_and_preemptions():
    import gc

    from goodbench.client.lag import LagMeter, client_lag

    m = LagMeter()
    m.start()
    junk = [[i] for i in range(200_000)]
    gc.collect()
    m.stop()
    del junk
    st = m.state(1, 1)
    assert st["gc_pause_max_s"] > 0 and st["gc_pause_total_s"] >= st["gc_pause_max_s"] and st["preempted"] >= 0
    cl = client_lag([st])
    assert cl["gc_pause_max_ms"] > 0 and cl["preempted_per_s"] is not None
    assert m._gc not in gc.callbacks  # removed at the end of the run


def test_engine_behind_invalidates_a_run_that_started_its_engine():
    behind = {"behind": True, "late_p99_ms": 76.0, "late_mean_ms": 1.3, "late_total_s": 13.7, "steps": 10507}
    (h,) = hz.engine_behind(with_lag(evidence(steady()), engine=behind | {"started_by_run": True}))
    assert h.invalid and "engine goodbench started for this run fell behind" in h.text and "13.7 s" in h.text
    (h,) = hz.engine_behind(with_lag(evidence(steady()), engine=behind | {"started_by_run": False}))
    assert not h.invalid  # an engine under test that is late is the result, not a broken measurement
    assert hz.engine_behind(with_lag(evidence(steady()), engine={"behind": False})) == []
