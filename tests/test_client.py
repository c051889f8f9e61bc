"""Both clients (the lean default and the aiohttp baseline) against the same fault matrix: every test
runs once per client."""

import asyncio
import socket
import time

import pytest
from scripted import SENT_LOG, USAGE_DONE, chunk, script_app, with_server

from goodbench.client.aiohttp_client import AiohttpClient
from goodbench.client.config import ClientConfig
from goodbench.client.lag import LagMeter, loop_probe
from goodbench.client.lean import LeanClient
from goodbench.records import RequestSpec


@pytest.fixture(params=[LeanClient, AiohttpClient], ids=["lean", "aiohttp"], autouse=True)
def client_cls(request):
    CLIENT["cls"] = request.param
    return request.param


CLIENT: dict = {}


def run_one(steps_by_name, name, tok=None, meter=None, **cfg_kw):
    """One request against the script server; with a LagMeter, the event loop's lag is probed every
    millisecond meanwhile (the server and client share the loop: a stall of this process shows there)."""
    app = script_app(steps_by_name)

    async def go(base):
        t0 = time.monotonic()
        probe = asyncio.ensure_future(loop_probe(meter, 0.001)) if meter is not None else None
        try:
            async with CLIENT["cls"](ClientConfig(base_url=base, model="m", **cfg_kw), t0, tok) as c:
                return await c.send(RequestSpec(name, "c", name, 3, 8), 0.0)
        finally:
            if probe is not None:
                probe.cancel()

    return asyncio.run(with_server(app, go)), app[SENT_LOG].get(name)


def test_exact_times_for_hand_placed_chunks():
    """The margins are the quiet machine's plus what this process was measured to stall (its loop's
    lag, which bounds a loop stamp's error, client/lag.py): twice, for a gap's two ends."""
    steps = [(0.20, chunk("a")), (0.05, chunk("b")), (0.30, chunk("c")), (0.05, USAGE_DONE % 3)]
    meter = LagMeter()
    rec, log = run_one({"p": steps}, "p", meter=meter)
    assert rec.status == "ok" and rec.output_tokens == 3 and rec.output_tokens_source == "usage"
    stall = 2 * meter.loop.max
    ttft = rec.first_token_at - rec.sent_at
    gaps = [b - a for a, b in zip(rec.chunk_times, rec.chunk_times[1:])]
    assert ttft == pytest.approx(0.20, abs=0.03 + stall)
    assert gaps == [pytest.approx(0.05, abs=0.02 + stall), pytest.approx(0.30, abs=0.03 + stall)]  # the stall is kept
    # against the server's own send times the client is within a couple of ms
    truth_gaps = [b - a for a, b in zip(log[1:], log[2:4])]
    assert gaps[0] == pytest.approx(truth_gaps[0], abs=0.005 + stall)
    assert gaps[1] == pytest.approx(truth_gaps[1], abs=0.005 + stall)


def test_several_tokens_per_chunk_with_continuous_usage():
    def c(text, n):
        return ('data: {"choices":[{"text":"%s"}],"usage":{"completion_tokens":%d}}\n\n' % (text, n)).encode()

    steps = [(0.01, c("ab", 2)), (0.01, c("cde", 5)), (0.0, USAGE_DONE % 5)]
    rec, _ = run_one({"p": steps}, "p")
    assert rec.chunk_tokens == (2, 3) and rec.output_tokens == 5


def test_no_usage_falls_back_to_tokenizer(tok):
    steps = [(0.0, chunk(" hello")), (0.0, chunk(" world")), (0.0, b"data: [DONE]\n\n")]
    rec, _ = run_one({"p": steps}, "p", tok=tok)
    assert rec.output_tokens_source == "tokenizer" and rec.output_tokens == 2
    rec, _ = run_one({"p": steps}, "p", tok=None)
    assert rec.output_tokens_source == "chunks" and rec.output_tokens == 2


def test_http_error_keeps_body():
    rec, _ = run_one({"p": [("status", 503, "overloaded, try later")]}, "p")
    assert rec.status == "http_error" and rec.http_status == 503 and "overloaded" in rec.error


def test_disconnect_mid_stream():
    rec, _ = run_one({"p": [(0.0, chunk("a")), (0.02, chunk("b")), ("close",)]}, "p")
    assert rec.status in ("disconnected", "bad_stream")
    assert len(rec.chunk_times) == 2  # what arrived is kept


def test_malformed_json_is_bad_stream():
    rec, _ = run_one({"p": [(0.0, chunk("a")), (0.0, b"data: {oops\n\n"), (0.0, b"data: [DONE]\n\n")]}, "p")
    assert rec.status == "bad_stream" and "malformed" in rec.error


def test_stream_without_done():
    rec, _ = run_one({"p": [(0.0, chunk("a")), (0.0, chunk("b"))]}, "p")
    assert rec.status == "bad_stream" and "[DONE]" in rec.error and len(rec.chunk_times) == 2


def test_in_stream_error_object():
    rec, _ = run_one({"p": [(0.0, chunk("a")), (0.0, b'data: {"error":{"message":"kv cache full"}}\n\n')]}, "p")
    assert rec.status == "bad_stream" and "kv cache full" in rec.error


def test_idle_timeout():
    rec, _ = run_one({"p": [(0.0, chunk("a")), (1.5, chunk("b")), (0.0, b"data: [DONE]\n\n")]}, "p", idle_timeout_s=0.3)
    assert rec.status == "timeout" and "idle" in rec.error and len(rec.chunk_times) == 1


def test_connection_refused():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    async def go():
        async with CLIENT["cls"](ClientConfig(base_url=f"http://127.0.0.1:{port}"), time.monotonic()) as c:
            return await c.send(RequestSpec("x", "c", "x", 1, 1), 0.0)

    rec = asyncio.run(go())
    assert rec.status == "disconnected" and "cannot connect" in rec.error


def test_chat_payload_and_api_key_not_in_record():
    cfg = ClientConfig(base_url="http://x", endpoint="/v1/chat/completions", model="m", api_key="sk-secret")
    c = CLIENT["cls"](cfg, 0.0)
    body = c.payload(RequestSpec("r", "c", [{"role": "user", "content": "hi"}], 1, 5))
    assert body["messages"][0]["content"] == "hi" and body["max_completion_tokens"] == 5
    assert body["stream_options"] == {"include_usage": True} and body["ignore_eos"] is True
    assert "sk-secret" not in str(body)


@pytest.mark.parametrize(
    "mode,needle",
    [
        ("html", "an HTML page: is the base URL the API server's?"),
        ("json", "a non-streaming body: does the server ignore stream=true?"),
    ],
)
def test_a_200_that_is_not_an_event_stream_says_what_it_was(mode, needle):
    rec, _ = run_one({}, mode)
    assert rec.status == "bad_stream" and rec.http_status == 200 and needle in rec.error


@pytest.mark.parametrize("mode", ["tokens-forever", "keepalive-forever"])
def test_the_total_timeout_ends_a_stream_that_never_stops(mode):
    t = time.monotonic()
    rec, _ = run_one({}, mode, timeout_s=0.6, idle_timeout_s=5)
    assert time.monotonic() - t < 3
    assert rec.status == "timeout" and "total timeout" in rec.error and len(rec.chunk_times) >= 1


@pytest.mark.parametrize(
    "mode,status,needle",
    [
        ("text-is-a-number", "bad_stream", "choices[0] is not an OpenAI choice"),
        ("choices-is-an-object", "bad_stream", "'choices' is not a list"),
        ("choice-is-a-string", "bad_stream", "choices[0] is not an OpenAI choice"),
        ("usage-is-a-list", "ok", None),  # usage of the wrong type is ignored
        ("tokens-as-a-string", "ok", None),
    ],
)
def test_valid_json_of_unexpected_types_is_one_record_with_a_reason(mode, status, needle):
    rec, _ = run_one({}, mode)
    assert rec.status == status
    if needle:
        assert needle in rec.error
    else:
        assert rec.output_tokens_source == "chunks" and rec.output_tokens == len(rec.chunk_times)


def test_reasoning_deltas_count_as_output_but_the_answer_starts_later():
    meter = LagMeter()
    rec, _ = run_one({}, "reasoning", meter=meter)
    assert rec.status == "ok" and len(rec.chunk_times) == 4 and rec.output_tokens == 4
    assert rec.reasoning_tokens == 2 and rec.first_answer_at == rec.chunk_times[2]
    # the script's 0.12 s, give or take the loop's measured stall (see the test of exact times)
    assert rec.first_answer_at - rec.first_token_at == pytest.approx(0.12, abs=0.03 + 2 * meter.loop.max)


def test_tool_call_deltas_are_output():
    rec, _ = run_one({}, "tool-call")
    assert rec.status == "ok" and len(rec.chunk_times) == 2 and rec.first_answer_at == rec.first_token_at


def test_several_tokens_per_chunk_without_usage_are_counted_per_chunk(tok):
    rec, _ = run_one({}, "packed-no-usage", tok=tok)
    assert rec.output_tokens_source == "tokenizer" and rec.chunk_tokens == (3, 3, 1) and rec.output_tokens == 7


def test_priority_is_sent_as_vllms_field_only_when_the_request_has_a_lane():
    cfg = ClientConfig(base_url="http://x", model="m")
    c = CLIENT["cls"](cfg, 0.0)
    assert c.payload(RequestSpec("r", "c", "hi", 1, 5, priority=2))["priority"] == 2
    assert "priority" not in c.payload(RequestSpec("r", "c", "hi", 1, 5))


def test_a_host_name_is_resolved_and_an_ip_literal_needs_no_lookup():
    """The kernel-stamped connection skips the resolver for IP literals (a wave of a thousand users opens a
    thousand connections at once) and still resolves a name."""
    from goodbench.client.conn import _numeric

    assert _numeric("127.0.0.1", 80) == (socket.AF_INET, ("127.0.0.1", 80))
    assert _numeric("::1", 8000) == (socket.AF_INET6, ("::1", 8000, 0, 0))
    assert _numeric("localhost", 80) is None and _numeric("1.2.3", 80) is None
    # the server below listens on 127.0.0.1 only: where localhost is ::1 first, the next address is tried
    app = script_app({"p": [(0.01, chunk("a")), (0.01, USAGE_DONE % 1)]})

    async def go(base):
        base = base.replace("127.0.0.1", "localhost")
        async with CLIENT["cls"](ClientConfig(base_url=base, model="m"), time.monotonic(), None) as c:
            return await c.send(RequestSpec("p", "c", "p", 3, 8), 0.0)

    rec = asyncio.run(with_server(app, go))
    assert rec.status == "ok" and rec.output_tokens == 1, rec.error
