"""Responses and Messages stream events (client/events.py) classified into chunks, on frames as the
real APIs and vLLM 0.32 send them (from /work/notes: recorded upstream fixtures and captured vLLM
streams), and the records a StreamState makes of whole streams."""

import json

import pytest

from goodbench.client.events import classify_messages, classify_responses, unary_result
from goodbench.client.stream import StreamState
from goodbench.records import RequestSpec


def frames(*events) -> bytes:
    """SSE with `event:` lines, as both APIs send them."""
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def state(classify, data: bytes, step: float = 0.01) -> StreamState:
    """Feed each event as its own read, `step` s apart."""
    st = StreamState(lambda: 0.0, 0.0, classify)
    for k, ev in enumerate(data.split(b"\n\n")[:-1]):
        st.feed(ev + b"\n\n", k * step)
    st.on_eof()
    return st


RESP_USAGE = {"input_tokens": 18, "output_tokens": 3, "output_tokens_details": {"reasoning_tokens": 1}}
RESPONSES = frames(
    {"type": "response.created", "sequence_number": 0, "response": {"status": "in_progress", "usage": None}},
    {"type": "response.in_progress", "sequence_number": 1, "response": {"usage": None}},
    {"type": "response.output_item.added", "item": {"type": "reasoning", "id": "rs_1"}},
    {"type": "response.reasoning_text.delta", "delta": ".database", "item_id": "rs_1"},
    {"type": "response.reasoning_text.done", "text": ".database"},
    {"type": "response.output_item.added", "item": {"type": "message", "id": "msg_1", "content": []}},
    {"type": "response.content_part.added", "part": {"type": "output_text", "text": ""}},
    {"type": "response.output_text.delta", "delta": "I"},
    {"type": "response.output_text.delta", "delta": " am"},
    {"type": "response.output_text.done", "text": "I am"},
    {"type": "response.completed", "response": {"status": "incomplete", "usage": RESP_USAGE}},
)


def test_a_responses_stream_is_chunks_reasoning_first_and_usage_from_completed():
    st = state(classify_responses, RESPONSES)
    assert st.done and st.status == "ok"
    assert list(st.texts) == [".database", "I", " am"] and list(st.thinking) == [1, 0, 0]
    assert list(st.times) == pytest.approx([0.03, 0.07, 0.08])  # not the created / item-added events
    assert (st.usage_ct, st.prompt_srv, st.usage_rt) == (3, 18, 1)
    assert st.answer_text() == "I am"


def test_responses_function_calls_are_output_and_failures_are_errors():
    added = {"type": "response.output_item.added", "item": {"type": "function_call", "name": "get_weather"}}
    assert classify_responses(json.dumps(added).encode()).text == "get_weather"
    delta = {"type": "response.function_call_arguments.delta", "delta": '"("'}
    assert classify_responses(json.dumps(delta).encode()).kind == "content"
    failed = {"type": "response.failed", "response": {"error": {"message": "overloaded"}}}
    c = classify_responses(json.dumps(failed).encode())
    assert c.kind == "error" and "overloaded" in c.error


MESSAGES = frames(
    {"type": "message_start", "message": {"usage": {"input_tokens": 11, "cache_read_input_tokens": 5}}},
    {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}},
    {"type": "ping"},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "hmm"}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "Eu"}},
    {"type": "content_block_stop", "index": 0},
    {"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "name": "search"}},
    {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": ""}},
    {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": '{"q'}},
    {"type": "content_block_stop", "index": 1},
    {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 88}},
    {"type": "message_stop"},
)


def test_a_messages_stream_thinking_then_a_tool_call_with_the_final_count():
    st = state(classify_messages, MESSAGES)
    assert st.done and st.status == "ok"
    assert list(st.texts) == ["hmm", "search", '{"q'] and list(st.thinking) == [1, 0, 0]
    assert (st.usage_ct, st.prompt_srv) == (88, 16)  # the prompt counts the cached tokens too


def test_anthropic_padding_inside_frames_parses():
    raw = b'event: message_stop\ndata: {"type":"message_stop"              }\n\n'
    assert state(classify_messages, raw).done


@pytest.mark.parametrize("classify,api", [(classify_responses, "Responses"), (classify_messages, "Messages")])
def test_a_chat_chunk_or_a_sentinel_is_not_this_apis_event(classify, api):
    chunk = b'{"choices":[{"index":0,"delta":{"content":"x"}}]}'
    for payload in (chunk, b"[DONE]", b'{"no":"type"}'):
        c = classify(payload)
        assert c.kind == "bad" and f"{api} API" in c.error and "--endpoint-type" in c.error
    assert classify(b"{broken").kind == "bad"
    err = classify(b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}')
    assert err.kind == "error" and "Overloaded" in err.error


def test_usage_without_any_output_event_is_a_clear_error_not_zeros():
    only_end = frames({"type": "response.completed", "response": {"usage": {"output_tokens": 7}}})
    st = state(classify_responses, only_end)
    r = st.record(RequestSpec("r", "c", "p", 1, 7), 0.0, 0.0, 1.0, st.status, 200, st.error)
    assert r.status == "bad_stream" and "7 output tokens" in r.error and "--endpoint-type" in r.error
    # a tool call a server's parser held back (cut short by max_tokens) is not a mismatch: no chunks
    tool = st.record(RequestSpec("r", "c", "p", 1, 7, tools=True), 0.0, 0.0, 1.0, st.status, 200, st.error)
    assert tool.status == "ok" and tool.output_tokens == 7 and tool.first_token_at is None


def test_text_under_an_unknown_event_name_and_no_usage_is_no_answer():
    """Issue 42's probe (`resp_renamed_delta_no_usage`): text under `response.text.delta` (no API's name)
    and a `response.completed` without usage read as "DONE 3/3", 0 tokens, a valid run. A server that
    says the reply was empty (usage 0) is believed."""
    renamed = frames(
        {"type": "response.text.delta", "delta": "Hel"},
        {"type": "response.text.delta", "delta": "lo"},
        {"type": "response.completed", "response": {"status": "completed"}},
    )
    st = state(classify_responses, renamed)
    r = st.record(RequestSpec("r", "c", "p", 1, 7), 0.0, 0.0, 1.0, st.status, 200, st.error)
    assert r.status == "bad_stream" and "no usage" in r.error and "--endpoint-type" in r.error
    empty = frames({"type": "response.completed", "response": {"usage": {"output_tokens": 0}}})
    st = state(classify_responses, empty)
    r = st.record(RequestSpec("r", "c", "p", 1, 7), 0.0, 0.0, 1.0, st.status, 200, st.error)
    assert r.status == "ok" and r.output_tokens == 0


def test_openai_chunks_whose_tokens_decode_to_no_text_are_an_answer_not_a_mismatch():
    """A real vLLM serving a random-weight model streamed 63 tokens as chunks of empty text; the run
    must keep the request (no first token), not call the endpoint type wrong."""
    from goodbench.client.sse import classify

    empty = {"choices": [{"index": 0, "text": "", "finish_reason": None}]}
    usage = {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 63}}
    data = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in (empty, empty, usage)) + b"data: [DONE]\n\n"
    st = state(classify, data)
    r = st.record(RequestSpec("r", "c", "p", 1, 63), 0.0, 0.0, 1.0, st.status, 200, st.error)
    assert r.status == "ok" and r.output_tokens == 63 and r.first_token_at is None


def test_unary_bodies():
    assert unary_result("embeddings", {"data": [{}, {}], "usage": {"prompt_tokens": 4}}) == (2, 4)
    assert unary_result("rerank", {"results": [{}]}) == (1, None)
    with pytest.raises(ValueError, match="no 'results'"):
        unary_result("rerank", {"data": []})


@pytest.mark.parametrize("size", [1, 7, 50, 10_000])
def test_named_events_split_or_merged_across_reads_parse_alike(size):
    from goodbench.client.events import NamedEventParser

    whole = []
    for ev in RESPONSES.split(b"\n\n")[:-1]:
        whole += NamedEventParser().feed(ev + b"\n\n")
    p, got = NamedEventParser(), []
    for i in range(0, len(RESPONSES), size):
        got += p.feed(RESPONSES[i : i + size])
    assert got == whole and len(got) == 11


def test_a_one_body_api_answered_with_an_event_stream_says_what_was_expected():
    """Issue 42's probe: "expected text/event-stream, got text/event-stream" for a unary endpoint."""
    from goodbench.client.config import describe_reply

    status, why = describe_reply(200, "text/event-stream", b"data: {}\n\n", unary=True)
    assert status == "bad_stream" and why.startswith("expected application/json, got text/event-stream")
    assert "--endpoint-type" in why
    assert describe_reply(200, "application/json", b"{}")[1].startswith(
        "expected text/event-stream, got application/json"
    )


def test_usage_equal_to_the_chunks_needs_no_tokenizer_per_chunk():
    """Issue 42 item 2's lead: with usage only at the end, each finished stream's record tokenised every
    chunk's text on the event loop (1.2-3.2 ms per 128-chunk record on the 2-vCPU box; 55-124 us now),
    which a wave of 512 streams ending together paid 512 times. n chunks and n tokens are one each."""
    from goodbench.client.sse import classify

    class NoTokenizer:
        def count_batch(self, texts):
            raise AssertionError("tokenised per chunk")

        def count(self, text):
            return 99

    chunk = {"choices": [{"index": 0, "text": " word"}]}
    usage = {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 3}}
    data = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in (chunk, chunk, chunk, usage))
    st = state(classify, data + b"data: [DONE]\n\n")
    r = st.record(RequestSpec("r", "c", "p", 5, 3), 0.0, 0.0, 1.0, st.status, 200, st.error, NoTokenizer())
    assert (
        r.status == "ok" and r.chunk_tokens == (1, 1, 1) and (r.output_tokens, r.output_tokens_source) == (3, "usage")
    )
