"""The reference engine's Responses, Messages, tool-call, embeddings, rerank and score endpoints, read by
goodbench's own clients on a loopback socket: every API's stream becomes the same per-chunk record
(TTFT on the first token's step, one chunk per token, usage equal to the streamed tokens)."""

import asyncio
import json
import time

import pytest
from aiohttp.test_utils import TestServer
from conftest import drive
from realclock import median, on_time_gaps, read_steps, way_out

from goodbench.client.aiohttp_client import AiohttpClient
from goodbench.client.config import ClientConfig
from goodbench.client.lean import LeanClient
from goodbench.engine.config import EngineConfig
from goodbench.engine.costmodel import CostModel
from goodbench.engine.serve.server import RUNNER_OPTIONS, EngineServer, ServeOptions
from goodbench.records import RequestSpec

STEP_MS = 20.0


def engine(tok, step_ms=STEP_MS, api_key=None, step_trace=None):
    cfg = EngineConfig(max_model_len=4096).resolved()
    opts = ServeOptions(api_key=api_key, step_trace=step_trace and str(step_trace))
    return EngineServer(cfg, opts, tok, CostModel.for_config(cfg, fixed_step_ms=step_ms))


def send_all(tok, path, specs, client=LeanClient, api_key=None, step_trace=None, **cfgkw):
    """The records; with step_trace, also the client's t0 and the server's steps (tests/realclock.py)."""

    async def go():
        srv = engine(tok, api_key=api_key, step_trace=step_trace)
        server = TestServer(srv.app(), host="127.0.0.1", **RUNNER_OPTIONS)
        await server.start_server()
        try:
            cfg = ClientConfig(base_url=f"http://127.0.0.1:{server.port}", endpoint=path, api_key=api_key, **cfgkw)
            t0 = time.monotonic()
            async with client(cfg, t0, tok) as c:
                return t0, srv.t0, await asyncio.gather(*(c.send(s, 0.0) for s in specs))
        finally:
            await server.close()

    t0, srv_t0, recs = asyncio.run(go())
    return (recs, t0, read_steps(step_trace, srv_t0)) if step_trace else recs


def chat_spec(i=0, n=6, **kw):
    msgs = [{"role": "system", "content": "be brief"}, {"role": "user", "content": f"question {i} about things"}]
    return RequestSpec(f"r{i}", "c", msgs, 12, n, **kw)


@pytest.mark.parametrize("client", [LeanClient, AiohttpClient])
@pytest.mark.parametrize("path", ["/v1/responses", "/v1/messages", "/v1/chat/completions"])
def test_every_streaming_api_gives_one_chunk_per_token_on_the_step_clock(tok, path, client, tmp_path):
    (r,), t0, steps = send_all(tok, path, [chat_spec(n=6)], client=client, step_trace=tmp_path / "steps.jsonl")
    assert r.status == "ok", r.error
    assert r.output_tokens == 6 and r.output_tokens_source == "usage"
    assert len(r.chunk_times) == len(steps) == 6 and r.prompt_tokens_server > 0
    # the engine steps every 20 ms: each token's event arrives when its step ends, one step after the
    # previous one (held to the loop's own record: its late steps on a loaded machine move no margin)
    stamps = [t0 + t for t in r.chunk_times]
    out = way_out(stamps, steps)
    assert min(out) >= -1e-4 and median(out) <= 0.002, out
    assert median(on_time_gaps(stamps, steps)) == pytest.approx(0.020, abs=0.001)
    assert r.first_token_at - r.sent_at > 0.010  # the preamble (created / message_start) is not a token


@pytest.mark.parametrize("path", ["/v1/responses", "/v1/messages", "/v1/chat/completions"])
def test_reasoning_then_answer_is_told_apart_in_every_api(tok, path):
    (r,) = send_all(tok, path, [chat_spec(n=6, reasoning_tokens=2)])
    assert r.status == "ok", r.error
    assert r.reasoning_tokens == 2 and r.output_tokens == 6
    assert r.first_answer_at == r.chunk_times[2]


@pytest.mark.parametrize("path", ["/v1/responses", "/v1/messages", "/v1/chat/completions"])
def test_tool_calls_are_output_and_their_text_is_the_call(tok, path):
    got = []

    async def go():
        srv = engine(tok)
        server = TestServer(srv.app(), host="127.0.0.1", **RUNNER_OPTIONS)
        await server.start_server()
        try:
            cfg = ClientConfig(base_url=f"http://127.0.0.1:{server.port}", endpoint=path)
            async with LeanClient(cfg, time.monotonic(), tok) as c:
                return await c.send(chat_spec(n=4, tools=True), 0.0, on_text=got.append)
        finally:
            await server.close()

    r = asyncio.run(go())
    assert r.status == "ok", r.error
    # the function's name may come as its own event, in the first fragment's write (Responses, Messages);
    # a client read late on a busy machine may hold later tokens too (one chunk per token on the step
    # clock is held by the test above, against the server's own step record)
    assert r.output_tokens == 4 and len(r.chunk_times) in (4, 5) and len(set(r.chunk_times)) <= 4
    assert len(r.chunk_times) == 4 or r.chunk_times[0] == r.chunk_times[1]
    text = got[0]
    assert text.startswith("lookup")  # the function's name, then its arguments
    assert json.loads(text[len("lookup") :])["query"]


@pytest.mark.parametrize("api,batch", [("embeddings", 3), ("rerank", 4), ("score", 2)])
def test_one_body_apis_record_latency_and_items(tok, api, batch):
    specs = [RequestSpec(f"r{i}", "c", "one two three four five six seven eight nine ten", 10, 1) for i in range(2)]
    recs = send_all(tok, f"/v1/{api}", specs, pool_batch=batch)
    for r in recs:
        assert r.status == "ok", r.error
        assert r.items == batch and r.output_tokens == 0
        assert r.first_token_at == r.finished_at or abs(r.first_token_at - r.chunk_times[0]) < 1e-9
        assert r.first_token_at - r.sent_at >= STEP_MS / 1000 * 0.5  # a prefill step at least
        assert r.prompt_tokens_server >= 10


def test_a_messages_parser_fed_chat_chunks_says_so_instead_of_measuring_zeros():
    from scripted import script_app, with_server

    async def fn(url):
        cfg = ClientConfig(base_url=url, endpoint="/v1/chat/completions", endpoint_type="messages")
        async with LeanClient(cfg, time.monotonic()) as c:
            return await c.send(RequestSpec("r", "c", "ok", 3, 2), 0.0)

    r = asyncio.run(with_server(script_app(), fn))
    assert r.status == "bad_stream" and "Messages API" in r.error and "--endpoint-type" in r.error


def test_messages_sends_anthropic_headers_and_the_engine_accepts_x_api_key(tok):
    (r,) = send_all(tok, "/v1/messages", [chat_spec()], api_key="sekrit")
    assert r.status == "ok", r.error

    async def fn(s, srv):
        body = {"model": "default", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}
        async with s.post("/v1/messages", json=body, headers={"x-api-key": "sekrit"}) as ok:
            async with s.post("/v1/messages", json=body, headers={"x-api-key": "wrong"}) as bad:
                return ok.status, await ok.json(), bad.status

    status, full, bad = drive(engine(tok, api_key="sekrit"), fn)
    assert status == 200 and bad == 401
    assert full["usage"]["output_tokens"] == 2 and full["content"][0]["type"] == "text"


@pytest.mark.parametrize(
    "path,body,needle",
    [
        ("/v1/messages", {"messages": [{"role": "user", "content": "x"}]}, "max_tokens"),
        ("/v1/responses", {"input": []}, "input"),
        ("/v1/embeddings", {"input": []}, "input"),
        ("/v1/rerank", {"query": "q"}, "documents"),
        ("/v1/rerank", {"documents": ["a"]}, "query"),
    ],
)
def test_bad_requests_to_the_new_apis_get_400(tok, path, body, needle):
    async def fn(s, srv):
        async with s.post(path, json=body) as r:
            return r.status, await r.json()

    status, err = drive(engine(tok), fn)
    assert status == 400 and needle in err["message"]


def test_a_huge_embeddings_request_does_not_hold_the_servers_loop(tok):
    """Issue 42's probe: one 100k-item rerank or embeddings request stalled every other stream of
    `goodbench serve` for 2.4-3.8 s (parsed, tokenised and answered on the event loop). A ticker on the
    server's loop must keep turning while the request is parsed, run and answered (30k items here: about
    2.7 s held before, pauses of 0.1-0.2 s now, the cyclic GC's, on the 2-vCPU box)."""
    import io

    import aiohttp

    body = json.dumps({"input": [f"item {i} of many" for i in range(30_000)]}).encode()

    async def go():
        srv = engine(tok, step_ms=2.0)
        server = TestServer(srv.app(), host="127.0.0.1", **RUNNER_OPTIONS)
        await server.start_server()
        gaps, stop = [], asyncio.Event()

        async def ticker():
            last = time.monotonic()
            while not stop.is_set():
                await asyncio.sleep(0.005)
                now = time.monotonic()
                gaps.append(now - last)
                last = now

        tick = asyncio.ensure_future(ticker())
        try:
            async with aiohttp.ClientSession() as s:
                t = time.monotonic()
                url = f"http://127.0.0.1:{server.port}/v1/embeddings"
                async with s.post(url, data=io.BytesIO(body), headers={"Content-Type": "application/json"}) as r:
                    status, raw = r.status, await r.read()
                took = time.monotonic() - t
        finally:
            stop.set()
            await tick
            await server.close()
        return status, raw, took, gaps

    status, raw, took, gaps = asyncio.run(go())
    assert status == 200 and len(json.loads(raw)["data"]) == 30_000
    # the loop's longest pause (a full collection of the cyclic GC as the heap grows), held at 1 s for a
    # loaded 2-core machine; before, the whole parse-tokenise-answer in one hold
    assert max(gaps) < 1.0, (max(gaps), took)
