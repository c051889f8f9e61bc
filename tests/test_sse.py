import json

from hypothesis import given, settings, strategies as st

from goodbench.client.sse import SSEParser, classify


def feed_all(parts):
    p = SSEParser()
    out = []
    for part in parts:
        out += p.feed(part)
    return out + p.close()


def test_split_and_multiple_events():
    assert feed_all([b"data: a\n\nda", b"ta: b\n", b"\ndata: c\n\n"]) == [b"a", b"b", b"c"]


def test_crlf_and_lone_cr_and_split_crlf():
    assert feed_all([b"data: a\r\n\r\ndata: b\r\r"]) == [b"a", b"b"]
    assert feed_all([b"data: a\r", b"\n\r", b"\ndata: b\r\n\r\n"]) == [b"a", b"b"]


def test_comments_multiline_and_other_fields():
    s = b": keep-alive\n\nevent: message\nid: 3\ndata: line1\ndata: line2\nretry: 10\n\n"
    assert feed_all([s]) == [b"line1\nline2"]


def test_data_without_space_and_no_trailing_blank_line():
    assert feed_all([b"data:x\n\ndata: tail"]) == [b"x", b"tail"]


def test_large_event_is_not_capped():
    big = json.dumps({"choices": [{"text": "x" * 300_000}]}).encode()
    parts = [b"data: " + big[:70000], big[70000:200000], big[200000:] + b"\n\n"]
    out = feed_all(parts)
    assert out == [big]
    assert classify(out[0]).text == "x" * 300_000


def test_classify_variants():
    assert classify(b"[DONE]").kind == "done"
    c = classify(b'{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}')
    assert c.kind == "meta"
    c = classify(b'{"choices":[{"delta":{"content":"hi"}}]}')
    assert (c.kind, c.text) == ("content", "hi")
    c = classify(b'{"choices":[{"text":" a","finish_reason":null}]}')
    assert (c.kind, c.text) == ("content", " a")
    c = classify(b'{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7}}')
    assert (c.kind, c.completion_tokens, c.prompt_tokens) == ("meta", 7, 5)
    c = classify(b'{"choices":[{"delta":{"reasoning_content":"think"}}]}')
    assert c.kind == "content"
    c = classify(b'{"error":{"message":"boom","code":500}}')
    assert c.kind == "error" and "boom" in c.error
    assert classify(b"{not json").kind == "bad"
    assert classify(b"[1, 2]").kind == "bad"


EVENTS = st.lists(
    st.text(alphabet=st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)), min_size=1, max_size=40),
    min_size=1,
    max_size=12,
)


@settings(max_examples=200, deadline=None)
@given(
    events=EVENTS,
    eol=st.sampled_from([b"\n", b"\r\n", b"\r"]),
    cuts=st.lists(st.integers(0, 10_000), max_size=20),
    comments=st.booleans(),
)
def test_random_splits_give_the_same_events(events, eol, cuts, comments):
    stream = b""
    for e in events:
        if comments:
            stream += b": ping" + eol
        stream += b"data: " + e.encode() + eol + eol
    pos = sorted({c % (len(stream) + 1) for c in cuts})
    parts = [stream[a:b] for a, b in zip([0] + pos, pos + [len(stream)])]
    expected = [e.encode() for e in events]
    # a leading space in the payload is eaten by the "data: " convention only once
    assert feed_all(parts) == expected


# values a server might put in any field: the right type, the wrong one, empty, huge, odd text
ODD = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 10) | st.sampled_from([2**31, 2**63, 10**30]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=6) | st.sampled_from(["", " hi", "\ud800", "\x7f", "é"]),
    st.just([]),
    st.just({}),
)
COUNT = st.one_of(st.integers(0, 2000), ODD)
USAGE = st.one_of(
    ODD,
    st.fixed_dictionaries(
        {},
        optional={
            "completion_tokens": COUNT,
            "prompt_tokens": COUNT,
            "completion_tokens_details": st.one_of(
                ODD, st.fixed_dictionaries({}, optional={"reasoning_tokens": COUNT})
            ),
        },
    ),
)
CALLS = st.one_of(
    ODD,
    st.lists(
        st.one_of(
            ODD,
            st.fixed_dictionaries(
                {},
                optional={
                    "function": st.one_of(ODD, st.fixed_dictionaries({}, optional={"name": ODD, "arguments": ODD}))
                },
            ),
        ),
        max_size=2,
    ),
)
DELTA = st.one_of(
    ODD,
    st.fixed_dictionaries(
        {},
        optional={"content": ODD, "tool_calls": CALLS, "reasoning_content": ODD, "reasoning": ODD, "role": ODD},
    ),
)
CHOICE = st.one_of(
    ODD, st.fixed_dictionaries({}, optional={"text": ODD, "delta": DELTA, "index": ODD, "finish_reason": ODD})
)
SHAPES = [  # the usual shapes and their near misses, each tried whatever hypothesis draws
    {"choices": [{"text": " hi", "index": 0}]},
    {"choices": [{"delta": {}}]},
    {"choices": [{"delta": {"role": "assistant", "content": ""}}]},
    {"choices": [{"delta": {"content": None, "reasoning_content": "hm"}}]},
    {"choices": [{"delta": {"content": "", "reasoning": "hm", "reasoning_content": ""}}]},
    {"choices": [{"delta": {"tool_calls": [{"function": {"name": "f", "arguments": "{"}}]}}]},
    {"choices": [{"delta": {"tool_calls": []}}]},
    {"choices": [{"delta": None, "text": "t"}]},
    {"choices": [], "usage": {"completion_tokens": 5, "prompt_tokens": 3}},
    {"choices": [{"text": ""}], "usage": {"completion_tokens_details": {"reasoning_tokens": 2}}},
    {"usage": {"completion_tokens": True}},
    {"error": {"message": "boom"}},
    {"error": ""},
]
EVENT = st.one_of(
    st.sampled_from(SHAPES),
    ODD,
    st.fixed_dictionaries(
        {},
        optional={
            "choices": st.one_of(ODD, st.lists(CHOICE, max_size=2)),
            "usage": USAGE,
            "error": ODD,
            "id": ODD,
            "object": ODD,
        },
    ),
)


@settings(max_examples=1500, deadline=None)
@given(
    event=EVENT,
    space=st.sampled_from(["", " ", "\t", "\n ", "\xa0"]),
    tail=st.sampled_from(["", " ", "\r\n", "x", "\xa0"]),
    cut=st.integers(0, 400),
    duplicate=st.booleans(),
)
def test_the_fast_path_agrees_with_the_definition(event, space, tail, cut, duplicate):
    """classify decodes the usual event straight into its fields (msgspec) and hands the rest to
    classify_json, the definition: whatever a server sends, both give the same Chunk."""
    from goodbench.client.sse import classify_json

    for shape in SHAPES:
        payload = json.dumps(shape).encode()
        assert classify(payload) == classify_json(payload), payload
    text = json.dumps(event)
    if duplicate and text.startswith("{") and len(text) > 2:  # a key given twice: the last one counts
        text = '{"usage": {"completion_tokens": 7}, ' + text[1:]
    for payload in (
        (space + text + tail).encode("utf-8", "surrogatepass"),
        text.encode("utf-8", "surrogatepass")[:cut],  # cut short, maybe mid-character
        b"[DONE]",
    ):
        assert classify(payload) == classify_json(payload), payload
