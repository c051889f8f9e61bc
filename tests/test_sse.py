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
