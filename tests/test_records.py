import pytest

from goodbench.errors import UsageError as SLOError
from goodbench.records import RequestRecord, RunMeta, format_slo, parse_slo


def test_record_round_trip():
    r = RequestRecord(
        id="r1",
        cls="short",
        scheduled_at=0.5,
        sent_at=0.501,
        first_token_at=0.6,
        finished_at=0.9,
        chunk_times=(0.6, 0.7, 0.9),
        chunk_tokens=(1, 2, 1),
        output_tokens=4,
        output_tokens_source="usage",
        prompt_tokens=10,
        prompt_tokens_server=11,
        status="ok",
        http_status=200,
        error=None,
        warmup=True,
    )
    assert RequestRecord.from_dict(r.to_dict()) == r


def test_meta_round_trip_ignores_unknown_keys():
    m = RunMeta(run_id="x", label="poisson@1.00", slo={"ttft": 500.0})
    d = m.to_dict()
    d["future_key"] = 1
    assert RunMeta.from_dict(d) == m


@pytest.mark.parametrize(
    "text,expected",
    [
        ("ttft:500 tpot:50", {"ttft": 500.0, "tpot": 50.0}),
        (["ttft:500", "e2el:3000"], {"ttft": 500.0, "e2el": 3000.0}),
        ("ttft=200,max_itl:150", {"ttft": 200.0, "max_itl": 150.0}),
        ("e2e:100", {"e2el": 100.0}),
    ],
)
def test_parse_slo(text, expected):
    assert parse_slo(text) == expected


@pytest.mark.parametrize("bad", ["ttft", "latency:5", "ttft:abc", "ttft:-1", "ttft:inf"])
def test_parse_slo_rejects(bad):
    with pytest.raises(SLOError):
        parse_slo(bad)


def test_format_slo():
    assert format_slo({"ttft": 500.0, "tpot": 50.0}) == "ttft:500 tpot:50"
    assert format_slo(None) == "none"


def test_a_chunk_time_copied_into_first_token_at_keeps_the_chunk_times_precision():
    """All chunks in one read: first_token_at is chunk_times[0]; written at full precision while chunk
    times were rounded to 0.1 us, TPOT came out as -0.0 ms (a tiny negative)."""
    import json

    from goodbench.metrics import RequestMetrics

    t = 0.12345674999  # rounds down: the stored chunk time is below first_token_at
    r = RequestRecord("r0", "c", 0.0, 0.0, t, t, chunk_times=(t, t, t), chunk_tokens=(1, 1, 1), output_tokens=3)
    back = RequestRecord.from_dict(json.loads(r.to_json()))
    assert back.first_token_at == back.chunk_times[0]
    tpot = float(RequestMetrics([back]).tpot[0])
    assert tpot == 0.0 and str(tpot) == "0.0"


def test_a_reply_at_its_send_never_has_a_negative_ttft_once_written():
    """Issue 42: sent_at was written at full precision, the chunk times rounded to 0.1 us: a reply stamped
    at its send came back with TTFT -1.6e-05 ms (and E2E below TTFT)."""
    import json

    from goodbench.metrics import RequestMetrics

    t = sent = 0.12345674999  # a reply stamped at its send; its chunk time is written rounded down
    r = RequestRecord("r0", "c", 0.0, sent, t, t, chunk_times=(t,), chunk_tokens=(1,), output_tokens=1)
    back = RequestRecord.from_dict(json.loads(r.to_json()))
    m = RequestMetrics([back])
    assert float(m.ttft[0]) == 0.0 and float(m.e2e[0]) == 0.0


def test_a_chunk_stamped_before_its_send_is_read_as_at_the_send():
    """Issue 42: a kernel receive stamp converted with its offset's error can fall before the send; the
    record (one place, for both clients) never keeps a reply earlier than its request."""
    from goodbench.client.stream import StreamState
    from goodbench.records import RequestSpec

    st = StreamState(lambda: 0.0, 0.0)
    st.feed(b'data: {"choices":[{"text":"a"}]}\n\ndata: {"choices":[{"text":"b"}]}\n\n', 1.00000)
    st.feed(b"data: [DONE]\n\n", 1.00002)
    rec = st.record(RequestSpec("r0", "c", "p", 3, 8), 0.0, 1.00001, 1.00001, "ok", 200, None)
    assert rec.first_token_at == 1.00001 and list(rec.chunk_times) == [1.00001, 1.00001]
    assert rec.finished_at >= rec.chunk_times[-1] >= rec.sent_at
