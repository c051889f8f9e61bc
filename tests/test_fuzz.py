"""Property-based fuzzing (hypothesis): the stream parser and stream state never raise and always give
one record; the engine server answers any body with a 200 stream or an OpenAI-shaped 4xx and still
serves a normal request afterwards. Bounded in CI; GOODBENCH_FUZZ=long runs 5,000 examples each."""

import asyncio
import json

import aiohttp
from aiohttp.test_utils import TestServer
from conftest import FUZZ
from hypothesis import given, strategies as st

from goodbench.client.stream import StreamState
from goodbench.engine.config import EngineConfig
from goodbench.engine.costmodel import CostModel
from goodbench.engine.serve.server import RUNNER_OPTIONS, EngineServer, ServeOptions
from goodbench.records import STATUSES, RequestSpec

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=6), kids, max_size=4),
    max_leaves=12,
)
# events shaped like OpenAI chunks whose values are anything JSON can hold
CHUNK = st.one_of(
    JSON,
    st.fixed_dictionaries({"choices": JSON}),
    st.fixed_dictionaries(
        {
            "choices": st.lists(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "text": JSON,
                        "delta": JSON | st.fixed_dictionaries({}, optional={"content": JSON, "reasoning": JSON}),
                        "finish_reason": JSON,
                    },
                ),
                max_size=2,
            )
        },
        optional={
            "usage": JSON | st.fixed_dictionaries({}, optional={"completion_tokens": JSON, "prompt_tokens": JSON})
        },
    ),
    st.fixed_dictionaries({"error": JSON}),
)


def stream_bytes(events, done: bool) -> bytes:
    out = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)
    return out + (b"data: [DONE]\n\n" if done else b"")


@FUZZ
@given(
    events=st.lists(CHUNK, max_size=6),
    done=st.booleans(),
    cuts=st.lists(st.integers(0, 4000), max_size=10),
    junk=st.binary(max_size=40),
)
def test_any_stream_split_anywhere_gives_exactly_one_record(events, done, cuts, junk):
    data = stream_bytes(events, done) + junk
    pos = sorted({c % (len(data) + 1) for c in cuts})
    clock = iter(range(10_000)).__next__
    s = StreamState(lambda: float(clock()), 0.0)
    for a, b in zip([0] + pos, pos + [len(data)]):
        s.on_data(data[a:b])
    s.on_eof()
    rec = s.record(RequestSpec("r", "c", "p", 1, 8), 0.0, 0.0, 1.0, s.status, 200, s.error)
    assert rec.status in STATUSES and rec.output_tokens >= 0
    assert len(rec.chunk_times) == len(rec.chunk_tokens)
    if rec.status != "ok":
        assert rec.error


FIELDS = {
    "model": st.sampled_from(["llama-3.1-8b", "nope"]) | JSON,
    "prompt": st.text(max_size=20) | JSON,
    "messages": JSON | st.lists(st.fixed_dictionaries({"role": st.just("user"), "content": JSON}), max_size=2),
    "max_tokens": st.integers(-2, 6) | JSON,
    "max_completion_tokens": st.integers(-2, 6) | JSON,
    "stream": st.booleans() | JSON,
    "stream_options": JSON
    | st.fixed_dictionaries({}, optional={"include_usage": JSON, "continuous_usage_stats": JSON}),
    "priority": st.integers() | st.floats() | JSON,
    "n": st.integers(-1, 3) | JSON,
    "ignore_eos": JSON,
}
VALID = {"prompt": "hi there", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}
# anything at all; or a valid request with a few fields replaced by anything (reaches deep validation)
BODY = st.one_of(
    JSON,
    st.fixed_dictionaries({}, optional=FIELDS),
    st.fixed_dictionaries({}, optional=FIELDS).map(lambda d: {**VALID, **d}),
    st.fixed_dictionaries(
        {},
        optional={
            "stream": st.booleans(),
            "stream_options": st.fixed_dictionaries({}, optional={"include_usage": st.booleans()}),
        },
    ).map(lambda d: {**VALID, **d}),
)


def _serve(tok):
    cfg = EngineConfig(max_model_len=4096).resolved()
    return EngineServer(cfg, ServeOptions(), tok, CostModel.for_config(cfg, fixed_step_ms=1.0))


async def _post(s, path: str, raw: bytes):
    async with s.post(path, data=raw, headers={"Content-Type": "application/json"}) as r:
        body = await r.read()
        return r.status, r.headers.get("Content-Type", ""), body


def test_the_engine_server_answers_any_body_and_keeps_serving(tok):
    srv = _serve(tok)
    seen = {"stream": 0, "json": 0, "error": 0}

    async def go():
        server = TestServer(srv.app(), host="127.0.0.1", **RUNNER_OPTIONS)
        await server.start_server()
        try:
            async with aiohttp.ClientSession(f"http://127.0.0.1:{server.port}") as s:
                loop = asyncio.get_running_loop()

                @FUZZ
                @given(body=BODY, chat=st.booleans(), raw=st.none() | st.binary(max_size=30))
                def one(body, chat, raw):
                    path = "/v1/chat/completions" if chat else "/v1/completions"
                    payload = raw if raw is not None else json.dumps(body).encode()
                    status, ctype, text = asyncio.run_coroutine_threadsafe(_post(s, path, payload), loop).result(30)
                    assert status == 200 or 400 <= status < 500, (status, text[:200])
                    if status == 200:
                        seen["stream" if ctype.startswith("text/event-stream") else "json"] += 1
                    else:
                        err = json.loads(text)
                        assert err["object"] == "error" and isinstance(err["message"], str)
                        seen["error"] += 1

                await loop.run_in_executor(None, one)  # hypothesis drives from a thread; requests run here
                status, _, text = await _post(
                    s,
                    "/v1/completions",
                    json.dumps({"prompt": "still there?", "max_tokens": 3, "stream": True}).encode(),
                )
                return status, text
        finally:
            await server.close()

    status, text = asyncio.run(go())
    assert status == 200 and text.endswith(b"data: [DONE]\n\n") and srv.failed is None
    assert seen["error"] and (seen["stream"] + seen["json"])  # the generator reached both outcomes
