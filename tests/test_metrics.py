import pytest
from recs import rec

from goodbench.metrics import dist, summarize
from goodbench.records import RequestRecord, RunMeta, RunResult


def summary(recs, slo=None, mode="open", **kw):
    return summarize(RunResult(RunMeta("t", slo=slo, mode=mode, **kw), recs))


def test_hand_placed_chunk_times():
    # sent at 1.0; chunks at 1.2, 1.25, 1.45 -> TTFT 200 ms, gaps 50 and 200 ms, E2E 450 ms, TPOT 125 ms
    s = summary([rec(0, sent=1.0, sched=0.999, chunks=(1.2, 1.25, 1.45))])
    assert s["ttft_ms"]["p50"] == pytest.approx(200)
    assert s["e2el_ms"]["p50"] == pytest.approx(450)
    assert s["tpot_ms"]["p50"] == pytest.approx(125)
    assert s["itl_ms"]["n"] == 2 and s["itl_ms"]["max"] == pytest.approx(200)
    assert s["schedule_lag_ms"]["p50"] == pytest.approx(1.0)
    assert s["ttft_from_scheduled_ms"]["p50"] == pytest.approx(201)


def test_itl_pools_gaps_but_not_across_requests():
    s = summary([rec(0, sent=0, chunks=(0.1, 0.2)), rec(1, sent=5, chunks=(5.1, 5.4))])
    assert s["itl_ms"]["n"] == 2
    assert sorted([s["itl_ms"]["p50"]]) == [pytest.approx(200)]  # median of 100 and 300


def test_tpot_uses_output_tokens_and_skips_single_token():
    s = summary([rec(0, sent=0, chunks=(0.1, 0.5), out=5), rec(1, sent=0, chunks=(0.1,), out=1)])
    assert s["tpot_ms"]["n"] == 1 and s["tpot_ms"]["p50"] == pytest.approx(100)  # (0.5-0.1)/(5-1)


def test_slo_attainment_goodput_and_failures():
    recs = [
        rec(0, sent=0, chunks=(0.1, 0.15, 0.2)),  # meets ttft:150 tpot:60
        rec(1, sent=0, chunks=(0.3, 0.35)),  # ttft 300: misses
        rec(2, sent=0, chunks=(0.1, 0.5)),  # tpot 400: misses
        rec(3, sent=0, chunks=(), status="http_error"),
    ]  # failed never meets
    s = summary(recs, slo={"ttft": 150, "tpot": 60})
    assert s["requests"] == {
        "issued": 4,
        "completed": 3,
        "failed": 1,
        "by_status": {"ok": 3, "http_error": 1},
        "retried": 0,
    }
    assert s["slo_met"] == 1 and s["slo_attainment"] == pytest.approx(0.25)
    assert s["duration_s"] == pytest.approx(0.5)
    assert s["goodput"] == pytest.approx(1 / 0.5)
    assert s["slo_clauses"]["ttft"]["attainment"] == pytest.approx(0.5)


def test_max_itl_clause_catches_a_stall_tpot_hides():
    chunks = [0.1 + 0.01 * i for i in range(50)] + [1.0] + [1.0 + 0.01 * i for i in range(1, 50)]
    s = summary([rec(0, sent=0, chunks=chunks)], slo={"tpot": 50, "max_itl": 200})
    assert s["slo_clauses"]["tpot"]["attainment"] == 1.0
    assert s["slo_clauses"]["max_itl"]["attainment"] == 0.0


def test_warmup_excluded():
    s = summary([rec(0, sent=0, chunks=(5.0,), warmup=True), rec(1, sent=0, chunks=(0.1,))])
    assert s["requests"]["issued"] == 1 and s["warmup_excluded"] == 1 and s["ttft_ms"]["max"] == pytest.approx(100)


def test_generator_lag_marks_invalid():
    recs = [rec(i, sched=i * 0.01, sent=i * 0.01 + 0.05, chunks=(i * 0.01 + 0.1,)) for i in range(200)]
    s = summary(recs, slo={"ttft": 500})
    assert s["valid"] is False and any("fell behind" in w for w in s["warnings"])
    ok = summary([rec(i, sched=i * 0.01, sent=i * 0.01 + 0.0005, chunks=(i * 0.01 + 0.1,)) for i in range(200)])
    assert ok["valid"] is True


def test_achieved_rate_shortfall_marks_invalid():
    recs = [rec(i, sched=i * 0.01, sent=i * 0.0105, chunks=(i * 0.0105 + 0.1,)) for i in range(200)]
    s = summarize(RunResult(RunMeta("t"), recs), lag_limit_ms=1e9)
    assert s["scheduled_rate"] == pytest.approx(100)
    assert s["achieved_rate"] == pytest.approx(100 / 1.05)
    assert s["valid"] is False


def test_per_class_and_ratio():
    recs = [rec(i, cls="short" if i % 2 else "long", sent=0, chunks=(0.1, 0.2, 0.3)) for i in range(10)]
    s = summary(recs)
    assert set(s["per_class"]) == {"short", "long"} and s["per_class"]["short"]["requests"]["issued"] == 5
    assert s["itl_p99_over_p50"] == pytest.approx(1.0)


def test_dist_linear_interpolation_and_empty():
    d = dist([0.001, 0.002, 0.003, 0.004])
    assert d["p50"] == pytest.approx(2.5) and d["n"] == 4 and d["max"] == pytest.approx(4)
    assert dist([])["n"] == 0 and dist([])["p99"] is None


def test_few_samples_warning_and_chunk_count_warning():
    r = RequestRecord("r0", "a", 0, 0, 0.1, 0.3, (0.1, 0.3), (1, 1), 6, "usage", status="ok")
    s = summary([r])
    assert any("only 1 samples" in w for w in s["warnings"])
    assert any("several tokens per chunk" in w for w in s["warnings"])


def test_ttfo_is_the_first_answer_token_and_an_slo_key():
    # reasoning model: first token at 0.1 s, first answer at 0.5 s; a plain model answers at once
    think = RequestRecord(
        "r0",
        "a",
        0,
        0,
        0.1,
        0.6,
        (0.1, 0.3, 0.5, 0.6),
        (1, 1, 1, 1),
        4,
        "usage",
        first_answer_at=0.5,
        reasoning_tokens=2,
    )
    plain = RequestRecord("r1", "a", 0, 0, 0.2, 0.3, (0.2, 0.3), (1, 1), 2, "usage")
    s = summary([think, plain], slo={"ttfo": 300})
    assert s["ttft_ms"]["max"] == pytest.approx(200) and s["ttfo_ms"]["max"] == pytest.approx(500)
    assert s["slo_attainment"] == 0.5 and s["reasoning_tokens"] == 2


def test_itl_is_per_token_when_chunks_carry_several_and_per_chunk_is_a_variant():
    # chunks at 0.1 (2 tokens), 0.4 (3 tokens), 0.5 (1 token): per token 100, 100, 100, 100 ms; per chunk 300, 100
    r = RequestRecord("r0", "a", 0, 0, 0.1, 0.5, (0.1, 0.4, 0.5), (2, 3, 1), 6, "usage")
    s = summary([r])
    assert s["itl_ms"]["n"] == 4 and s["itl_ms"]["max"] == pytest.approx(100)
    v = s["metric_variants"]["itl_chunk_pooled_ms"]
    assert v["n"] == 2 and v["max"] == pytest.approx(300)
    assert s["tpot_ms"]["p50"] == pytest.approx(80)  # (0.5 - 0.1) / 5
